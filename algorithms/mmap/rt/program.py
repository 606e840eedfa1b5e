"""The game as a recurrence over a move dimension: state[m + 1] = move(state[m], action[m]).

`play` builds it inside the caller's program (any outer dimensions, e.g. training iterations, come first);
the action at move m is `policy(state at m)`, an RT, so a learner's network, a random draw or a replayed
sequence all fit. `replay` compiles and runs a whole program for given move sequences, for the tests and
benchmarks.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import numpy as np

import timerl as trl
from algorithms.mmap.problem import Problem
from algorithms.mmap.rt.moves import State, initial_state, move
from algorithms.mmap.rt.tables import GameTables, game_arrays
from timerl.rt import functional as F


def flatten(tree) -> list:
    if tree is None:
        return []
    if isinstance(tree, tuple):
        return [leaf for part in tree for leaf in flatten(part)]
    return [tree]


def unflatten(template, leaves: list):
    """Rebuild `template`'s nesting of named tuples from `leaves` (consumed from the front)."""
    if template is None:
        return None
    if isinstance(template, tuple):
        return type(template)(*(unflatten(part, leaves) for part in template))
    return leaves.pop(0)


class Played(NamedTuple):
    """Per move m (RTs over the caller's dims): what the game showed, what was played, what it gave."""

    state: State
    """The state at move m, before the action (its `plan.legal` is the action mask)."""
    action: object
    reward: object
    placement: object
    after: State


def play(tables: GameTables, num_games: int, policy: Callable[[State], object], outer: Sequence = (),
         move_dim=None, drop_backup: bool = False) -> Played:
    """The move recurrence over (*outer, move_dim) in the active context."""
    outer = tuple(outer)
    first = initial_state(tables, num_games, drop_backup)
    start = flatten(first)
    domain = outer + (move_dim,)
    current = []
    for leaf in start:
        slot = trl.placeholder(leaf.shape, leaf.dtype, domain=domain)
        slot[(*outer, 0)] = leaf
        current.append(slot)
    state = unflatten(first, list(current))
    action = F.astype(policy(state), "int64")
    after, result = move(tables, state, action)
    for slot, leaf in zip(current, flatten(after)):
        slot[(*outer, move_dim + 1)] = leaf
    return Played(state, action, result.reward, result.placement, after)


def supply(state: State):
    """The supply W (G, T) of a state, from its running sums."""
    sums = state.supply_sums
    return sums.spatial[:, 1:] - sums.spatial[:, :-1]


def uniform_legal(state: State):
    """A uniformly random legal action per game (a fresh draw at every point of the domain)."""
    legal = F.astype(state.plan.legal, "int64")
    count = F.sum(legal, dim=1)
    games = legal.shape[0]
    pick = F.astype(trl.rand((games,), dtype="float64") * F.astype(count, "float64"), "int64")
    chosen = F.cumsum(legal, 1) > F.unsqueeze(pick, 1)
    return F.argmax(F.astype(chosen, "int64"), dim=1)


def replay(problem: Problem, actions: np.ndarray, backend: str = "reference", drop_backup: bool = False,
           wide: bool = False, **options) -> dict:
    """Play `actions` (games x moves, int) through the RT game; returns per-move NumPy arrays (moves x games
    x ...): legal (mask before the move), copy and no_copy (the candidates, rules.Plan), reward, placement
    (start, end, column), position, done, feasible, total, supply and edges (after the move). `wide`: the
    tables' int32 layout (`GameTables`)."""
    actions = np.asarray(actions, dtype=np.int64)
    games, moves = actions.shape
    ctx = trl.Context(dims="m")
    (m,), (bound,) = ctx.dims, ctx.bounds
    trace: dict = {}
    with ctx:
        tables = GameTables(game_arrays(problem), wide=wide)
        given = trl.source(lambda point: actions[:, point["m"]], shape=(games,), dtype="int64", domain=(m,))
        played = play(tables, games, lambda state: given, move_dim=m, drop_backup=drop_backup)
        outputs = {"legal": played.state.plan.legal, "copy": played.state.plan.copy,
                   "no_copy": played.state.plan.no_copy, "reward": played.reward, "placement": played.placement,
                   "position": played.after.position, "done": played.after.done,
                   "feasible": played.after.feasible, "total": played.after.total, "supply": supply(played.after),
                   "edges": played.after.edges}
        for name, value in outputs.items():
            trace[name] = [None] * moves
            value.sink(_collector(trace[name]))
    ctx.compile(bounds={bound: moves}, backend=backend, **options).execute()
    return {name: np.stack([np.asarray(v) for v in values]) for name, values in trace.items()}


def _collector(into: list):
    def collect(point, value):
        into[point["m"]] = np.array(np.asarray(value))

    return collect
