"""MuZero's learning signal: scalar value and reward heads (`Sizes.heads` = "scalar": the networks' scalars, the
replay's targets and the learner's squared-error loss against NumPy written here and values by hand),
self-imitation of the best game (`Replay.set_elite`: targets by hand), roots seeded from the best game and from its
mutants (`BestSeed`, `agent.mutant`: by hand and against the same NumPy draws) and the cosine learning rate
(`learner.learning_rate`: by hand and through Adam's steps)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from algorithms.mmap.mapping import mapping_records
from algorithms.mmap.problem import build_problem
from algorithms.mmap.synthetic import synthetic_instance
from algorithms.muzero.features import FEATURES
from algorithms.muzero.mcts import SearchConfig
from algorithms.muzero.agent import mutant
from algorithms.muzero.learner import LearnerConfig, batch_shapes, learning_rate, train
from algorithms.muzero.networks import Layout, Sizes, init_weights, shapes
from algorithms.muzero.replay import Replay
from algorithms.muzero.seeding import BestSeed, final_moves
from algorithms.muzero.selfplay import SearchProgram, SelfPlay
from algorithms.muzero.support import REWARD_UNIT, VALUE_UNIT, two_hot

from test_muzero_learning import (SIZES, fake_trajectory, greedy_game, np_dynamics, np_prediction,
                                  np_representation, np_unroll_loss, random_weights, run_networks,
                                  train_fixed_batch)

SCALAR = Sizes(hidden=8, image=4, trunk=8, head=8, heads="scalar")


def random_scalar_weights(seed=0):
    rng = np.random.default_rng(seed)
    return {name: rng.normal(scale=0.3, size=array.shape).astype(np.float32)
            for name, array in init_weights(SCALAR, seed).items()}


def np_scalar_unroll_loss(w, batch, unroll):
    """The unroll loss with squared errors for value (weight 0.25) and reward (/ K), the policy term as before."""
    return np_unroll_loss(w, batch, unroll, head_loss=lambda output, target: (output[:, 0] - target) ** 2)


def test_scalar_heads_have_one_output_and_read_in_units():
    assert shapes(SCALAR)["pred.value"] == (8, 1) and shapes(SCALAR)["dyn.reward"] == (8, 1)
    weights = random_scalar_weights(1)
    assert Layout.of(weights).scalar_heads
    assert not Layout.of(init_weights(Sizes(hidden=8, image=4, trunk=8, head=8))).scalar_heads
    features, action, got = run_networks(weights, lambda nets, state, following, reward, policy, value: {
        "reward": nets.reward_of(reward), "value": nets.value_of(value)})
    following, reward = np_dynamics(weights, np_representation(weights, features), action)
    _, value = np_prediction(weights, following)
    np.testing.assert_allclose(got["reward"], reward[:, 0] * REWARD_UNIT, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got["value"], value[:, 0] * VALUE_UNIT, rtol=1e-4, atol=1e-4)


def test_scalar_targets_by_hand():
    """The n-step value targets of `test_value_targets_by_hand` (9.5, 13.5, 5, 4) and the rewards (1, 2, 3, 4), each
    divided by its unit; 0 past the end."""
    replay = Replay(unroll=2, n_step=2, discount=0.5, scalar_heads=True)
    replay.add(fake_trajectory([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0]))
    batch = replay.sample(64, np.random.default_rng(0))
    for name, (shape, dtype) in batch_shapes(LearnerConfig(batch=64, unroll=2), scalar_heads=True).items():
        assert batch[name].shape == shape and batch[name].dtype == dtype, name
    for row, t in enumerate(batch["features"][:, 0].astype(int)):
        for k in range(3):
            target = [9.5, 13.5, 5.0, 4.0][t + k] if t + k < 4 else 0.0
            np.testing.assert_allclose(batch["value"][row, k], target / VALUE_UNIT, rtol=1e-6)
        for k in range(2):
            np.testing.assert_allclose(batch["reward"][row, k], (t + k + 1) / REWARD_UNIT if t + k < 4 else 0.0,
                                       rtol=1e-6)


def test_scalar_learner_matches_numpy_loss_and_learns_a_fixed_batch():
    weights = random_scalar_weights(3)
    layout, batch, published = train_fixed_batch(weights, scalar_heads=True)
    losses = [loss for _, loss in published]
    np.testing.assert_allclose(losses[0], np_scalar_unroll_loss(weights, batch, 2), rtol=1e-4)
    np.testing.assert_allclose(losses[11], np_scalar_unroll_loss(layout.unpack(published[10][0]), batch, 2),
                               rtol=1e-4)
    assert losses[-1] < 0.7 * losses[0]


def test_scalar_loss_by_hand():
    """All-zero weights: uniform policy logits and zero value and reward outputs. K = 1, policy target (0.5, 0.5, 0)
    over three legal actions at k = 0 (masked at k = 1), value targets 2 and 4 (units), reward target 3:
    log 3 + 0.25 * 2^2 + 3^2 / 1 + 0.25 * 4^2 / 1 = log 3 + 14."""
    weights = {name: np.zeros_like(array) for name, array in init_weights(SCALAR, 0).items()}
    layout = Layout.of(weights)
    config = LearnerConfig(batch=2, unroll=1, lr=0.0)
    batch = {name: np.zeros(shape, dtype) for name, (shape, dtype) in batch_shapes(config, True).items()}
    batch["policy"][:, 0] = (0.5, 0.5, 0.0)
    batch["legal"][:] = 1.0
    batch["policy_mask"][:, 0] = 1.0
    batch["value"][:] = (2.0, 4.0)
    batch["reward"][:] = 3.0
    losses = []
    train(layout.pack(weights), layout, config, 1, lambda i: batch, lambda i, w, loss: losses.append(loss))
    np.testing.assert_allclose(losses[0], np.log(3.0) + 14.0, rtol=1e-5)


def test_heads_must_be_known():
    with pytest.raises(ValueError, match="heads"):
        Sizes(heads="gaussian")


def test_elite_targets_by_hand():
    """The elite game (rewards 1, 2, 3, 4 at discount 0.5) keeps its moves as one-hot policy targets and its exact
    returns as value targets: z = (1 + 0.5 * 2 + 0.25 * 3 + 0.125 * 4, 2 + 1.5 + 1, 3 + 2, 4) = (3.25, 4.5, 5, 4),
    whatever its stored search values; `sample(elite=e)` draws its first e rows from it, the rest from the buffer."""
    replay = Replay(unroll=2, n_step=1, discount=0.5)
    replay.add(fake_trajectory([0.0] * 3, [0.0] * 3))
    elite = fake_trajectory([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0])
    elite.policies = [np.full(3, 1.0 / 3.0)] * 4
    elite.features = [np.full(FEATURES, 100 + k, np.float32) for k in range(4)]
    replay.set_elite(elite)
    np.testing.assert_allclose(replay.elite["z"], [3.25, 4.5, 5.0, 4.0])
    np.testing.assert_array_equal(replay.elite["policies"], np.eye(3)[[0, 1, 2, 0]])
    assert len(replay.games) == 1  # kept apart from the buffer
    batch = replay.sample(16, np.random.default_rng(0), elite=5)
    starts = batch["features"][:, 0].astype(int)
    assert (starts[:5] >= 100).all() and (starts[5:] < 100).all()
    for row, t in enumerate(starts[:5] - 100):
        for k in range(3):
            target = [3.25, 4.5, 5.0, 4.0][t + k] if t + k < 4 else 0.0
            np.testing.assert_allclose(batch["value"][row, k], two_hot(np.array(target)), atol=1e-6)
            if t + k < 4:
                np.testing.assert_array_equal(batch["policy"][row, k], np.eye(3)[(t + k) % 3])
    plain = Replay(unroll=2, n_step=1, discount=0.5)
    plain.add(fake_trajectory([0.0] * 3, [0.0] * 3))
    without, ignored = plain.sample(16, np.random.default_rng(1)), plain.sample(16, np.random.default_rng(1), elite=5)
    for name, array in without.items():  # no elite set: ``elite`` changes nothing
        np.testing.assert_array_equal(ignored[name], array, err_msg=name)


def sampled_round():
    """A small workload's problem, the initial networks (layout, weights) and four games sampled with them."""
    problem = build_problem(synthetic_instance(seed=1, num_instructions=12))
    weights = init_weights(SIZES, 0)
    layout = Layout.of(weights)
    program = SearchProgram(layout, batch=4, config=SearchConfig(num_simulations=4, max_depth=2))
    return problem, layout, weights, SelfPlay(problem, program, seed=3).play(layout.pack(weights), 1.0)


