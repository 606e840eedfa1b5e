"""Rounds at the paper's sizes: staggered starts of persisting rows (`SelfPlay.play`'s ``stagger``), the deadline
that stops a round (`selfplay.Deadline`), and a run that stays inside its budget (`muzero_play`: the longest round
so far decides whether another fits, every round stops at the deadline that leaves the learner's steps their
time)."""

from __future__ import annotations

import dataclasses
import time
from types import SimpleNamespace

import numpy as np
import pytest

from algorithms.mmap.baselines.result import new_game
from algorithms.mmap.check import check_mapping
from algorithms.mmap.mapping import mapping_records
from algorithms.mmap.problem import build_problem
from algorithms.mmap.synthetic import synthetic_instance
from algorithms.muzero.agent import PERSIST_ABOVE, MuZeroConfig, _Run, muzero_play
from algorithms.muzero.seeding import greedy_game
from algorithms.muzero.selfplay import Deadline, SelfPlay
from algorithms.muzero.support import REWARD_SCALE
from test_muzero_hostbatch import SIZES, greedy_game_alone

ROWS = 4


@pytest.fixture(scope="module")
def setting():
    """A small workload, the initial networks packed, a search program of ROWS rows, and the noise-free game one
    row plays alone."""
    return greedy_game_alone(ROWS, instructions=16)


def assert_whole_game(problem, trajectory):
    """Complete, legal, its decisions legal choices, its rewards (with the opening's) its return, and its moves
    replaying to that return and mapping."""
    game = trajectory.game
    assert game.done and game.feasible and trajectory.total_reward == game.total_reward
    check_mapping(problem, mapping_records(game))
    scale = REWARD_SCALE / (problem.latency_all_slow - problem.latency_all_fast)
    np.testing.assert_allclose(sum(trajectory.rewards) + trajectory.opening_reward, game.total_reward * scale,
                               rtol=1e-6, atol=1e-9)
    for legal, action in zip(trajectory.legal, trajectory.actions):
        assert legal.sum() > 1 and legal[action]
    replayed = new_game(problem)
    for action in trajectory.played:
        replayed.play(action)
    assert replayed.total_reward == game.total_reward and mapping_records(replayed) == mapping_records(game)


