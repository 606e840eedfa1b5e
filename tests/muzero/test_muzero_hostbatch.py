"""Self-play's host side over the whole search batch at once, against the per-game code it replaces: the batched
encoder against `Encoder.encode` game by game, the batched action choice against `Generator.choice` row by row."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.mmap.baselines.policies import legal_list
from algorithms.mmap.baselines.result import new_game
from algorithms.mmap.problem import build_problem, with_copy_setup
from algorithms.mmap.synthetic import synthetic_instance
from algorithms.mmap.check import check_mapping
from algorithms.mmap.mapping import mapping_records
from algorithms.muzero.features import Encoder
from algorithms.muzero.mcts import SearchConfig
from algorithms.muzero.networks import Layout, Sizes, init_weights
from algorithms.muzero.selfplay import SearchProgram, SelfPlay, choose
from algorithms.muzero.support import REWARD_SCALE

SIZES = Sizes(hidden=8, image=4, trunk=8, head=8)


def games_along_random_play(problem, count: int, seed: int):
    """Snapshots of random games at random moves, a finished game among them."""
    rng = np.random.default_rng(seed)
    snapshots = []
    for _ in range(count):
        game = new_game(problem)
        stop = int(rng.integers(problem.num_buffers))
        while not game.done and game.position < stop:
            legal = legal_list(game)
            game.play(legal[int(rng.integers(len(legal)))])
        snapshots.append(game)
    finished = new_game(problem)
    while not finished.done:
        finished.play(legal_list(finished)[-1])
    return snapshots + [finished]


@pytest.mark.parametrize("name", ["mlp_sgd", "synthetic"])
def test_encode_many_is_encode_per_game(name):
    problem = (build_problem(synthetic_instance(seed=3, num_instructions=30)) if name == "synthetic"
               else with_copy_setup(build_problem(name), 0.5e-6))
    encoder = Encoder(problem)
    games = games_along_random_play(problem, 12, seed=1)
    features, legal = encoder.encode_many(games)
    one_by_one = [encoder.encode(game) for game in games]
    np.testing.assert_array_equal(features, np.stack([f for f, _ in one_by_one]))
    np.testing.assert_array_equal(legal, np.stack([m for _, m in one_by_one]))
    assert features.dtype == np.float32 and legal.dtype == bool


def test_choose_draws_as_rng_choice_row_by_row():
    rng = np.random.default_rng(5)
    visits = rng.integers(0, 9, size=(40, 3)).astype(np.float32)
    legal = rng.random((40, 3)) < 0.7
    legal[:, 2] |= ~legal.any(axis=1)
    visits[3] = 0.0  # no legal visits: uniform over the legal actions
    temperatures = np.where(rng.random(40) < 0.3, 0.0, rng.uniform(0.2, 1.0, 40))
    actions = choose(visits, legal, temperatures, np.random.default_rng(11))
    reference = np.random.default_rng(11)
    for row in range(40):
        counts = np.where(legal[row], visits[row], 0.0).astype(np.float64)
        if counts.sum() == 0:
            counts = legal[row].astype(np.float64)
        if temperatures[row] == 0:
            expected = int(np.argmax(counts))
        else:
            weights = counts ** (1.0 / temperatures[row])
            expected = int(reference.choice(3, p=weights / weights.sum()))
        assert actions[row] == expected, row
        assert legal[row, actions[row]]


def greedy_game_alone(batch: int, instructions: int = 8):
    """A small workload (``instructions`` instructions), the initial networks packed, a search program of ``batch``
    rows, and the noise-free game one row plays alone (noise-free play is deterministic: the game every greedy row
    must reproduce)."""
    problem = build_problem(synthetic_instance(seed=1, num_instructions=instructions))
    weights = init_weights(SIZES, 0)
    layout = Layout.of(weights)
    packed = layout.pack(weights)
    program = SearchProgram(layout, batch=batch, config=SearchConfig(num_simulations=4, max_depth=2))
    (alone,) = SelfPlay(problem, program, seed=0).play(packed, 0.0, greedy_games=1, count=1)
    return problem, packed, program, alone


def test_refilled_rows_play_whole_games():
    """A round of more games than search rows (`SelfPlay.play`, ``count`` > B): a row whose game ends starts the
    next one. Noise-free greedy games are deterministic, so each of 5 played on 2 rows (rows refilled mid-round,
    beside games of other lengths) is the game one row plays alone; sampled games are legal and complete, their
    decisions and rewards their own (the rewards sum to the game's return), and every search but the last games'
    holds a live game in each row (the rows' live count is the decisions made)."""
    problem, packed, program, alone = greedy_game_alone(batch=2)
    selfplay = SelfPlay(problem, program, seed=3)
    games = selfplay.play(packed, 1.0, greedy_games=5, count=5)
    assert len(games) == 5
    for game in games:
        assert game.played == alone.played and game.actions == alone.actions
        np.testing.assert_allclose(game.policies, alone.policies, rtol=1e-6)
    selfplay = SelfPlay(problem, program, seed=3)
    games = selfplay.play(packed, 1.0, greedy_games=1, count=7)
    assert len(games) == 7 and games[0].played == alone.played
    assert len({tuple(game.played) for game in games}) > 1  # the sampled games differ
    scale = REWARD_SCALE / (problem.latency_all_slow - problem.latency_all_fast)
    decisions = 0
    for trajectory in games:
        game = trajectory.game
        assert game.done and game.feasible
        check_mapping(problem, mapping_records(game))
        np.testing.assert_allclose(sum(trajectory.rewards), game.total_reward * scale, rtol=1e-6, atol=1e-9)
        replayed = new_game(problem)
        for action in trajectory.played:
            replayed.play(action)
        assert replayed.total_reward == game.total_reward
        assert len(trajectory.features) == len(trajectory.actions) == len(trajectory.policies)
        for features, legal, action in zip(trajectory.features, trajectory.legal, trajectory.actions):
            assert legal.sum() > 1 and legal[action]
        decisions += len(trajectory.actions)
    assert selfplay.live_rows == decisions
    assert selfplay.searches < decisions  # two rows searched at once


def test_persisting_rows_play_whole_games_across_calls():
    """Rows that persist across rounds (`SelfPlay.play(persist=True)`): each call returns at least ``count`` games
    as they end, the games still in progress go on at the next call (with the next call's weights), no row is left
    without a game at any search (rows freed by a call's last games start at the next call), and every game
    returned is legal, complete and replays to its return. A greedy game ending in a later call is still the game
    one row plays alone (noise-free play is deterministic)."""
    problem, packed, program, alone = greedy_game_alone(batch=3)
    selfplay = SelfPlay(problem, program, seed=3)
    rounds = [selfplay.play(packed, 1.0, greedy_games=1, count=2, persist=True) for _ in range(4)]
    scale = REWARD_SCALE / (problem.latency_all_slow - problem.latency_all_fast)
    returned = [trajectory for games in rounds for trajectory in games]
    assert all(len(games) >= 2 for games in rounds)
    assert len({id(trajectory) for trajectory in returned}) == len(returned)  # no game returned twice
    in_progress = [trajectory for trajectory in selfplay.rows.games if trajectory is not None]
    assert 1 <= len(in_progress) <= 3 and not any(trajectory.game.done for trajectory in in_progress)
    assert not {id(t) for t in in_progress} & {id(t) for t in returned}
    greedy = [trajectory for trajectory in returned if trajectory.greedy]
    assert greedy and all(trajectory.played == alone.played for trajectory in greedy)
    decisions = 0
    for trajectory in returned + in_progress:
        game = trajectory.game
        decisions += len(trajectory.actions)
        if any(trajectory is other for other in in_progress):
            continue
        assert game.done and game.feasible and trajectory.total_reward == game.total_reward
        check_mapping(problem, mapping_records(game))
        np.testing.assert_allclose(sum(trajectory.rewards), game.total_reward * scale, rtol=1e-6, atol=1e-9)
        replayed = new_game(problem)
        for action in trajectory.played:
            replayed.play(action)
        assert replayed.total_reward == game.total_reward
        for legal, action in zip(trajectory.legal, trajectory.actions):
            assert legal.sum() > 1 and legal[action]
    assert selfplay.live_rows == decisions == 3 * selfplay.searches  # every search held a live game in each row
    # without persist, the rows start afresh: the same calls as one SelfPlay of its own
    fresh = SelfPlay(problem, program, seed=3).play(packed, 1.0, greedy_games=1, count=2)
    assert len(fresh) == 2 and all(trajectory.game.done for trajectory in fresh)