def test_roots_seeded_from_the_best_game_replay_it():
    """`final_moves` of a sampled game (rewinds included) seeds every root (`BestSeed`, seed weight 1, one
    simulation): the noise-free game plays the seed's move at each decision, i.e. the sampled game's final move at
    each buffer, and ends with the same mapping and return; without moves the seed is the greedy policy's."""
    problem, layout, weights, sampled = sampled_round()
    greedy_actions, greedy_total = greedy_game(problem)
    best = max(sampled, key=lambda t: t.total_reward)
    moves = final_moves(problem, best.played)
    one = SearchProgram(layout, batch=1, config=SearchConfig(num_simulations=1, max_depth=1))
    (replayed,) = SelfPlay(problem, one, seed=0, noise=False).play(
        layout.pack(weights), 0.0, greedy_games=1, count=1, best=BestSeed(moves, 0.5, 1.0))
    assert replayed.total_reward == best.total_reward
    assert mapping_records(replayed.game) == mapping_records(best.game)
    assert final_moves(problem, replayed.played) == moves
    (plain,) = SelfPlay(problem, one, seed=0, noise=False, seed_weight=1.0).play(
        layout.pack(weights), 0.0, greedy_games=1, count=1, best=BestSeed({}, 1.0, 1.0))
    assert plain.played == greedy_actions and plain.total_reward == greedy_total
    assert any(t.total_reward != greedy_total for t in sampled)  # the seeded game is not the greedy one by chance


