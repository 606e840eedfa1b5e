"""The game state as the representation network's input (paper §4.3.1, Fig. 4), reduced for a 2-core machine.

A flat float32 vector of FEATURES numbers, in named blocks (`BLOCKS`, offsets in `block_slice`):
- buffers   (8, 9): the current buffer, the next 5, and the next 2 buffers of the current buffer's tensor
  (Table 1 features), each [present, size / fast memory, is_output, (target - current target) / T,
  (live start - current target) / T, (live end - current target) / T, demand / largest initial supply,
  benefit / largest initial benefit, in an alias group]; the current buffer's benefit is the updated one.
- memory_map (16, 16): the binary memory map around the current target time downsampled to 16 x 16 (rows:
  the 16 logical times target - 8 .. target + 7, columns: fast memory in 16 equal offset bins, each cell the
  occupied fraction). The paper's window is 128 x 128.
- occupancy (32,): the occupied fraction of fast memory at the target time in 32 offset bins.
- supply    (16,): the supply vector W over target - 8 .. target + 7, / largest initial supply.
- actions   (3, 4): per Copy / NoCopy / Drop [legal, (start - target) / T, (end - target) / T, offset / fast
  memory] (zeros when illegal): the paper's per-action legality, interval and offset.
- progress  (5,): move number / buffers, buffer index / buffers, position in the alias group / its size,
  remainder of the alias group / its size, return so far / largest possible saving.
The game's legal-action mask is returned apart (the search masks the root with it).

`Encoder.encode` encodes one game; `Encoder.encode_many` a batch of games at once (the same numbers,
`test_encode_many_is_encode_per_game`): the buffer rows gathered from a per-buffer table made once, the memory
maps of all games binned in one call. Self-play encodes its whole search batch with it.
"""

from __future__ import annotations

import numpy as np

from algorithms.mmap.game import ACTION_NAMES, DROP, MMapGame
from algorithms.mmap.problem import Problem

LOOKAHEAD, SAME_TENSOR, BUFFER_FEATURES = 6, 2, 9
MAP_TIMES, MAP_BINS, OCCUPANCY_BINS, SUPPLY_WINDOW, PROGRESS = 16, 16, 32, 16, 5
BLOCKS = {"buffers": (LOOKAHEAD + SAME_TENSOR) * BUFFER_FEATURES, "memory_map": MAP_TIMES * MAP_BINS,
          "occupancy": OCCUPANCY_BINS, "supply": SUPPLY_WINDOW, "actions": 12, "progress": PROGRESS}
FEATURES = sum(BLOCKS.values())
TIMES, BENEFIT = slice(3, 6), 7  # columns of a buffer row: target, live start, live end; benefit


def block_slice(name: str) -> slice:
    start = 0
    for block, size in BLOCKS.items():
        if block == name:
            return slice(start, start + size)
        start += size
    raise KeyError(name)


