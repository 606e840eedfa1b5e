"""A Problem's per-buffer and per-instruction data as NumPy arrays, and as constant RTs for one program.

Everything the RT game reads about the instance lives here, so that the rules (`rules.py`) are written
against named arrays rather than against the Problem's tuples.

Sentinels the rules rely on:
- `group_key[b]` is b's alias group, or `num_groups + b` for a buffer without one: a key no other buffer
  shares, so "same group as the current buffer" needs no special case for group-less buffers.
- `group_last[b]` is the last buffer of b's alias group, -1 without one.
- `slot_bit[b]` is 2**slot (b's bit in its instruction's latency table), 0 without a slot: the table index of
  an instruction's fast set is the sum of its placed buffers' bits (each buffer is placed at most once).
- Latency tables are padded to one width (2**max_varied_buffers at most) and flattened, row = instruction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from algorithms.mmap.problem import Problem
from timerl.rt import functional as F


class UnsupportedProblemError(ValueError):
    """The RT game's occupancy model needs every member of an alias group to be equally wide."""


@dataclass(frozen=True, eq=False)
class GameArrays:
    num_buffers: int
    num_times: int
    num_columns: int
    num_groups: int
    table_width: int
    target: np.ndarray
    live_start: np.ndarray
    live_end: np.ndarray
    is_output: np.ndarray
    width: np.ndarray
    demand: np.ndarray
    tensor: np.ndarray
    group: np.ndarray
    group_key: np.ndarray
    group_last: np.ndarray
    slot_bit: np.ndarray
    latency: np.ndarray
    supply: np.ndarray


def game_arrays(problem: Problem) -> GameArrays:
    buffers, groups = problem.num_buffers, len(problem.group_last_buffer)
    if buffers == 0 or problem.num_columns == 0 or problem.num_instructions == 0:
        raise UnsupportedProblemError(f"{problem.name}: the RT game needs buffers, instructions and fast memory")
    group = np.array(problem.alias_group, dtype=np.int64)
    width = np.array(problem.columns, dtype=np.int64)
    for g in range(groups):
        if len(set(width[group == g].tolist())) > 1:
            # aliased buffers are one allocation: the grid game marks only the times a group does not yet hold,
            # at the new member's width; with equal widths that is the union of the members' rectangles, which
            # is what the interval records below represent
            raise UnsupportedProblemError(f"{problem.name}: alias group {g} has members of different widths")
    table_width = max(len(table) for table in problem.latency_lists)
    latency = np.zeros((problem.num_instructions, table_width), dtype=np.float64)
    for time, table in enumerate(problem.latency_lists):
        latency[time, :len(table)] = table
    slot = np.array(problem.slot, dtype=np.int64)
    group_last = np.array([problem.group_last_buffer[g] if g >= 0 else -1 for g in problem.alias_group],
                          dtype=np.int64)
    return GameArrays(
        num_buffers=buffers, num_times=problem.num_instructions, num_columns=problem.num_columns,
        num_groups=groups, table_width=table_width,
        target=np.array(problem.target, dtype=np.int64),
        live_start=np.array(problem.live_start, dtype=np.int64),
        live_end=np.array(problem.live_end, dtype=np.int64),
        is_output=np.array(problem.is_output, dtype=bool),
        width=width,
        demand=np.array(problem.demand, dtype=np.int64),
        tensor=np.array(problem.tensor, dtype=np.int64),
        group=group,
        group_key=np.where(group >= 0, group, groups + np.arange(buffers)),
        group_last=group_last,
        slot_bit=np.where(slot >= 0, np.left_shift(1, np.maximum(slot, 0)), 0).astype(np.int64),
        latency=latency.reshape(-1),
        supply=problem.supply.astype(np.int64),
    )


class GameTables:
    """The arrays as constant RTs (created in the active context), plus index ranges the rules compare with."""

    def __init__(self, arrays: GameArrays):
        self.arrays = arrays
        self.num_buffers, self.num_times = arrays.num_buffers, arrays.num_times
        self.num_columns, self.num_groups = arrays.num_columns, arrays.num_groups
        self.table_width = arrays.table_width
        for name in ("target", "live_start", "live_end", "is_output", "width", "demand", "tensor", "group",
                     "group_key", "group_last", "slot_bit", "latency", "supply"):
            value = getattr(arrays, name)
            setattr(self, name, F.tensor(value, dtype=str(value.dtype)))
        self.buffers = F.arange(arrays.num_buffers)
        self.times = F.arange(arrays.num_times)
        self.columns = F.arange(arrays.num_columns)
        self.group_slots = F.arange(max(arrays.num_groups, 1))

    def of_buffer(self, name: str, buffer):
        """Per-game value of a per-buffer table at `buffer` (one buffer index per game)."""
        return F.index_select(getattr(self, name), 0, buffer)