def test_best_seed_share_seeds_the_first_games_only():
    """`BestSeed.share` 0.5 of two games: game 0 (seed weight 1 on the best game's moves) replays the best game,
    game 1 keeps the greedy policy's seed at `SelfPlay.seed_weight` 1 and plays the greedy game; the count of
    seeded games by hand."""
    problem, layout, weights, sampled = sampled_round()
    greedy_actions, greedy_total = greedy_game(problem)
    best = next(t for t in sampled if t.total_reward != greedy_total)
    two = SearchProgram(layout, batch=2, config=SearchConfig(num_simulations=1, max_depth=1))
    seeded, plain = SelfPlay(problem, two, seed=0, noise=False, seed_weight=1.0).play(
        layout.pack(weights), 0.0, greedy_games=2, best=BestSeed(final_moves(problem, best.played), 0.5, 1.0))
    assert seeded.total_reward == best.total_reward and mapping_records(seeded.game) == mapping_records(best.game)
    assert plain.played == greedy_actions
    assert [BestSeed({}, share, 1.0).games(count) for share, count in ((0.0, 8), (0.01, 8), (0.25, 8), (1.0, 8))] \
        == [0, 1, 2, 8]


def test_mutant_changes_moves_at_the_rate_by_hand():
    """`agent.mutant`: rate 0 keeps every move, rate 1 changes every one to another action; in between the same
    draws written out with NumPy (a uniform below the rate changes the move, shifted by 1 or 2 modulo 3)."""
    moves = {position: position % 3 for position in range(0, 400, 2)}
    assert mutant(moves, 0.0, np.random.default_rng(0)) == moves
    flipped = mutant(moves, 1.0, np.random.default_rng(0))
    assert list(flipped) == list(moves) and all(flipped[p] != a and 0 <= flipped[p] < 3 for p, a in moves.items())
    rng = np.random.default_rng(5)
    changed, shifts = rng.random(len(moves)) < 0.1, rng.integers(1, 3, len(moves))
    expected = {p: (a + s) % 3 if c else a for (p, a), c, s in zip(moves.items(), changed, shifts)}
    mutated = mutant(moves, 0.1, np.random.default_rng(5))
    assert mutated == expected and 0 < sum(mutated[p] != a for p, a in moves.items()) < len(moves) // 4


