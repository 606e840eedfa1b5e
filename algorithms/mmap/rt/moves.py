"""The game's state as RTs and one move of every game in the batch: apply the action, plan the next buffer,
end infeasible games or rewind them (Drop-backup). Mirrors `MMapGame.play` (game.py).

State of G games (leading axis G everywhere):
- position, done, feasible, total (return so far), restores (rewinds so far);
- records (G, 2, N): the rectangle of each buffer before the position (rules.py);
- book (G, size): fast sets, alias-group offsets and Drop states, tensors' latest allocations
  (tables.BookLayout);
- supply_sums (G, T + 1), the supply W kept as its running sums (rules.py), and used copy edges (G, T);
  open_groups (G,): alias groups in fast memory with members to come;
- plan: the current buffer's options (rules.Plan), kept so that a move plans only once;
- with Drop-backup, a snapshot of the latest clean state (no alias group open): position, total, W, edges,
  book and its plan. A rewind restores it and marks the offending group dropped in the restored book (never
  undone: every later snapshot descends from it); the records need no restoring, since only those before
  the position count. The snapshot's plan stays valid after the rewind except when its buffer belongs to the
  group just forced to Drop, which leaves Drop as the only legal move (game.py: a dropped group's buffers can
  only Drop).

A move changes one record and five book entries per game: each is one scatter over the batch (O(G)), not a
`where` over every record.

An action a game cannot take (illegal, e.g. from a policy that ignores the mask) loses that game, as in the
gymnasium wrapper (env.py): it ends infeasible and its return drops to zero.
"""

from __future__ import annotations

from typing import NamedTuple

from algorithms.mmap.rt.rules import (
    COPY,
    DROP,
    Plan,
    any_of,
    book_entries,
    column,
    consume,
    per_game,
    pick,
    plan,
)
from algorithms.mmap.rt.tables import (
    AT_FAST_SET,
    AT_GROUP_DROPPED,
    AT_TENSOR_OWNER,
    DEMAND,
    GROUP,
    GROUP_LAST,
    IS_OUTPUT,
    SLOT_BIT,
    WIDTH,
    GameTables,
    scatter,
)
from timerl.rt import functional as F


class Snapshot(NamedTuple):
    position: object
    total: object
    supply_sums: object
    edges: object
    book: object
    plan: Plan


class State(NamedTuple):
    position: object
    done: object
    feasible: object
    total: object
    restores: object
    records: object
    book: object
    supply_sums: object
    edges: object
    open_groups: object
    plan: Plan
    snapshot: Snapshot | None


class Move(NamedTuple):
    """What one move reports for each game, besides the next state."""

    reward: object
    placement: object
    """(G, 3) int64: start, end, column of the chosen placement; -1s for Drop or a game that did not move."""


def state_template(drop_backup: bool) -> State:
    """A State's nesting with placeholder leaves, to rebuild one from a flat list of values."""
    plan = Plan(0, 0, 0, 0)
    snapshot = Snapshot(0, 0, 0, 0, 0, plan) if drop_backup else None
    return State(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, plan, snapshot)


def initial_state(tables: GameTables, num_games: int, drop_backup: bool) -> State:
    games, times = num_games, tables.num_times
    records = F.zeros((games, 2, tables.num_buffers), tables.record_dtype)  # none counts before position 0
    book = F.expand(F.unsqueeze(tables.book, 0), (games, tables.layout.size))
    sums = F.expand(tables.supply_sums, (games, times + 1))
    edges = F.zeros((games, times), tables.edge_dtype)
    position = F.zeros((games,), "int64")
    done = F.zeros((games,), "bool")
    total = F.zeros((games,), "float64")
    first_plan = plan(tables, records, book, sums, edges, position, done)
    snapshot = Snapshot(position, total, sums, edges, book, first_plan) if drop_backup else None
    return State(position, done, F.ones((games,), "bool"), total, F.zeros((games,), "int64"), records, book,
                 sums, edges, F.zeros((games,), "int64"), first_plan, snapshot)


