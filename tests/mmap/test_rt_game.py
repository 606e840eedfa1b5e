"""The RT game (algorithms/mmap/rt) against the NumPy game, move for move.

On every shipped workload, random, heuristic and ES-decoded move sequences are played through the NumPy
game (the ground truth) and replayed through the RT game, with and without Drop-backup; at every move the
legal-action masks, the Copy/NoCopy candidates (interval, offset, copy window, reused owner), the reward,
the chosen placement, the position, the ending and the return must be identical. Long games are cut to a
prefix to keep the suite fast; the small workloads play whole games, rewinds included.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import collect, run
from rt_traces import POLICIES, numpy_trace

import timerl as trl
from algorithms.mmap.game import MMapGame
from algorithms.mmap.problem import build_problem
from algorithms.mmap.rt.program import play, replay, uniform_legal
from algorithms.mmap.rt.tables import GameTables, game_arrays
from algorithms.mmap.synthetic import synthetic_instance
from mmap_suite import game_test_workloads

WORKLOADS = game_test_workloads() or ["synthetic_0_100", "synthetic_1_300"]
PLAYERS = (("random", 1), ("random", 2), ("heuristic", 0), ("es", 1), ("es", 2))
PREFIX = 30
# played whole: a small program whose games stay short even with rewinds (at most ~170 moves)
WHOLE = "transformer_decode" if "transformer_decode" in WORKLOADS else WORKLOADS[0]


def traces_for(problem, drop_backup, max_moves):
    return [numpy_trace(problem, POLICIES[name](problem, seed), drop_backup, max_moves) for name, seed in PLAYERS]


def replay_traces(problem, traces, drop_backup, backend, **options):
    moves = max(len(trace["action"]) for trace in traces)
    actions = np.zeros((len(traces), moves), dtype=np.int64)
    for game, trace in enumerate(traces):
        actions[game, :len(trace["action"])] = trace["action"]
    return replay(problem, actions, backend=backend, drop_backup=drop_backup, **options)


def assert_same_play(traces, got):
    for game, trace in enumerate(traces):
        for move, legal in enumerate(trace["legal"]):
            where = f"game {game} ({PLAYERS[game][0]}), move {move}"
            assert tuple(got["legal"][move, game]) == tuple(legal), where
            if trace["copy"][move] is not None:
                assert tuple(got["copy"][move, game]) == trace["copy"][move], where
            if trace["no_copy"][move] is not None:
                assert tuple(got["no_copy"][move, game]) == trace["no_copy"][move], where
            assert tuple(got["placement"][move, game]) == trace["placement"][move], where
            assert got["reward"][move, game] == trace["reward"][move], where
            assert got["total"][move, game] == trace["total"][move], where
            assert got["position"][move, game] == trace["position"][move], where
            assert got["done"][move, game] == trace["done"][move], where
            assert got["feasible"][move, game] == trace["feasible"][move], where
            assert (got["supply"][move, game] == trace["supply"][move]).all(), where
            edges = trace["edges"][move]
            assert (got["edges"][move, game, :len(edges)] == edges).all(), where
        if trace["done"][-1]:
            assert got["done"][-1, game] and got["total"][-1, game] == trace["total"][-1]


@pytest.mark.parametrize("drop_backup", [False, True], ids=["no-backup", "drop-backup"])
@pytest.mark.parametrize("workload", WORKLOADS)
def test_rt_game_matches_numpy_game_on_reference(workload, drop_backup):
    problem = build_problem(workload)
    whole = workload == WHOLE
    traces = traces_for(problem, drop_backup, None if whole else PREFIX)
    if whole:  # the rules that only long games reach are exercised: infeasible endings, rewinds
        assert any(trace["restores"] for trace in traces) if drop_backup else not all(t["feasible"][-1] for t in traces)
    assert_same_play(traces, replay_traces(problem, traces, drop_backup, "reference"))


@pytest.mark.parametrize("drop_backup", [False, True], ids=["no-backup", "drop-backup"])
def test_rt_game_matches_numpy_game_compiled(compiled_backend, drop_backup):
    if compiled_backend == "jax" and not drop_backup:
        pytest.skip("one jax case: XLA compiles the fused move for ~30 s; Drop-backup covers the same rules")
    problem = build_problem(WHOLE)
    traces = traces_for(problem, drop_backup, None)
    assert_same_play(traces, replay_traces(problem, traces, drop_backup, compiled_backend))


@pytest.mark.parametrize("backend", ["reference", "torch"])
def test_rt_game_with_wide_tables_matches_numpy_game(backend):
    """The int32 layout of records and copy edges (`GameTables(wide=True)`, for TorchInductor) plays the same."""
    problem = build_problem(WHOLE)
    traces = traces_for(problem, True, None)
    assert_same_play(traces, replay_traces(problem, traces, True, backend, wide=True))


def test_policy_inside_an_rt_program_over_iterations_and_moves():
    """The game as part of a larger program: an outer iteration dimension, actions drawn in the program; every
    iteration's games, replayed through the NumPy game, show the same masks and rewards."""
    problem = build_problem(synthetic_instance(1, 20))
    games, iterations, moves = 2, 2, problem.num_buffers
    ctx = trl.Context(dims="i m")
    (i, m), (I, M) = ctx.dims, ctx.bounds
    with ctx:
        played = play(GameTables(game_arrays(problem)), games, uniform_legal, outer=(i,), move_dim=m,
                      drop_backup=True)
        for value in (played.state.plan.legal, played.action, played.reward, played.after.done):
            collect(value)
    legal, action, reward, done = run(ctx, {I: iterations, M: moves}, "reference")
    for iteration in range(iterations):
        for game in range(games):
            numpy_game = MMapGame(problem, drop_backup=True)
            for step in range(moves):
                if numpy_game.done:
                    assert done[(iteration, step - 1)][game]
                    break
                assert tuple(legal[(iteration, step)][game]) == numpy_game.legal_actions()
                assert reward[(iteration, step)][game] == numpy_game.play(int(action[(iteration, step)][game]))