def test_best_seed_moves_of_by_hand():
    """`BestSeed.moves_of`: the seeded games' first ones get the best game's moves, their last `len(mutants)` one
    mutant each, games past the share none."""
    best, first, second = {0: 0}, {0: 1}, {0: 2}
    seed = BestSeed(best, 1.0, 0.8, (first, second))
    assert [seed.moves_of(index, 4) for index in range(4)] == [best, best, first, second]
    half = BestSeed(best, 0.5, 0.8, (first,))
    assert [half.moves_of(index, 4) for index in range(4)] == [best, first, None, None]
    assert [BestSeed(best, 1.0, 0.8).moves_of(index, 2) for index in range(2)] == [best, best]


def test_mutant_seeded_game_replays_its_mutant():
    """Two noise-free games seeded at weight 1 with one simulation, the second from a 'mutant' (here another
    sampled game's final moves): game 0 replays the best game, game 1 the other game, mapping and return."""
    problem, layout, weights, sampled = sampled_round()
    ordered = sorted(sampled, key=lambda t: t.total_reward)
    best, other = ordered[-1], ordered[0]
    assert best.total_reward != other.total_reward
    two = SearchProgram(layout, batch=2, config=SearchConfig(num_simulations=1, max_depth=1))
    seed = BestSeed(final_moves(problem, best.played), 1.0, 1.0, (final_moves(problem, other.played),))
    first, second = SelfPlay(problem, two, seed=0, noise=False).play(layout.pack(weights), 0.0, greedy_games=2,
                                                                     best=seed)
    assert first.seeded and second.seeded
    assert first.total_reward == best.total_reward and mapping_records(first.game) == mapping_records(best.game)
    assert second.total_reward == other.total_reward and mapping_records(second.game) == mapping_records(other.game)


def test_cosine_learning_rate_by_hand_and_in_the_learner():
    """`learning_rate`: lr at the first step, final_lr at the last, their mean half-way; None keeps lr. In the
    learner: Adam's first step moves every weight by lr (|m / sqrt(v)| = 1 there), and with final_lr 0 the last
    of two steps moves nothing; final_lr = lr gives the constant schedule's weights exactly."""
    config = LearnerConfig(batch=4, unroll=2, lr=1e-2, final_lr=1e-3)
    assert learning_rate(config, 0, 5) == pytest.approx(1e-2) and learning_rate(config, 4, 5) == pytest.approx(1e-3)
    assert learning_rate(config, 2, 5) == pytest.approx(5.5e-3)
    assert learning_rate(LearnerConfig(lr=3e-3), 7, 9) == 3e-3
    short = dataclasses.replace(config, decay_steps=3)  # the cosine over 3 steps, then final_lr
    assert [learning_rate(short, step, 10) for step in (0, 1, 2, 9)] == pytest.approx([1e-2, 5.5e-3, 1e-3, 1e-3])
    assert learning_rate(short, 1, 2) == pytest.approx(1e-3)  # a run shorter than decay_steps decays over its own
    weights = random_weights(3)
    layout = Layout.of(weights)
    replay = Replay(unroll=2, n_step=3, discount=0.9999)
    rng = np.random.default_rng(4)
    replay.add(fake_trajectory(list(rng.normal(size=6)), list(rng.normal(size=6))))
    batch = replay.sample(4, rng)
    batch["features"] = rng.normal(size=batch["features"].shape).astype(np.float32)

    def run(config, steps):
        published = []
        train(layout.pack(weights), layout, config, steps, lambda i: batch, lambda i, w, loss: published.append(w))
        return [layout.pack(weights)] + published

    decayed = run(dataclasses.replace(config, final_lr=0.0), 2)
    first = np.abs(decayed[1] - decayed[0])
    assert first.max() == pytest.approx(1e-2, rel=1e-4) and np.mean(first > 0.99e-2) > 0.9
    assert np.array_equal(decayed[2], decayed[1])
    constant = run(LearnerConfig(batch=4, unroll=2, lr=1e-2), 3)
    same = run(dataclasses.replace(config, final_lr=1e-2), 3)
    for a, b in zip(constant, same):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-7)