def move(tables: GameTables, state: State, action) -> tuple[State, Move]:
    """Every game not yet done plays `action` (G,) int64; done games stay as they are."""
    buffers = tables.num_buffers
    games = action.shape[0]
    running = ~state.done
    legal = pick(F.astype(state.plan.legal, "int64"), action) > 0  # an action outside 0..2 is illegal
    forfeit = running & ~legal
    playing = running & legal
    is_copy, is_drop = action == COPY, action == DROP
    placed = playing & ~is_drop

    data = tables.buffer_data(state.position)
    entries = book_entries(state.book, data)
    buffer = F.minimum(state.position, buffers - 1)
    copy, no_copy = state.plan.copy, state.plan.no_copy
    reuse = column(no_copy, 3) >= 0
    chosen = F.where(per_game(is_copy), copy.spatial[:, :3], no_copy.spatial[:, :3])
    start, end, offset = column(chosen, 0), column(chosen, 1), column(chosen, 2)
    column_taken = F.where(placed, offset, -1)
    rectangle = placed & (is_copy | ~reuse)
    record = F.stack([F.where(rectangle & (column(data, WIDTH) > 0), end, -1), F.where(rectangle, offset, -1)], 1)
    at = F.expand(F.reshape(F.where(playing, state.position, -1), (games, 1, 1)), (games, 2, 1))
    records = scatter(state.records, at, F.unsqueeze(F.astype(record, tables.record_dtype), 2))

    grows = placed & (end > entries.tensor_end)
    written = F.stack([placed, placed, playing & is_drop, grows, grows], 1)
    book_values = F.stack([entries.fast_set + column(data, SLOT_BIT), offset, F.ones((games,), "int64"), end,
                           buffer], 1)
    book = scatter(state.book, F.where(written, data.spatial[:, AT_FAST_SET:AT_TENSOR_OWNER + 1], -1), book_values)

    grouped, group_last = column(data, GROUP) >= 0, column(data, GROUP_LAST)
    group_was_fast = entries.group_column >= 0
    opens = placed & grouped & ~group_was_fast & (group_last > buffer)
    closes = placed & grouped & group_was_fast & (group_last == buffer)
    open_groups = state.open_groups + F.astype(opens, "int64") - F.astype(closes, "int64")

    first, last = column(copy, 3), column(copy, 4)
    sums, edges = consume(tables, state.supply_sums, state.edges, first, last, column(data, DEMAND),
                            column(data, IS_OUTPUT) > 0, playing & is_copy & (first <= last))
    reward = F.where(placed, state.plan.benefit, 0.0)
    total = state.total + reward
    position = F.where(playing, state.position + 1, state.position)
    finished = playing & (position == buffers)
    next_plan = plan(tables, records, book, sums, edges, position, state.done | finished | forfeit)
    stuck = playing & ~finished & ~any_of(next_plan.legal)
    placement = F.stack([F.where(placed, start, -1), F.where(placed, end, -1), column_taken], 1)

    if state.snapshot is None:
        lost = stuck | forfeit
        after = State(position, state.done | finished | lost, state.feasible & ~lost, F.where(lost, 0.0, total),
                      state.restores, records, book, sums, edges, open_groups, next_plan, None)
        return after, Move(F.where(lost, -state.total, reward), placement)

    snap = state.snapshot
    offending = tables.buffer_data(position)
    rewound = per_game(stuck)
    forced_drop = per_game(F.where(stuck, column(offending, AT_GROUP_DROPPED), -1))
    book = scatter(F.where(rewound, snap.book, book), forced_drop, F.ones((games, 1), "int64"))
    snap_buffer_dropped = column(tables.buffer_data(snap.position), GROUP) == column(offending, GROUP)
    only_drop = F.tensor([False, False, True], dtype="bool")
    restored_legal = F.where(per_game(snap_buffer_dropped), only_drop, snap.plan.legal)
    restored = Plan(restored_legal, snap.plan.copy, snap.plan.no_copy, snap.plan.benefit)
    new_plan = Plan(*(F.where(rewound if old.ndim == 2 else stuck, old, new) for old, new in zip(restored, next_plan)))
    position = F.where(stuck, snap.position, position)
    sums = F.where(rewound, snap.supply_sums, sums)
    edges = F.where(rewound, snap.edges, edges)
    open_groups = F.where(stuck, 0, open_groups)
    total_after = F.where(stuck, snap.total, F.where(forfeit, 0.0, total))
    reward = F.where(stuck, snap.total - state.total, F.where(forfeit, -state.total, reward))
    clean = stuck | (open_groups == 0)
    kept = per_game(clean)
    snapshot = Snapshot(F.where(clean, position, snap.position), F.where(clean, total_after, snap.total),
                        F.where(kept, sums, snap.supply_sums), F.where(kept, edges, snap.edges),
                        F.where(kept, book, snap.book),
                        Plan(*(F.where(kept if old.ndim == 2 else clean, new, old)
                               for new, old in zip(new_plan, snap.plan))))
    after = State(position, state.done | finished | forfeit, state.feasible & ~forfeit, total_after,
                  state.restores + F.astype(stuck, "int64"), records, book, sums, edges, open_groups, new_plan,
                  snapshot)
    return after, Move(reward, placement)
