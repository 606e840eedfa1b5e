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
from typing import NamedTuple

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
    target, live_start, live_end = (np.array(values, dtype=np.int64)
                                    for values in (problem.target, problem.live_start, problem.live_end))
    if (np.diff(target) < 0).any() or (live_start > target).any() or (target > live_end).any():
        # the records keep no start times (rules.py): that needs buffers in target order, each target within
        # its live range
        raise UnsupportedProblemError(f"{problem.name}: buffers must come in target order, each target within "
                                      "its live range")
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
        target=target, live_start=live_start, live_end=live_end,
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


# columns of the per-buffer table (`GameTables.buffer_rows`): one gather gives all of them for each game's buffer
(TARGET, LIVE_START, LIVE_END, IS_OUTPUT, WIDTH, DEMAND, GROUP, GROUP_KEY, GROUP_LAST, SLOT_BIT,
 AT_FAST_SET, AT_GROUP_COLUMN, AT_GROUP_DROPPED, AT_TENSOR_END, AT_TENSOR_OWNER) = range(15)
ROW_WIDTH = AT_TENSOR_OWNER + 1
BLOCK = 32
"""The block of `rules.block_cumsum`: its matmul sums 32 values at once."""
BOOK_FIELDS = 5
"""The book positions (AT_*) a move reads and writes, in that order."""


class BookLayout(NamedTuple):
    """Where each per-game array of game state indexed by instruction, alias group or tensor lies in one
    (G, size) int32 array, the book: one gather reads and one scatter writes a move's five entries, and one
    `where` saves or restores all of them for Drop-backup.

    fast_set[instruction]: sum of the slot bits of its buffers in fast memory; group_column[group]: the
    group's offset once a member is placed, -1 before; group_dropped[group]: 1 once Drop (or Drop-backup)
    sends the group to slow memory; tensor_end[tensor] / tensor_owner[tensor]: the end of the tensor's latest
    allocation and the buffer that owns it, -1 without one."""

    fast_set: int
    group_column: int
    group_dropped: int
    tensor_end: int
    tensor_owner: int
    size: int


def book_layout(arrays: GameArrays) -> BookLayout:
    groups, tensors = max(arrays.num_groups, 1), int(arrays.tensor.max()) + 1
    offsets = np.cumsum([0, arrays.num_times, groups, groups, tensors, tensors])
    return BookLayout(*(int(o) for o in offsets))


def initial_book(arrays: GameArrays, layout: BookLayout) -> np.ndarray:
    book = np.full(layout.size, -1, dtype=np.int64)
    book[layout.fast_set:layout.group_column] = 0
    book[layout.group_dropped:layout.tensor_end] = 0
    return book


def buffer_rows(arrays: GameArrays, layout: BookLayout) -> np.ndarray:
    """(N, ROW_WIDTH) int64: the buffer's own data, then its five book positions (-1 where it has no alias group)."""
    grouped = arrays.group >= 0
    return np.stack([
        arrays.target, arrays.live_start, arrays.live_end, arrays.is_output.astype(np.int64), arrays.width,
        arrays.demand, arrays.group, arrays.group_key, arrays.group_last, arrays.slot_bit,
        layout.fast_set + arrays.target,
        np.where(grouped, layout.group_column + arrays.group, -1),
        np.where(grouped, layout.group_dropped + arrays.group, -1),
        layout.tensor_end + arrays.tensor, layout.tensor_owner + arrays.tensor], 1).astype(np.int64)


