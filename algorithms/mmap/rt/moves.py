"""The game's state as RTs and one move of every game in the batch: apply the action, plan the next buffer,
end infeasible games or rewind them (Drop-backup). Mirrors `MMapGame.play` (game.py).

State of G games (leading axis G everywhere):
- position, done, feasible, total (return so far), restores (rewinds so far);
- records (rules.Records, one per buffer), supply W and used copy edges (G, T);
- forced_drop (G, groups): alias groups that Drop-backup forced to slow memory (never undone);
- plan: the current buffer's options (rules.Plan), kept so that a move plans only once;
- with Drop-backup, a snapshot of the latest clean state (no alias group open): position, total, W, edges and
  its plan. A rewind restores it and clears the records of buffers from its position on; the snapshot's plan
  stays valid after the rewind except when its buffer belongs to the group just forced to Drop, which leaves
  Drop as the only legal move (game.py: a dropped group's buffers can only Drop).

An action a game cannot take (illegal, e.g. from a policy that ignores the mask) loses that game, as in the
gymnasium wrapper (env.py): it ends infeasible and its return drops to zero.
"""

from __future__ import annotations

from typing import NamedTuple

from algorithms.mmap.rt.rules import COPY, DROP, UNDECIDED, Plan, Records, any_of, consume, per_game, pick, plan
from algorithms.mmap.rt.tables import GameTables
from timerl.rt import functional as F


class Snapshot(NamedTuple):
    position: object
    total: object
    supply: object
    edges: object
    plan: Plan


class State(NamedTuple):
    position: object
    done: object
    feasible: object
    total: object
    restores: object
    records: Records
    supply: object
    edges: object
    forced_drop: object
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
    snapshot = Snapshot(0, 0, 0, 0, plan) if drop_backup else None
    return State(0, 0, 0, 0, 0, Records(0, 0, 0, 0), 0, 0, 0, plan, snapshot)


def initial_state(tables: GameTables, num_games: int, drop_backup: bool) -> State:
    games, buffers, times = num_games, tables.num_buffers, tables.num_times
    records = Records(F.full((games, buffers), UNDECIDED, "int64"), F.full((games, buffers), times, "int64"),
                      F.full((games, buffers), -1, "int64"), F.full((games, buffers), -1, "int64"))
    supply = F.expand(tables.supply, (games, times))
    edges = F.zeros((games, times), "bool")
    forced = F.zeros((games, max(tables.num_groups, 1)), "bool")
    position = F.zeros((games,), "int64")
    done = F.zeros((games,), "bool")
    total = F.zeros((games,), "float64")
    first_plan = plan(tables, records, supply, edges, forced, position, done)
    snapshot = Snapshot(position, total, supply, edges, first_plan) if drop_backup else None
    return State(position, done, F.ones((games,), "bool"), total, F.zeros((games,), "int64"), records, supply,
                 edges, forced, first_plan, snapshot)


def move(tables: GameTables, state: State, action) -> tuple[State, Move]:
    """Every game not yet done plays `action` (G,) int64; done games stay as they are."""
    buffers = tables.num_buffers
    running = ~state.done
    legal = pick(F.astype(state.plan.legal, "int64"), F.minimum(F.maximum(action, 0), 2)) > 0
    in_range = (action >= 0) & (action <= 2)
    forfeit = running & ~(legal & in_range)
    playing = running & legal & in_range
    is_copy, is_drop = action == COPY, action == DROP
    placed = playing & ~is_drop

    buffer = F.minimum(state.position, buffers - 1)
    copy, no_copy = state.plan.copy, state.plan.no_copy
    reuse = no_copy.spatial[:, 3] >= 0
    column = F.where(placed, F.where(is_copy, copy.spatial[:, 2], no_copy.spatial[:, 2]), -1)
    start = F.where(is_copy, copy.spatial[:, 0], no_copy.spatial[:, 0])
    end = F.where(is_copy, copy.spatial[:, 1], no_copy.spatial[:, 1])
    has_rectangle = placed & (is_copy | ~reuse)
    here = (tables.buffers == per_game(buffer)) & per_game(playing)
    records = Records(
        F.where(here, per_game(action), state.records.decision),
        F.where(here, per_game(F.where(has_rectangle, start, tables.num_times)), state.records.start),
        F.where(here, per_game(F.where(has_rectangle, end, -1)), state.records.end),
        F.where(here, per_game(column), state.records.column))
    first, last = copy.spatial[:, 3], copy.spatial[:, 4]
    supply, edges = consume(tables, state.supply, state.edges, first, last, tables.of_buffer("demand", buffer),
                            tables.of_buffer("is_output", buffer), playing & is_copy & (first <= last))
    reward = F.where(placed, state.plan.benefit, 0.0)
    total = state.total + reward
    position = F.where(playing, state.position + 1, state.position)
    finished = playing & (position == buffers)
    next_plan = plan(tables, records, supply, edges, state.forced_drop, position, state.done | finished | forfeit)
    stuck = playing & ~finished & ~any_of(next_plan.legal)
    placement = F.stack([F.where(placed, start, -1), F.where(placed, end, -1), column], 1)

    if state.snapshot is None:
        lost = stuck | forfeit
        after = State(position, state.done | finished | lost, state.feasible & ~lost, F.where(lost, 0.0, total),
                      state.restores, records, supply, edges, state.forced_drop, next_plan, None)
        return after, Move(F.where(lost, -state.total, reward), placement)

    snap = state.snapshot
    offending_group = tables.of_buffer("group", F.minimum(position, buffers - 1))
    forced_drop = state.forced_drop | (per_game(stuck) & (tables.group_slots == per_game(offending_group)))
    rewound = per_game(stuck)
    cleared = rewound & (tables.buffers >= per_game(snap.position))
    records = Records(F.where(cleared, UNDECIDED, records.decision), F.where(cleared, tables.num_times, records.start),
                      F.where(cleared, -1, records.end), F.where(cleared, -1, records.column))
    snap_buffer_dropped = tables.of_buffer("group", F.minimum(snap.position, buffers - 1)) == offending_group
    only_drop = F.tensor([False, False, True], dtype="bool")
    restored_legal = F.where(per_game(snap_buffer_dropped), only_drop, snap.plan.legal)
    restored = Plan(restored_legal, snap.plan.copy, snap.plan.no_copy, snap.plan.benefit)
    new_plan = Plan(*(F.where(rewound if old.ndim == 2 else stuck, old, new) for old, new in zip(restored, next_plan)))
    position = F.where(stuck, snap.position, position)
    supply = F.where(rewound, snap.supply, supply)
    edges = F.where(rewound, snap.edges, edges)
    total_after = F.where(stuck, snap.total, F.where(forfeit, 0.0, total))
    reward = F.where(stuck, snap.total - state.total, F.where(forfeit, -state.total, reward))
    open_groups = any_of((records.column >= 0) & (tables.group_last >= per_game(position)))
    clean = stuck | ~open_groups
    snapshot = Snapshot(F.where(clean, position, snap.position), F.where(clean, total_after, snap.total),
                        F.where(per_game(clean), supply, snap.supply), F.where(per_game(clean), edges, snap.edges),
                        Plan(*(F.where(per_game(clean) if old.ndim == 2 else clean, new, old)
                               for new, old in zip(new_plan, snap.plan))))
    after = State(position, state.done | finished | forfeit, state.feasible & ~forfeit, total_after,
                  state.restores + F.astype(stuck, "int64"), records, supply, edges, forced_drop, new_plan, snapshot)
    return after, Move(reward, placement)