def test_staggered_rows_open_with_spread_prefixes_of_the_greedy_game(setting):
    """With ``stagger`` the rows' first games open with the first r / B of the greedy policy's game (row 0's, the
    greedy one, with none: it is still the game a row plays alone); later games open with nothing; every game
    returned is whole; staggered games end sooner than the rows' games started together."""
    problem, packed, program, alone = setting
    reference = greedy_game(problem)
    staggered = SelfPlay(problem, program, seed=3)
    rounds = [staggered.play(packed, 1.0, greedy_games=int(call == 0), count=1, persist=True, stagger=True)
              for call in range(10)]
    returned = [trajectory for games in rounds for trajectory in games]
    first = [trajectory for trajectory in returned + [t for t in staggered.rows.games if t is not None]
             if trajectory.opening or trajectory.greedy]
    openings = sorted(trajectory.opening for trajectory in first if not trajectory.greedy)
    assert openings == [len(reference) * row // ROWS for row in range(1, ROWS)]
    for trajectory in first:
        assert trajectory.played[:trajectory.opening] == reference[:trajectory.opening]
    greedy = [trajectory for trajectory in returned if trajectory.greedy]
    assert greedy and all(trajectory.played == alone.played and trajectory.opening == 0 for trajectory in greedy)
    for trajectory in returned:
        assert_whole_game(problem, trajectory)
    assert sum(1 for trajectory in returned if trajectory.opening == 0 and not trajectory.greedy) >= 1  # refills
    together = SelfPlay(problem, program, seed=3)
    together.play(packed, 1.0, greedy_games=1, count=1, persist=True)
    assert len(rounds[0]) >= 1 and rounds[0][0].opening > 0  # the longest opening ends first...
    fresh = SelfPlay(problem, program, seed=3)
    fresh.play(packed, 1.0, greedy_games=1, count=1, persist=True, stagger=True)
    assert fresh.searches < together.searches  # ...sooner than a game started with the others


def test_deadline_stops_a_call_once_enough_games_ended(setting):
    """A passed deadline: with ``at_least`` 0 no search runs and nothing returns (the rows keep their games when
    they persist); with ``at_least`` 1 the call searches until one game ends, and returns the ended games only."""
    problem, packed, program, _ = setting
    selfplay = SelfPlay(problem, program, seed=3)
    past = time.process_time() - 1.0
    assert selfplay.play(packed, 1.0, count=8, persist=True, deadline=Deadline(past)) == []
    assert selfplay.searches == 0 and all(trajectory is not None for trajectory in selfplay.rows.games)
    games = selfplay.play(packed, 1.0, count=8, persist=True, deadline=Deadline(past, at_least=1))
    assert 1 <= len(games) < 8
    for trajectory in games:
        assert_whole_game(problem, trajectory)
    games = SelfPlay(problem, program, seed=3).play(packed, 1.0, count=8, deadline=Deadline(past, at_least=1))
    assert 1 <= len(games) < 8 and all(trajectory.game.done for trajectory in games)
    wall = Deadline(time.perf_counter() + 3600.0, wall=True)
    assert not wall.passed(0) and Deadline(past, at_least=2).passed(1) is False


@pytest.mark.serial  # CPU-clock budgets: measured alone, not beside another test process on the same cores
@pytest.mark.parametrize("persistent_rows", [False, True])
def test_a_run_stays_inside_a_tiny_budget(persistent_rows):
    """`muzero_play` on a small workload at a budget of a few rounds: the budget's clock never passes it (the
    longest round decides whether another fits, a round stops at its deadline), and the result is a whole game
    that replays to its reward and mapping. The budget is six times the round a run always plays (until one
    game has ended), measured first: a fixed budget (0.6 CPU s) was less than that round on a GPU machine whose
    CPU launched the search's kernels (1.33 s)."""
    problem = build_problem(synthetic_instance(seed=1, num_instructions=16))
    config = MuZeroConfig(games=8, rows=4, sizes=SIZES, simulations=4, max_depth=2,
                          persistent_rows=persistent_rows, steps_per_round=5)
    first = muzero_play(problem, seed=0, seconds=1e-3, config=config)
    assert first.rounds == 1
    seconds = 6 * first.seconds
    outcome = muzero_play(problem, seed=0, seconds=seconds, config=config)
    assert outcome.seconds <= seconds and outcome.rounds >= 2
    check_mapping(problem, outcome.result.mapping)
    replayed = new_game(problem)
    for action in outcome.result.actions:
        replayed.play(action)
    assert replayed.done and replayed.total_reward == outcome.result.reward
    assert mapping_records(replayed) == outcome.result.mapping
    assert dataclasses.replace(config, persistent_rows=False).staggered_starts  # on by default, used with persist


def test_rows_persist_by_size():
    """`MuZeroConfig.persistent_rows` None: rows persist above `PERSIST_ABOVE` buffers, 8 games a round on 32
    rows; at or below it 32 games a round; set, it holds at any
    size."""
    small, edge, large = (SimpleNamespace(num_buffers=count) for count in (131, PERSIST_ABOVE, PERSIST_ABOVE + 1))
    config = MuZeroConfig()
    assert [config.persists(problem) for problem in (small, edge, large)] == [False, False, True]
    assert [config.round_shape(problem) for problem in (small, edge, large)] == [(32, 32), (32, 32), (32, 8)]
    assert MuZeroConfig(persistent_rows=True).persists(small)
    assert not MuZeroConfig(persistent_rows=False).persists(large)
    assert MuZeroConfig(games=16, rows=32).round_shape(large) == (32, 16)


@pytest.mark.serial  # CPU-clock budgets: measured alone, not beside another test process on the same cores
def test_extra_rounds_fill_the_budget_and_stay_inside_it():
    """Rounds come one per `steps_per_round` learner steps, so with few steps (10, a round every 5: 3 rounds and
    the final one) a run ends well short of a budget of 30 first rounds; `extra_rounds` (the default) plays more
    rounds in it, and its clock still never passes the budget."""
    problem = build_problem(synthetic_instance(seed=1, num_instructions=16))
    config = MuZeroConfig(games=8, rows=4, sizes=SIZES, simulations=4, max_depth=2, steps_per_round=5,
                          iterations=10, extra_rounds=0)
    assert MuZeroConfig().extra_rounds == 4
    seconds = 30 * muzero_play(problem, seed=0, seconds=1e-3, config=config).seconds
    plain = muzero_play(problem, seed=0, seconds=seconds, config=config)
    filled = muzero_play(problem, seed=0, seconds=seconds, config=dataclasses.replace(config, extra_rounds=4))
    assert plain.rounds == 4 and plain.seconds < seconds / 2
    assert plain.rounds < filled.rounds <= plain.rounds + 4 * 3 and filled.seconds <= seconds  # at most 4 a round
    check_mapping(problem, filled.result.mapping)


def test_spare_by_hand():
    """`_Run.spare`: the budget less the time used, the learner's remaining steps and one longest round for each
    round left (the later ones every `steps_per_round` steps and the final one)."""
    run = SimpleNamespace(seconds=15.0, iterations=300, config=MuZeroConfig(steps_per_round=20),
                          elapsed=lambda: 6.0, longest_round=lambda: 0.5)
    # at iteration 200: rounds at 220, 240, 260, 280, 300 and the final one = 6 rounds of 0.5 s; steps 2.0 s
    assert _Run.spare(run, 200, 2.0) == pytest.approx(15.0 - 6.0 - 2.0 - 3.0)


def test_spread_extra_rounds_need_room_for_one_after_every_round_left():
    """`_Run.extra_share`: an extra round needs one longest round of spare budget, or with `spread_extra_rounds`
    one for each scheduled round left (at iteration 200 of 300, a round every 20: 220 .. 300 and the final one)."""
    run = SimpleNamespace(iterations=300, config=MuZeroConfig(steps_per_round=20, spread_extra_rounds=False))
    assert _Run.extra_share(run, 200) == 1
    assert MuZeroConfig().spread_extra_rounds  # the default
    run.config = MuZeroConfig(steps_per_round=20)
    assert _Run.extra_share(run, 200) == 6 and _Run.extra_share(run, 300) == 1
