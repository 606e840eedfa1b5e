"""The first round seeded from the better of two one-step games (`MuZeroConfig.seed_first_round`): the keep-groups
policy's moves against its rule (`policies.keep_groups_action`), the better-of-two choice against both games played
here with MMapGame (`seeding.seed_game`), the first round's seeded game replaying the chosen game, staggered rows
opening with its prefixes (`BestSeed.played`), and the option's default by size."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from algorithms.mmap.baselines.policies import greedy_action, keep_groups_action
from algorithms.mmap.baselines.result import new_game
from algorithms.mmap.game import COPY, DROP, NO_COPY
from algorithms.mmap.mapping import mapping_records
from algorithms.mmap.problem import build_problem
from algorithms.mmap.synthetic import synthetic_instance
from algorithms.muzero.agent import PERSIST_ABOVE, MuZeroConfig, _Run
from algorithms.muzero.mcts import SearchConfig
from algorithms.muzero.networks import Layout, init_weights
from algorithms.muzero.seeding import BestSeed, final_moves, greedy_game, seed_game
from algorithms.muzero.selfplay import SearchProgram, SelfPlay

from test_muzero_hostbatch import SIZES
from test_muzero_learning import played_with

KEEP_WINS = dict(seed=4, num_instructions=8, in_place_fraction=0.3)  # 19 buffers
GREEDY_WINS = dict(seed=7, num_instructions=12, in_place_fraction=0.5)  # 33 buffers


def replayed(problem, moves):
    game = new_game(problem)
    for action in moves:
        game.play(action)
    assert game.done
    return game


def test_keep_groups_moves_follow_the_rule():
    """Along its own game each move is legal; an output whose alias group has members to come and that is placed
    (a positive benefit, or Drop illegal) takes NoCopy where legal, else Copy; every other move is the greedy
    policy's. The rule decides at least once where the greedy policy would copy, and the games differ."""
    problem = build_problem(synthetic_instance(**KEEP_WINS))
    game = new_game(problem)
    kept_resident = 0
    while not game.done:
        position = game.position
        copy, no_copy, drop = game.legal_actions()
        action = keep_groups_action(game)
        assert game.legal_actions()[action]
        group = problem.alias_group[position]
        if (problem.is_output[position] and group >= 0 and problem.group_last_buffer[group] > position
                and (game.current_benefit() > 0 or not drop)):
            assert action == (NO_COPY if no_copy else COPY if copy else DROP)
            kept_resident += greedy_action(game) == COPY and action == NO_COPY
        else:
            assert action == greedy_action(game)
        game.play(action)
    assert kept_resident >= 1
    assert played_with(problem, keep_groups_action)[0] != played_with(problem, greedy_action)[0]


@pytest.mark.parametrize("instance, winner", [(KEEP_WINS, keep_groups_action), (GREEDY_WINS, greedy_action)])
def test_seed_game_is_the_better_of_the_two(instance, winner):
    """`seed_game`'s moves are the game of the higher return of the two policies' games played here, and replay with
    MMapGame to that return (one workload where each policy wins)."""
    problem = build_problem(synthetic_instance(**instance))
    greedy_moves, greedy_return = played_with(problem, greedy_action)
    keep_moves, keep_return = played_with(problem, keep_groups_action)
    assert greedy_return != keep_return
    chosen = seed_game(problem)
    assert chosen == (keep_moves if keep_return > greedy_return else greedy_moves)
    assert chosen == played_with(problem, winner)[0]
    assert replayed(problem, chosen).total_reward == max(greedy_return, keep_return)
    assert greedy_game(problem) == greedy_moves


def seeded_run(problem, **options):
    config = MuZeroConfig(games=1, rows=1, sizes=SIZES, simulations=1, max_depth=1, best_seed_weight=1.0, **options)
    return _Run(problem, config, seconds=1.0)


def test_first_round_seeded_game_replays_the_chosen_game():
    """With `seed_first_round` the run's seed before any game is `BestSeed` of the chosen game's final moves (its
    play-order moves in ``played``); at seed weight 1 and one simulation the round's noise-free game replays it
    (return and mapping), not the greedy game. Off: no seed before the first game."""
    problem = build_problem(synthetic_instance(**KEEP_WINS))
    chosen, chosen_return = played_with(problem, keep_groups_action)
    run = seeded_run(problem, seed_first_round=True)
    seed = run.best_seed()
    assert seed.played == tuple(chosen) and seed.moves == final_moves(problem, chosen) and seed.weight == 1.0
    (game,) = run.actors.play(run.weights, 0.0, noise=False, greedy_games=1, best=seed)
    assert game.seeded and game.total_reward == chosen_return
    assert mapping_records(game.game) == mapping_records(replayed(problem, chosen))
    assert chosen_return != played_with(problem, greedy_action)[1]
    assert seeded_run(problem, seed_first_round=False).best_seed() is None


def test_staggered_rows_open_with_prefixes_of_the_chosen_game():
    """Persisting staggered rows given `BestSeed.played` open their first games with the first r / B of that game
    (not of the greedy game, which differs here); without ``played`` with the greedy game's, as before."""
    problem = build_problem(synthetic_instance(**KEEP_WINS))
    chosen = seed_game(problem)
    assert chosen != greedy_game(problem)
    weights = init_weights(SIZES, 0)
    layout = Layout.of(weights)
    rows = 4
    program = SearchProgram(layout, batch=rows, config=SearchConfig(num_simulations=2, max_depth=1))
    for played, reference in ((tuple(chosen), chosen), ((), greedy_game(problem))):
        selfplay = SelfPlay(problem, program, seed=3)
        seed = BestSeed(final_moves(problem, chosen), 1.0, 0.8, played=played)
        ended = selfplay.play(layout.pack(weights), 1.0, greedy_games=1, count=1, persist=True, best=seed,
                              stagger=True)
        first = [t for t in ended + [t for t in selfplay.rows.games if t is not None] if t.opening or t.greedy]
        openings = sorted(t.opening for t in first if not t.greedy)
        assert openings == [len(reference) * row // rows for row in range(1, rows)]
        for trajectory in first:
            assert trajectory.played[:trajectory.opening] == list(reference[:trajectory.opening])


def test_seed_first_round_by_size():
    """None: on exactly where rows persist (above `PERSIST_ABOVE` buffers, or where `persistent_rows` says so);
    set, it holds at any size."""
    small, edge, large = (SimpleNamespace(num_buffers=count) for count in (131, PERSIST_ABOVE, PERSIST_ABOVE + 1))
    assert [MuZeroConfig().seeds_first_round(p) for p in (small, edge, large)] == [False, False, True]
    assert MuZeroConfig(persistent_rows=True).seeds_first_round(small)
    assert not MuZeroConfig(persistent_rows=False).seeds_first_round(large)
    assert [MuZeroConfig(seed_first_round=True).seeds_first_round(p) for p in (small, large)] == [True, True]
    assert [MuZeroConfig(seed_first_round=False).seeds_first_round(p) for p in (small, large)] == [False, False]
