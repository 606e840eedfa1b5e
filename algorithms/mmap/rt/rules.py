"""The MMapGame's rules as RT ops over a batch of games (leading spatial axis G): where the current buffer may
go, whether each action is legal, and what it earns. Semantics are `algorithms/mmap/game.py`'s, move for move.

Occupancy is kept as one record per buffer (`Records`), not as a (time x column) grid: a record is the
rectangle [start, end] x [column, column + width) of a placed buffer. The columns in use over an interval
are counted with a `bincount` of +1 at each overlapping record's column and -1 at its end, then a cumsum:
O(buffers + columns) per game, where a grid would be O(times x columns). Records make Drop-backup cheap as
well: a rewind to buffer p clears the records of buffers >= p, and everything else about the game (a tensor's
latest allocation, an instruction's fast set, an alias group's state) is derived from the records.

Record sentinels: a buffer without a rectangle (undecided, dropped, or a NoCopy that reuses an allocation)
has start = num_times and end = -1, so it overlaps no interval; `column` is -1 unless the buffer is in fast
memory (a reusing NoCopy keeps its owner's column: it is the alias group's column if it opens one).
"""

from __future__ import annotations

from typing import NamedTuple

from algorithms.mmap.rt.tables import GameTables
from timerl.rt import functional as F

COPY, NO_COPY, DROP = 0, 1, 2
UNDECIDED = -1


class Records(NamedTuple):
    decision: object
    """(G, N) int64: the action taken for each buffer, -1 while undecided."""
    start: object
    end: object
    column: object


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


def per_game(x):
    """(G,) -> (G, 1), to compare one value per game with a row of buffers, times or columns."""
    return F.unsqueeze(x, 1)


def any_of(mask, dim=1):
    return F.sum(F.astype(mask, "int64"), dim=dim) > 0


def pick(x, index):
    """x[g, index[g]] for a (G, K) x and a (G,) index."""
    return F.squeeze(F.gather(x, 1, per_game(index)), 1)


# ---- fast memory -----------------------------------------------------------------------------------------
def free_prefix(tables: GameTables, records: Records, first, last, own_group):
    """(G, C + 1): P[c] = how many of the columns [0, c) are taken at some time of [first, last] by a record
    outside the alias group `own_group` (the group's own cells count as free for its members, Eq. 4)."""
    overlap = ((records.start <= per_game(last)) & (records.end >= per_game(first))
               & (tables.group_key != per_game(own_group)))
    count = F.astype(overlap, "int64")
    opens = F.where(overlap, records.column, 0)
    closes = F.where(overlap, records.column + tables.width, 0)
    changes = F.apply("bincount", F.cat([opens, closes], 1), F.cat([count, -count], 1),
                      size=tables.num_columns + 1)
    used = F.cumsum(changes, 1).spatial[:, :tables.num_columns] > 0
    taken = F.cumsum(F.astype(used, "int64"), 1)
    return F.cat([taken.spatial[:, :1] * 0, taken], 1)


def fit(tables: GameTables, prefix, width, required):
    """The lowest column c with [c, c + width) free, or `required` if that block is free (when >= 0); -1 if none."""
    size = tables.num_columns
    starts = tables.columns
    ends = starts + per_game(width)
    taken = F.gather(prefix, 1, F.minimum(ends, size)) - prefix.spatial[:, :size]
    fits = (taken == 0) & (ends <= size)
    lowest = F.min(F.where(fits, starts, size), dim=1)
    lowest = F.where(lowest == size, -1, lowest)
    at = F.maximum(required, 0)
    block_end = at + width
    block_taken = pick(prefix, F.minimum(block_end, size)) - pick(prefix, F.minimum(at, size))
    there = F.where((block_taken == 0) & (block_end <= size), required, -1)
    return F.where(required >= 0, there, lowest)


# ---- copy windows and supply (Eq. 5 and 6, transfer.py) ----------------------------------------------------
def latest_prefetch_start(tables: GameTables, supply, edges, live_start, target, demand):
    """Latest s >= live_start with sum(W[s .. target-1]) >= demand and no used edge in between; -1 if none."""
    times = tables.times
    last = target - 1
    used = edges & (times >= per_game(live_start)) & (times <= per_game(last - 1))
    first = F.maximum(live_start, F.max(F.where(used, times, -1), dim=1) + 1)
    window = (times >= per_game(first)) & (times <= per_game(last))
    weights = F.where(window, supply, 0)
    from_here = per_game(F.sum(weights, dim=1)) - F.cumsum(weights, 1) + weights
    start = F.max(F.where(window & (from_here >= per_game(demand)), times, -1), dim=1)
    start = F.where(last >= live_start, start, -1)
    return F.where(demand == 0, target, start)


def earliest_eviction_end(tables: GameTables, supply, edges, target, live_end, demand):
    """Earliest e <= live_end with sum(W[target+1 .. e]) >= demand and no used edge in between; -1 if none."""
    times, horizon = tables.times, tables.num_times
    first = target + 1
    used = edges & (times >= per_game(first)) & (times <= per_game(live_end - 1))
    last = F.minimum(live_end, F.min(F.where(used, times, horizon), dim=1))
    window = (times >= per_game(first)) & (times <= per_game(last))
    so_far = F.cumsum(F.where(window, supply, 0), 1)
    end = F.min(F.where(window & (so_far >= per_game(demand)), times, horizon), dim=1)
    end = F.where((end == horizon) | (first > live_end), -1, end)
    return F.where(demand == 0, target, end)


