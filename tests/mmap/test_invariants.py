"""Invariants of whole games on every workload (or synthetic programs when none are parsed yet).

Every finished mapping must pass the independent checker (no overlap, inside fast memory, alias groups all
in or all out at one offset, copy intervals sharing at most a step, supply never overdrawn), the game's W
must equal the checker's replay of the copies, and the return must equal the latency saved.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.mmap.baselines import heuristic_play
from algorithms.mmap.baselines.policies import legal_list
from algorithms.mmap.check import check_mapping, remaining_supply
from algorithms.mmap.game import MMapGame
from algorithms.mmap.mapping import game_latency, mapping_records
from algorithms.mmap.problem import build_problem
from algorithms.mmap.synthetic import synthetic_instance
from mmap_suite import game_test_workloads

WORKLOADS = game_test_workloads() or ["synthetic_0_100", "synthetic_1_300"]
SMALL_WORKLOADS = sorted(WORKLOADS, key=lambda name: build_problem(name).num_buffers)[:5]


def play_randomly(game: MMapGame, seed: int, max_moves: int | None = None) -> MMapGame:
    rng = np.random.default_rng(seed)
    while not game.done and (max_moves is None or game.moves < max_moves):
        legal = legal_list(game)
        game.play(legal[int(rng.integers(len(legal)))])
    return game


def assert_valid(game: MMapGame) -> None:
    problem = game.problem
    records = mapping_records(game)
    check_mapping(problem, records)
    assert (game.supply >= 0).all()
    assert (game.supply <= problem.supply).all()
    if game.done and game.feasible:
        assert remaining_supply(problem, records) == game.supply.tolist()
        saved = problem.latency_all_slow - game_latency(game)
        assert game.total_reward == pytest.approx(saved, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("name", WORKLOADS)
def test_random_play_with_drop_backup_gives_a_valid_mapping(name):
    game = play_randomly(MMapGame(build_problem(name), drop_backup=True, backup_point="group"), seed=1)
    assert game.done and game.feasible
    assert_valid(game)


@pytest.mark.parametrize("name", SMALL_WORKLOADS)
def test_random_play_with_the_papers_backup_gives_a_valid_mapping(name):
    game = play_randomly(MMapGame(build_problem(name), drop_backup=True), seed=2)
    assert game.done and game.feasible
    assert_valid(game)


@pytest.mark.parametrize("name", WORKLOADS)
def test_random_play_without_backup_stays_valid_until_it_ends(name):
    game = play_randomly(MMapGame(build_problem(name)), seed=3, max_moves=1500)
    assert_valid(game)
    if not game.feasible:
        assert game.total_reward == 0.0


@pytest.mark.parametrize("name", WORKLOADS)
def test_heuristic_mapping_is_valid(name):
    problem = build_problem(name)
    result = heuristic_play(problem)
    check_mapping(problem, result.mapping)
    assert result.latency == pytest.approx(problem.latency_all_slow - result.reward, rel=1e-9)


@pytest.mark.parametrize("name", SMALL_WORKLOADS)
@pytest.mark.parametrize("backup_point", ["clean", "group"])
def test_rewinds_restore_the_state_exactly(name, backup_point):
    """Replaying the surviving decisions on a fresh game must rebuild exactly the rewound game's state."""
    game = play_randomly(MMapGame(build_problem(name), drop_backup=True, backup_point=backup_point), seed=4)
    replay = MMapGame(game.problem)
    for decision in game.decision:
        replay.play(decision)
    assert replay.feasible
    assert (replay.occupancy.grid == game.occupancy.grid).all()
    assert (replay.supply == game.supply).all() and (replay.copy_edges == game.copy_edges).all()
    assert replay.total_reward == pytest.approx(game.total_reward)
    assert replay.placement == game.placement


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), instructions=st.integers(2, 60), in_place=st.floats(0.0, 0.5),
       fraction=st.floats(0.05, 1.0), backup_point=st.sampled_from(["clean", "group"]))
def test_random_programs_keep_every_invariant(seed, instructions, in_place, fraction, backup_point):
    instance = synthetic_instance(seed, instructions, in_place_fraction=in_place)
    problem = build_problem(instance, fast_memory_fraction=fraction)
    assert_valid(play_randomly(MMapGame(problem), seed))
    game = play_randomly(MMapGame(problem, drop_backup=True, backup_point=backup_point), seed)
    assert game.feasible
    assert_valid(game)