class Encoder:
    """Per-problem constants computed once; `encode(game)` -> (features (FEATURES,), legal (3,) bool)."""

    def __init__(self, problem: Problem):
        self.problem = problem
        self.time_scale = max(problem.num_instructions, 1)
        self.memory_scale = max(problem.fast_memory_bytes, 1)
        self.supply_scale = max(float(problem.supply.max(initial=0)), 1.0)
        self.benefit_scale = max(max(problem.initial_benefit, default=0.0), 1e-12)
        self.return_scale = max(problem.latency_all_slow - problem.latency_all_fast, 1e-12)
        buffers_of_tensor: dict = {}
        for buffer, tensor in enumerate(problem.tensor):
            buffers_of_tensor.setdefault(tensor, []).append(buffer)
        self.later_same_tensor = [[b for b in buffers_of_tensor[t] if b > buffer][:SAME_TENSOR]
                                  for buffer, t in enumerate(problem.tensor)]
        group_members: dict = {}
        for buffer, group in enumerate(problem.alias_group):
            if group >= 0:
                group_members.setdefault(group, []).append(buffer)
        self.group_place = [(0.0, 0.0)] * problem.num_buffers
        for members in group_members.values():
            for rank, buffer in enumerate(members):
                self.group_place[buffer] = (rank / len(members), (len(members) - rank - 1) / len(members))
        edges = np.arange(MAP_BINS + 1) * problem.num_columns // MAP_BINS
        self.map_edges = edges if problem.num_columns >= MAP_BINS else None
        self.occupancy_edges = (np.arange(OCCUPANCY_BINS + 1) * problem.num_columns // OCCUPANCY_BINS
                                if problem.num_columns >= OCCUPANCY_BINS else None)
        # each buffer's row with its times absolute (`TIMES`, made relative to the current target per encoding) and
        # its initial benefit; row `num_buffers` is an absent buffer's zeros. Per position, the buffers of its rows
        # (the next LOOKAHEAD, then SAME_TENSOR later ones of its tensor; absent ones `num_buffers`)
        buffers = problem.num_buffers
        self.static_rows = np.zeros((buffers + 1, BUFFER_FEATURES))
        for buffer in range(buffers):
            self.static_rows[buffer] = (1.0, problem.size[buffer] / self.memory_scale, problem.is_output[buffer],
                                        problem.target[buffer], problem.live_start[buffer], problem.live_end[buffer],
                                        problem.demand[buffer] / self.supply_scale,
                                        problem.initial_benefit[buffer] / self.benefit_scale,
                                        problem.alias_group[buffer] >= 0)
        self.row_buffers = np.full((max(buffers, 1), LOOKAHEAD + SAME_TENSOR), buffers)
        for position in range(buffers):
            ahead = range(position, min(position + LOOKAHEAD, buffers))
            self.row_buffers[position, :len(ahead)] = ahead
            same = self.later_same_tensor[position]
            self.row_buffers[position, LOOKAHEAD:LOOKAHEAD + len(same)] = same

    def encode(self, game: MMapGame) -> tuple[np.ndarray, np.ndarray]:
        problem = self.problem
        position = min(game.position, problem.num_buffers - 1)
        target = problem.target[position]
        rows = [self._buffer_row(game, b, target, b == game.position)
                for b in range(position, min(position + LOOKAHEAD, problem.num_buffers))]
        rows += [np.zeros(BUFFER_FEATURES)] * (LOOKAHEAD - len(rows))
        same = self.later_same_tensor[position]
        rows += [self._buffer_row(game, b, target, False) for b in same]
        rows += [np.zeros(BUFFER_FEATURES)] * (SAME_TENSOR - len(same))
        times = np.clip(np.arange(target - MAP_TIMES // 2, target + MAP_TIMES // 2), 0, problem.num_instructions - 1)
        inside = (np.arange(target - MAP_TIMES // 2, target + MAP_TIMES // 2) == times)
        grid = self._bins(game.occupancy.occupied_rows(times), self.map_edges, MAP_BINS) * inside[:, None]
        supply = np.where(inside, game.supply[times] / self.supply_scale, 0.0)
        progress = (game.moves / max(problem.num_buffers, 1), game.position / max(problem.num_buffers, 1),
                    *self.group_place[position], game.total_reward / self.return_scale)
        occupancy = self._bins(game.occupancy.occupied_row(target), self.occupancy_edges, OCCUPANCY_BINS)
        features = np.concatenate([np.concatenate(rows), grid.ravel(), occupancy, supply,
                                   self._actions(game, target).ravel(), np.array(progress)])
        return np.clip(features, -10.0, 10.0).astype(np.float32), np.array(game.legal_actions(), dtype=bool)

    def encode_many(self, games: list[MMapGame]) -> tuple[np.ndarray, np.ndarray]:
        """`encode` of each game, stacked: (features (n, FEATURES) float32, legal (n, 3) bool)."""
        problem, count = self.problem, len(games)
        positions = np.array([min(game.position, problem.num_buffers - 1) for game in games])
        targets = np.array([problem.target[p] for p in positions])
        rows = self.static_rows[self.row_buffers[positions]]  # (n, 8, 9)
        rows[:, :, TIMES] = (rows[:, :, TIMES] - rows[:, :, :1] * targets[:, None, None]) / self.time_scale
        for k, game in enumerate(games):
            if not game.done:  # the current buffer (row 0) carries its updated benefit
                rows[k, 0, BENEFIT] = game.current_benefit() / self.benefit_scale
        offsets = np.arange(-(MAP_TIMES // 2), MAP_TIMES // 2)
        times = np.clip(targets[:, None] + offsets, 0, problem.num_instructions - 1)
        inside = targets[:, None] + offsets == times
        # the memory maps' packed rows of all games, unpacked and binned at once; the occupancy is the map's
        # row at the target time (offset 0, always inside)
        packed = np.stack([game.occupancy.grid[row] for game, row in zip(games, times)])  # (n, times, words)
        bits = np.unpackbits(packed.view(np.uint8), axis=-1, bitorder="little")[..., :problem.num_columns]
        grids = self._counts(bits, self.map_edges, MAP_BINS) * inside[:, :, None]
        occupied = bits[:, MAP_TIMES // 2]
        supply = np.where(inside, np.stack([game.supply[row] for game, row in zip(games, times)]) / self.supply_scale,
                          0.0)
        actions = np.stack([self._actions(game, target).ravel() for game, target in zip(games, targets)])
        progress = np.array([(game.moves / max(problem.num_buffers, 1), game.position / max(problem.num_buffers, 1),
                              *self.group_place[p], game.total_reward / self.return_scale)
                             for game, p in zip(games, positions)])
        features = np.concatenate([rows.reshape(count, -1), grids.reshape(count, -1),
                                   self._counts(occupied, self.occupancy_edges, OCCUPANCY_BINS), supply, actions,
                                   progress], axis=1)
        legal = np.array([game.legal_actions() for game in games], dtype=bool).reshape(count, len(ACTION_NAMES))
        return np.clip(features, -10.0, 10.0).astype(np.float32), legal

    def _buffer_row(self, game, buffer, target, current):
        row = self.static_rows[buffer].copy()
        row[TIMES] = (row[TIMES] - target) / self.time_scale
        if current and not game.done:
            row[BENEFIT] = game.current_benefit() / self.benefit_scale
        return row

    @staticmethod
    def _bins(rows: np.ndarray, edges, bins: int) -> np.ndarray:
        """The occupied fraction of each of ``bins`` column bins, per row of ``rows`` (..., columns)."""
        rows = rows.astype(np.float64)
        if rows.shape[-1] == 0:
            return np.zeros(rows.shape[:-1] + (bins,))
        if edges is None:
            return rows[..., np.arange(bins) * rows.shape[-1] // bins]
        return np.add.reduceat(rows, edges[:-1], axis=-1) / np.diff(edges)

    @staticmethod
    def _counts(bits: np.ndarray, edges, bins: int) -> np.ndarray:
        """`_bins` of unpacked 0/1 rows (uint8), summed as integers (the same float64 fractions)."""
        if bits.shape[-1] == 0 or edges is None:
            return Encoder._bins(bits.astype(bool), edges, bins)
        return np.add.reduceat(bits, edges[:-1], axis=-1, dtype=np.int64) / np.diff(edges)

    def _actions(self, game, target):
        rows = np.zeros((3, 4))
        for action, candidate in enumerate(game.candidates):
            if action == DROP:
                rows[action, 0] = float(candidate)
            elif candidate is not None:
                rows[action] = (1.0, (candidate.start - target) / self.time_scale,
                                (candidate.end - target) / self.time_scale,
                                candidate.column * self.problem.granularity / self.memory_scale)
        return rows
