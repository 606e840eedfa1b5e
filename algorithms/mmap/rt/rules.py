"""The game's rules as RT ops over a batch of games (leading spatial axis G): where the current buffer may
go, whether each action is legal, and what it earns. Semantics are `algorithms/mmap/game.py`'s, move for move.

Occupancy is kept as one record per buffer (`records`, (G, 2, N): end, column of the rectangle
[start, end] x [column, column + width) a placed buffer takes), not as a (time x column) grid. The start
needs no keeping: every rectangle holds its buffer's target time (a copy or NoCopy interval ends or starts
there, a kept output's live range holds it), buffers come in target order (`tables.game_arrays` checks),
and every interval the current buffer asks about ends at or after its own target, so an earlier buffer's
rectangle overlaps the interval [first, last] exactly when its end >= first. Only the records of buffers
before the game's position count: a move writes its buffer's record with one scatter, and a Drop-backup
rewind to buffer p needs no clearing, since the records from p on no longer count. A buffer without a
rectangle (dropped, a NoCopy that reuses an allocation, or no columns wide) has end = -1, so it overlaps no
interval (the column stays: a reuse reads its owner's). Whether a block of columns is free over an
interval is answered from one cumulative count over columns of the overlapping records' opening and closing
events (`lowest_free_columns`): O(buffers + columns) per game, where a grid would be O(times x columns). The
Copy and NoCopy intervals of a move are counted together, packed into one integer.

Everything else a move reads about the game (an instruction's fast set, an alias group's offset and Drop
state, a tensor's latest allocation) is one entry of the book (`tables.BookLayout`), read with one gather.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from algorithms.mmap.rt.tables import (
    AT_FAST_SET,
    AT_TENSOR_OWNER,
    BLOCK,
    DEMAND,
    GROUP_KEY,
    IS_OUTPUT,
    LIVE_END,
    LIVE_START,
    SLOT_BIT,
    TARGET,
    WIDTH,
    GameTables,
    flat_gather,
    gather_fill,
)
from timerl.rt import functional as F

COPY, NO_COPY, DROP = 0, 1, 2


class Plan(NamedTuple):
    """What Copy and NoCopy would do for the current buffer, and which actions are legal."""

    legal: object
    """(G, 3) bool: Copy, NoCopy, Drop."""
    copy: object
    """(G, 5) int64: start, end, column, copy_first, copy_last (copy interval, empty when first > last)."""
    no_copy: object
    """(G, 4) int64: start, end, column, owner (the buffer whose allocation is reused, else -1)."""
    benefit: object
    """(G,) float64: the reward a Copy or NoCopy earns now (the updated benefit)."""


class Entries(NamedTuple):
    """The book's entries for each game's buffer (tables.BookLayout)."""

    fast_set: object
    group_column: object
    group_dropped: object
    tensor_end: object
    tensor_owner: object


def per_game(x):
    """(G,) -> (G, 1), to compare one value per game with a row of buffers, times or columns."""
    return F.unsqueeze(x, 1)


def column(x, k):
    """Column k of a (G, K) array: one value per game."""
    return x.spatial[:, k]


def any_of(mask, dim=1):
    return F.sum(F.astype(mask, "int64"), dim=dim) > 0


def pick(x, index):
    """x[g, index[g]] for a (G, K) x and a (G,) index; 0 (False) where the index is outside [0, K)."""
    return F.squeeze(gather_fill(x, per_game(index), 0), 1)


def book_entries(book, data) -> Entries:
    values = F.astype(gather_fill(book, data.spatial[:, AT_FAST_SET:AT_TENSOR_OWNER + 1], -1), "int64")
    return Entries(*(column(values, k) for k in range(len(Entries._fields))))


# ---- fast memory -----------------------------------------------------------------------------------------
def lowest_free_columns(tables: GameTables, records, position, first, own_group, width, required):
    """For each game and each of K intervals from `first` ((G, K)) to at least the game's current target: the
    lowest column c with [c, c + width) free over the interval ((G,) width: one buffer's, the same for every
    interval), or `required` if that block is free (where required >= 0); -1 if none. Records of the game's
    alias group `own_group` count as free (Eq. 4). A record overlaps such an interval exactly when its end is
    >= first (the records' layout above), so the intervals' last times are not needed.

    A record at columns [at, at + w) that overlaps the interval blocks exactly the block starts c with
    at - width < c < at + w. So blocked(c), the number of records that block c, is the cumulative sum over
    columns of +1 at max(at - width + 1, 0) and -1 at at + w: O(buffers + columns) per game. The events'
    columns do not depend on the interval, only their weights (overlaps or not) do, so all K intervals share
    one histogram: an event's weight packs its K overlap flags as digits of base S (S > buffers, so no count
    carries into the next digit), and one histogram of the 2N opening (+weight) and closing (-weight) events,
    one cumulative sum and a test per digit answer all K (on XLA one scatter of scalars: 1.4x the move's speed
    against two histograms and their difference, side by side). The lowest c with blocked(c) == 0 is the answer if
    the block ends within the columns; if it does not, no block starting further right does either.

    What XLA makes of it matters more than the op count: the per-game values the (G, N) loop reads go through
    `materialize` first, already in the types they are compared in (else XLA fuses their computation, a dozen
    selects and a gather, into the loop and redoes it for every element); the records and their comparisons
    are int16/int32; the cumulative sum is a blocked triangular matmul (`block_cumsum`); the first free start
    is a min over columns, which XLA vectorizes (argmax's (value, index) reduction it does not)."""
    size, k = tables.num_columns, first.shape[1]
    digit, exact = tables.overlap_digits(k)
    # an interval starting before time 0 (a Copy that does not exist) is the same from 0, where no record
    # without a rectangle (end = -1) reaches
    thresholds = F.apply("materialize", F.astype(F.maximum(first, 0), records.dtype))
    keys = F.apply("materialize", F.astype(F.stack([own_group, position, 1 - width], 1), "int32"))
    counted = (tables.group_key != per_game(column(keys, 0))) & (tables.buffers < per_game(column(keys, 1)))
    end, at = records.spatial[:, 0, :], F.astype(records.spatial[:, 1, :], "int32")
    whole = "int32" if exact == "float32" else "int64"
    weight = 0
    for interval in range(k):
        overlaps = (end >= per_game(column(thresholds, interval))) & counted
        weight = weight + F.astype(overlaps, whole) * digit ** interval
    # the events of a record of weight 0 (not counted, not overlapping, or without a rectangle) add nothing
    # wherever they fall: they go to bins of their own (tables.spread) rather than to their columns, since
    # XLA:CPU's scatter adds in order and runs a chain of adds to one bin (every record without a rectangle
    # has at = -1) ~3x slower than adds to different bins (the scatter: 162 -> 52 ms per 100 moves, profiled)
    ignored = weight == 0
    # one histogram of all games' events, each game's bins after the previous game's: the offsets are added
    # where the events are made, not by a pass of their own over the 2GN indices
    games = weight.shape[0]
    offset = per_game(F.astype(F.arange(games), "int32") * tables.bins)
    opening = F.where(ignored, tables.spread.spatial[0], F.maximum(at + per_game(column(keys, 2)), 0))
    closing = F.where(ignored, tables.spread.spatial[1], at + tables.close_width)
    events = F.cat([opening + offset, closing + offset], 1)
    # as many bins as the cumulative sum's blocks hold (no padding copy). The counts are integers (a float32
    # scatter, which would spare the conversion, was 3% slower side by side; before the spread bins, 2.2x)
    counts = F.apply("bincount", F.reshape(events, (-1,)), F.reshape(F.cat([weight, -weight], 1), (-1,)),
                     size=games * tables.bins)
    counts = F.reshape(counts, (games, tables.bins))
    if tables.wide:  # one pass of integer adds per game (torch's cumsum; inductor calls it as it is)
        packed = F.astype(F.cumsum(counts, 1), exact)
    else:
        packed = block_cumsum(F.astype(counts, exact))  # (G, bins): blocked(c) of every interval, packed
    found = []
    for interval in range(k):
        # this interval's blocked(c) is digit `interval` of packed(c): the top digit is 0 where packed(c) is
        # below its weight; a lower one where packed(c) / weight, truncated, is a multiple of the base (a
        # division by a power of two is exact, and truncation floors the nonnegative sums)
        if interval == k - 1:
            free = packed < float(digit ** interval)
        else:
            shifted = F.astype(F.astype(packed * (1.0 / digit ** interval), whole), exact)
            free = shifted == F.astype(F.astype(shifted * (1.0 / digit), whole), exact) * float(digit)
        # blocked(c) is 0 from c = size on (every counted record has closed by then): the first free start is
        # the least start with none (tables.starts stops at size: the padding bins count as start size)
        lowest = F.astype(F.min(F.where(free, tables.starts, F.tensor(size, dtype="int32")), dim=1), "int64")
        lowest = F.where(width == 0, 0, F.where(lowest + width <= size, lowest, -1))
        block = column(required, interval)
        there = column(gather_fill(F.astype(free, "int32"), per_game(block), 0), 0) > 0
        there = (there & (block + width <= size)) | (width == 0)
        found.append(F.where(block >= 0, F.where(there, block, -1), lowest))
    return F.stack(found, 1)


def block_cumsum(values):
    """The cumulative sum along the last axis of float values holding integers, its length a multiple of
    BLOCK, as XLA computes it fast: within blocks of 32 one matmul with an upper-triangular matrix of ones, then
    each block's offset, the sum of the blocks before it, one more matmul with a strictly upper-triangular
    matrix (3.7x XLA's reduce-window cumsum on (512, 957) in a microbenchmark; a cumsum over the blocks was ~15
    small loops on XLA:CPU). Exact while every partial sum stays below 2**24 in float32 (2**53 in float64).
    On torch it is a little slower than torch's cumsum."""
    dtype = str(values.dtype)
    lead, size = tuple(values.shape[:-1]), values.shape[-1]
    blocks = size // BLOCK
    assert blocks * BLOCK == size, "block_cumsum takes a multiple of BLOCK values"
    rows = F.reshape(values, lead + (blocks, BLOCK))
    within = F.matmul(rows, F.tensor(np.triu(np.ones((BLOCK, BLOCK))), dtype=dtype))
    offsets = F.matmul(within.spatial[..., BLOCK - 1], F.tensor(np.triu(np.ones((blocks, blocks)), 1), dtype=dtype))
    return F.reshape(within + F.unsqueeze(offsets, len(lead) + 1), lead + (size,))


# ---- copy windows and supply (Eq. 5 and 6, transfer.py) ----------------------------------------------------
# The supply W (G, T) is kept as its running sums (G, T + 1): sums[t] = W[0] + ... + W[t - 1]. A window's
# supply is then a difference of two of them, and what a Copy takes from W (all of it over part of the window,
# the rest at one time) changes the sums by a select per time: no cumulative sum at any move (on XLA:CPU a
# cumulative sum over the times was ~20 small loops of a scan tree).
def window_supply(sums, first, last):
    """sums[first] and sums[last + 1] of each game, 0 where outside (the window [first, last] then is empty)."""
    return gather_fill(sums, F.stack([first, last + 1], 1), 0)


def copy_bound(tables: GameTables, sums, edges, live_start, target, live_end, demand, is_output):
    """Where each game's copy window ends away from the target; -1 if no window has the supply (Eq. 5, 6):
    for an input the latest s >= live_start with sum(W[s .. target-1]) >= demand and no used edge in between,
    for an output the earliest e <= live_end with sum(W[target+1 .. e]) >= demand and no used edge in between;
    the target itself for a buffer that needs no transfer. Inputs and outputs share every pass over the
    times: the window, the supply from each time toward the target (for an output from the window's first
    time to t, for an input from t to its last) and one max per search (an output's earliest time t is the
    greatest mirrored time T - 1 - t)."""
    times, horizon = tables.times, tables.num_times
    out = per_game(is_output)
    mirrored = F.where(out, horizon - 1 - times, times)  # (G, T): greater is nearer the target
    used = (F.astype(edges, "bool") & (times >= per_game(F.where(is_output, target + 1, live_start)))
            & (times <= per_game(F.where(is_output, live_end - 1, target - 2))))
    nearest_used = F.max(F.where(used, mirrored, -1), dim=1)  # mirrored, -1 if none
    first = F.where(is_output, target + 1, F.maximum(live_start, nearest_used + 1))
    first_used = F.where(nearest_used >= 0, horizon - 1 - nearest_used, horizon)  # where an output's window stops
    last = F.where(is_output, F.minimum(live_end, first_used), target - 1)
    window = (times >= per_game(first)) & (times <= per_game(last))
    ends = window_supply(sums, first, last)
    before, through = sums.spatial[:, :horizon], sums.spatial[:, 1:]  # sums[t], sums[t + 1]
    toward_target = F.where(out, through - per_game(column(ends, 0)), per_game(column(ends, 1)) - before)
    # the time nearest the target from which the window holds the demand (mirrored, -1 if none)
    nearest = F.max(F.where(window & (toward_target >= per_game(demand)), mirrored, -1), dim=1)
    bound = F.where(is_output & (nearest >= 0), horizon - 1 - nearest, nearest)
    bound = F.where(F.where(is_output, first > live_end, last < live_start), -1, bound)
    return F.where(demand == 0, target, bound)


def consume(tables: GameTables, sums, edges, first, last, demand, is_output, active):
    """Take `demand` from W over [first, last], nearest the target first (an input's window is drained from
    its last time back and its first time gives the rest, an output's from its first time on and its last
    gives the rest); mark the interval's edges. In running sums: up to sums[first] nothing changes; an
    input's sums[first + 1 .. last + 1] all become sums[last + 1] - demand, an output's
    sums[first + 1 .. last] stay sums[first]; every later sum loses the demand."""
    points = tables.sum_points
    ends = window_supply(sums, first, last)
    flat = F.where(is_output, column(ends, 0), column(ends, 1) - demand)
    inside = points <= per_game(F.where(is_output, last, last + 1))
    taken = F.where(inside, per_game(flat), sums - per_game(demand))
    sums = F.where((points > per_game(first)) & per_game(active), taken, sums)
    times = tables.times
    marked = F.astype(edges, "bool") | ((times >= per_game(first)) & (times < per_game(last)) & per_game(active))
    edges = F.astype(marked, edges.dtype)  # bool, or int32 in the wide tables
    return sums, edges


# ---- the current buffer's options --------------------------------------------------------------------------
def plan(tables: GameTables, records, book, sums, edges, position, done) -> Plan:
    """The Plan for buffer `position` of each game (all actions illegal where `done`)."""
    data = tables.buffer_data(position)
    target, live_start, live_end = column(data, TARGET), column(data, LIVE_START), column(data, LIVE_END)
    width, demand, is_output = column(data, WIDTH), column(data, DEMAND), column(data, IS_OUTPUT) > 0
    entries = book_entries(book, data)
    required = entries.group_column
    group_fast, group_dropped = required >= 0, entries.group_dropped > 0

    bound = copy_bound(tables, sums, edges, live_start, target, live_end, demand, is_output)
    copy_start = F.where(is_output, target, bound)
    copy_end = F.where(is_output, bound, target)
    copy_exists = bound >= 0
    copy_first = F.where(is_output, target + 1, bound)
    copy_last = F.where(is_output, bound, target - 1)

    latest_end = entries.tensor_end
    reuse = ~is_output & (latest_end >= target)
    no_copy_start = F.where(is_output, live_start, F.where(reuse, target, latest_end + 1))
    no_copy_end = F.where(is_output, live_end, target)
    no_copy_exists = is_output | (latest_end >= 0)

    # both intervals end at or after the target (at it, or at the eviction end or live end of an output)
    fitted = lowest_free_columns(tables, records, position, F.stack([copy_start, no_copy_start], 1),
                                 column(data, GROUP_KEY), width, F.stack([required, required], 1))
    copy_column = column(fitted, 0)
    copy_ok = copy_exists & (copy_column >= 0)
    owner = entries.tensor_owner
    owner_column = F.astype(pick(records.spatial[:, 1, :], owner), "int64")
    reused = F.where((required < 0) | (owner_column == required), owner_column, -1)
    no_copy_column = F.where(reuse, reused, column(fitted, 1))
    no_copy_ok = no_copy_exists & (no_copy_column >= 0)

    running = ~done
    legal = F.stack([copy_ok & ~group_dropped & running, no_copy_ok & ~group_dropped & running,
                     (group_dropped | ~group_fast) & running], 1)
    copy = F.stack([copy_start, copy_end, copy_column, copy_first, copy_last], 1)
    no_copy = F.stack([no_copy_start, no_copy_end, no_copy_column, F.where(reuse, owner, -1)], 1)
    return Plan(legal, copy, no_copy, benefit(tables, target, entries.fast_set, column(data, SLOT_BIT)))


def benefit(tables: GameTables, target, fast_set, slot_bit):
    """L_I(B') - L_I(B' + {b}) for the instruction I = target of b, B' = its buffers already in fast memory."""
    row = target * tables.table_width + fast_set
    before_after = flat_gather(tables.latency, F.stack([row, row + slot_bit], 1), 0.0)
    return column(before_after, 0) - column(before_after, 1)