class GameTables:
    """The arrays as constant RTs (created in the active context), plus index ranges the rules compare with.

    `wide`: the layout for torch with `CompileOptions.compile_groups`. The state's records and copy edges are
    int32 rather than the narrowest types (int16 records, bool edges): TorchInductor's C++ loops (torch 2.13)
    vectorize neither int16 nor bool arrays, and the loops over records and edges would run scalar. XLA packs the
    narrow types well (jax: neutral to 5% slower wide), so they stay the default. And the free-block query's
    cumulative count is torch's integer cumsum (`rules.lowest_free_columns`), not XLA's blocked matmuls."""

    def __init__(self, arrays: GameArrays, wide: bool = False):
        self.arrays = arrays
        self.num_buffers, self.num_times = arrays.num_buffers, arrays.num_times
        self.num_columns, self.num_groups = arrays.num_columns, arrays.num_groups
        self.table_width = arrays.table_width
        self.layout = book_layout(arrays)
        # the records' values (times in [-1, num_times], columns in [-1, num_columns)) in the narrowest integer
        # type that holds them: the free-block query reads every record at every move, so its bytes are its cost
        narrow = not wide and max(arrays.num_times, arrays.num_columns) < 2 ** 15
        self.record_dtype = "int16" if narrow else "int32"
        self.edge_dtype = "int32" if wide else "bool"
        self.wide = wide
        # int32 (offsets, flags, times, buffers and sums of slot bits all fit): a move reads and writes the book
        # of every game several times (Drop-backup's snapshot and rewind), so its bytes count
        self.book = F.tensor(initial_book(arrays, self.layout), dtype="int32")
        self.rows = F.tensor(buffer_rows(arrays, self.layout).reshape(-1), dtype="int64")
        # int32 where the free-block query compares them with every record (twice the lanes of int64)
        self.group_key = F.tensor(arrays.group_key, dtype="int32")
        self.width = F.tensor(arrays.width, dtype="int64")
        # where a record's column count closes (rules.lowest_free_columns): at + width, the width kept within
        # [1, num_columns] so that the index of a record without a rectangle (at = -1) stays in range too
        self.close_width = F.tensor(np.clip(arrays.width, 1, arrays.num_columns), dtype="int32")
        self.latency = F.tensor(arrays.latency, dtype="float64")
        # the supply's running sums (rules.py keeps W so): 0, W[0], W[0] + W[1], ..., and their indices
        self.supply_sums = F.tensor(np.concatenate([[0], np.cumsum(arrays.supply)]), dtype="int64")
        self.sum_points = F.arange(arrays.num_times + 1)
        self.buffers = F.astype(F.arange(arrays.num_buffers), "int32")
        self.times = F.arange(arrays.num_times)
        self.columns = F.arange(arrays.num_columns)
        # the free-block query's histogram bins: columns 0 .. num_columns, padded to whole blocks of its
        # cumulative sum (rules.block_cumsum); its block starts, the padding's counted as num_columns
        self.bins = -(-(arrays.num_columns + 1) // BLOCK) * BLOCK
        self.starts = F.tensor(np.minimum(np.arange(self.bins), arrays.num_columns), dtype="int32")
        # (2, N): bins for the opening and closing events of records that count for nothing, each its own
        self.spread = F.tensor(np.arange(2 * arrays.num_buffers).reshape(2, -1) % self.bins, dtype="int32")

    def overlap_digits(self, intervals: int) -> tuple[int, str]:
        """The base in which `rules.lowest_free_columns` packs one count per interval into one number (a power
        of two above the number of buffers, so no count carries), and the float type in which its histogram
        and cumulative sum are made: float32 while base**intervals <= 2**24, else float64 (below 2**53). Both
        are exact there: every number they add, in any order (the scatter's, the matmul's), is a sum of
        opening weights or of closing ones or a prefix of both, all below base**intervals (fewer than base
        records, each weighing at most sum(base**i) over the intervals)."""
        digit = 1 << int(self.num_buffers).bit_length()
        packed = digit ** intervals
        if packed <= 1 << 24:
            return digit, "float32"
        if packed <= 1 << 53:
            return digit, "float64"
        raise UnsupportedProblemError(f"{intervals} overlap counts of {self.num_buffers} buffers do not fit in "
                                      "53 bits")

    def buffer_data(self, position):
        """(G, ROW_WIDTH) int64: the row of `buffer_rows` of each game's buffer `position` (clamped to the last)."""
        buffer = F.minimum(position, self.num_buffers - 1)
        return flat_gather(self.rows, F.unsqueeze(buffer * ROW_WIDTH, 1) + F.arange(ROW_WIDTH), -1)


def flat_gather(table, index, fill):
    """table[index] for a 1-d table and an index of any shape, `fill` outside. The table is read as it is: a
    gather from the table expanded to every game would, on jax, materialize the expanded copy (games x table)."""
    flat = gather_fill(table, F.reshape(index, (-1,)), fill)
    return F.reshape(flat, index.shape)


def gather_fill(x, index, fill):
    """x[..., index[..., k]] along the last axis, `fill` where the index is outside (a pure op: on jax it stays
    inside the move's one jitted computation, where gather's host-side index check would cut it)."""
    return F.apply("gather_fill", x, index, dim=x.ndim - 1, fill=fill)


def scatter(x, index, values):
    """x with `values` written at `index` along the last axis; writes at an index outside are dropped."""
    return F.apply("scatter", x, index, values, dim=x.ndim - 1)
