"""A compact, cheap encoding of the game state (a subset of §4.3.1's features) as a dict of float32 arrays.

- buffers  (6, 9): the current buffer and the next 5, each [present, size / fast memory, is_output,
  (target - current target) / T, live start / T, live end / T, demand / largest initial supply,
  benefit / largest initial benefit, in an alias group]. The current buffer's benefit is the updated one.
- actions  (3, 4): per Copy/NoCopy/Drop [legal, start / T, end / T, offset / fast memory] (0 when illegal).
- supply   (32,): W around the current target (16 steps before, 16 from it), / largest initial supply.
- memory   (64,): occupied fraction of fast memory at the target time, in 64 equal offset bins.
- progress (2,):  position / buffers, return / (all-slow latency - all-fast latency).
Left out for cost: the 128x128 memory-map window and the next buffers of the same tensor.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from algorithms.mmap.game import DROP, MMapGame

LOOKAHEAD = 6
BUFFER_FEATURES = 9
SUPPLY_WINDOW = 32
MEMORY_BINS = 64
FEATURE_LOW, FEATURE_HIGH = -1.0, 1e6
"""Every feature is a ratio in [0, 1] except size and demand ratios, which are clipped to FEATURE_HIGH."""


def observation_space() -> spaces.Dict:
    def box(*shape):
        return spaces.Box(FEATURE_LOW, FEATURE_HIGH, shape=shape, dtype=np.float32)

    return spaces.Dict({"buffers": box(LOOKAHEAD, BUFFER_FEATURES), "actions": box(3, 4),
                        "supply": box(SUPPLY_WINDOW), "memory": box(MEMORY_BINS), "progress": box(2)})


class ObservationEncoder:
    def __init__(self, problem):
        self.problem = problem
        self.time_scale = max(problem.num_instructions, 1)
        self.memory_scale = max(problem.fast_memory_bytes, 1)
        self.supply_scale = max(int(problem.supply.max(initial=0)), 1)
        self.benefit_scale = max(max(problem.initial_benefit, default=0.0), 1e-12)
        self.return_scale = max(problem.latency_all_slow - problem.latency_all_fast, 1e-12)

    def encode(self, game: MMapGame) -> dict:
        problem = self.problem
        position = min(game.position, problem.num_buffers - 1)
        target = problem.target[position] if problem.num_buffers else 0
        return {
            "buffers": self._buffers(game, position, target),
            "actions": self._actions(game),
            "supply": self._supply(game, target),
            "memory": self._memory(game, target),
            "progress": np.array([game.position / max(problem.num_buffers, 1), game.total_reward / self.return_scale],
                                 dtype=np.float32),
        }

    def _buffers(self, game, position, target):
        problem = self.problem
        rows = np.zeros((LOOKAHEAD, BUFFER_FEATURES), dtype=np.float32)
        for row, buffer in enumerate(range(position, min(position + LOOKAHEAD, problem.num_buffers))):
            benefit = game.current_benefit() if row == 0 and not game.done else problem.initial_benefit[buffer]
            rows[row] = (1.0, problem.size[buffer] / self.memory_scale, problem.is_output[buffer],
                         (problem.target[buffer] - target) / self.time_scale,
                         problem.live_start[buffer] / self.time_scale, problem.live_end[buffer] / self.time_scale,
                         problem.demand[buffer] / self.supply_scale, benefit / self.benefit_scale,
                         problem.alias_group[buffer] >= 0)
        return np.clip(rows, FEATURE_LOW, FEATURE_HIGH)

    def _actions(self, game):
        rows = np.zeros((3, 4), dtype=np.float32)
        for action, candidate in enumerate(game.candidates):
            if action == DROP:
                rows[action, 0] = float(candidate)
            elif candidate is not None:
                rows[action] = (1.0, candidate.start / self.time_scale, candidate.end / self.time_scale,
                                candidate.column * self.problem.granularity / self.memory_scale)
        return rows

    def _supply(self, game, target):
        window = np.zeros(SUPPLY_WINDOW, dtype=np.float32)
        first = target - SUPPLY_WINDOW // 2
        low, high = max(first, 0), min(first + SUPPLY_WINDOW, self.problem.num_instructions)
        if high > low:
            window[low - first:high - first] = game.supply[low:high] / self.supply_scale
        return window

    def _memory(self, game, target):
        if self.problem.num_columns == 0 or self.problem.num_instructions == 0:
            return np.zeros(MEMORY_BINS, dtype=np.float32)
        row = game.occupancy.occupied_row(target).astype(np.float32)
        if row.size < MEMORY_BINS:
            return row[np.arange(MEMORY_BINS) * row.size // MEMORY_BINS]
        edges = np.arange(MEMORY_BINS + 1) * row.size // MEMORY_BINS
        return (np.add.reduceat(row, edges[:-1]) / np.diff(edges)).astype(np.float32)