def consume(tables: GameTables, supply, edges, first, last, demand, is_output, active):
    """Take `demand` from W over [first, last], nearest the target first; mark the interval's edges."""
    times = tables.times
    eviction = per_game(is_output)
    drained = F.where(eviction, (times >= per_game(first)) & (times < per_game(last)),
                      (times > per_game(first)) & (times <= per_game(last))) & per_game(active)
    partial = per_game(F.where(is_output, last, first))
    remainder = demand - F.sum(F.where(drained, supply, 0), dim=1)
    supply = F.where(drained, 0, supply)
    supply = F.where((times == partial) & per_game(active), supply - per_game(remainder), supply)
    edges = edges | ((times >= per_game(first)) & (times < per_game(last)) & per_game(active))
    return supply, edges


# ---- the current buffer's options --------------------------------------------------------------------------
def plan(tables: GameTables, records: Records, supply, edges, forced_drop, position, done) -> Plan:
    """The Plan for buffer `position` of each game (all actions illegal where `done`)."""
    buffer = F.minimum(position, tables.num_buffers - 1)
    target, live_start, live_end = (tables.of_buffer(n, buffer) for n in ("target", "live_start", "live_end"))
    is_output, width, demand = (tables.of_buffer(n, buffer) for n in ("is_output", "width", "demand"))
    group, own_group = tables.of_buffer("group", buffer), tables.of_buffer("group_key", buffer)

    placed = records.column >= 0
    members = tables.group_key == per_game(own_group)
    group_fast = any_of(placed & members)
    required = F.where(group_fast, F.max(F.where(placed & members, records.column, -1), dim=1), -1)
    forced = pick(F.astype(forced_drop, "int64"), F.maximum(group, 0)) > 0
    group_dropped = any_of((records.decision == DROP) & members) | ((group >= 0) & forced)

    prefetch = latest_prefetch_start(tables, supply, edges, live_start, target, demand)
    eviction = earliest_eviction_end(tables, supply, edges, target, live_end, demand)
    copy_start = F.where(is_output, target, prefetch)
    copy_end = F.where(is_output, eviction, target)
    copy_exists = F.where(is_output, eviction, prefetch) >= 0
    copy_first = F.where(is_output, target + 1, prefetch)
    copy_last = F.where(is_output, eviction, target - 1)
    copy_column = fit(tables, _prefix_or_nothing(tables, records, copy_exists, copy_start, copy_end, own_group),
                      width, required)
    copy_ok = copy_exists & (copy_column >= 0)

    same_tensor = placed & (tables.tensor == per_game(tables.of_buffer("tensor", buffer)))
    latest_end = F.max(F.where(same_tensor, records.end, -1), dim=1)
    owner = F.min(F.where(same_tensor & (records.end == per_game(latest_end)), tables.buffers,
                          tables.num_buffers), dim=1)
    owner_column = pick(records.column, F.minimum(owner, tables.num_buffers - 1))
    reuse = ~is_output & (latest_end >= target)
    no_copy_start = F.where(is_output, live_start, F.where(reuse, target, latest_end + 1))
    no_copy_end = F.where(is_output, live_end, target)
    no_copy_exists = is_output | (latest_end >= 0)
    fitted = fit(tables, _prefix_or_nothing(tables, records, no_copy_exists & ~reuse, no_copy_start, no_copy_end,
                                            own_group), width, required)
    reused = F.where((required < 0) | (owner_column == required), owner_column, -1)
    no_copy_column = F.where(reuse, reused, fitted)
    no_copy_ok = no_copy_exists & (no_copy_column >= 0)

    running = ~done
    legal = F.stack([copy_ok & ~group_dropped & running, no_copy_ok & ~group_dropped & running,
                     (group_dropped | ~group_fast) & running], 1)
    copy = F.stack([copy_start, copy_end, copy_column, copy_first, copy_last], 1)
    no_copy = F.stack([no_copy_start, no_copy_end, no_copy_column, F.where(reuse, owner, -1)], 1)
    return Plan(legal, copy, no_copy, benefit(tables, records, buffer, target))


def _prefix_or_nothing(tables, records, exists, first, last, own_group):
    """free_prefix over [first, last] where the interval exists; an always-empty interval elsewhere."""
    return free_prefix(tables, records, F.where(exists, first, tables.num_times), F.where(exists, last, -1), own_group)


def benefit(tables: GameTables, records: Records, buffer, target):
    """L_I(B') - L_I(B' + {b}) for the instruction I = target of b, B' = its buffers already in fast memory."""
    in_fast = (records.column >= 0) & (tables.target == per_game(target))
    fast_set = F.sum(F.where(in_fast, tables.slot_bit, 0), dim=1)
    row = target * tables.table_width
    before = F.index_select(tables.latency, 0, row + fast_set)
    after = F.index_select(tables.latency, 0, row + fast_set + tables.of_buffer("slot_bit", buffer))
    return before - after
