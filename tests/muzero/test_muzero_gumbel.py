"""Gumbel MuZero's search as recurrent tensors (`mcts.py`, ``SearchConfig.search = "gumbel"``) against
`mctx.gumbel_muzero_policy` 0.0.71 on the same fixed networks and roots, fed the Gumbel draws mctx makes for the
same key: the same trees, selected actions and improved policies."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from mctx._src import seq_halving

import timerl as trl
from algorithms.mmap.check import check_mapping
from algorithms.mmap.mapping import mapping_records
from algorithms.mmap.problem import build_problem
from algorithms.mmap.synthetic import synthetic_instance
from algorithms.muzero.gumbel import considered_visits, gumbel_outcome
from algorithms.muzero.mcts import Root, SearchConfig, gumbel_search_root, search
from algorithms.muzero.networks import Layout, init_weights
from algorithms.muzero.replay import Replay
from algorithms.muzero.selfplay import SearchProgram, SelfPlay
from test_muzero_learning import SIZES, greedy_game
from test_muzero_mcts import ACTIONS, fixed_network, fixed_recurrent_fn, mctx_output, random_root, run_search_program


def mctx_gumbel(seed: int, batch: int) -> np.ndarray:
    """The Gumbel draws gumbel_muzero_policy makes for this key (its first split, second key)."""
    _, gumbel_key = jax.random.split(jax.random.PRNGKey(seed))
    return np.asarray(jax.random.gumbel(gumbel_key, shape=(batch, ACTIONS), dtype=jnp.float32))


def run_mctx_gumbel(net, root, config: SearchConfig, seed: int, gumbel_scale: float):
    return mctx_output(mctx.gumbel_muzero_policy, net, root, config, seed, gumbel_scale=gumbel_scale)


def run_rt_gumbel(net, root, config: SearchConfig, gumbel, backend="torch"):
    """The whole tree after the last simulation and the root's improved policy and action computed from it."""
    def build(rt_root, rt_invalid, s):
        final = search(rt_root, fixed_recurrent_fn(net), rt_invalid, trl.tensor(gumbel), config, s)
        qvalues = final.children_rewards.spatial[:, 0] + config.discount * final.children_values.spatial[:, 0]
        policy, action = gumbel_outcome(final.children_visits.spatial[:, 0], qvalues, final.raw_values.spatial[:, 0],
                                        final.children_prior_logits.spatial[:, 0], trl.tensor(gumbel), rt_invalid,
                                        config)
        return dict(final._asdict(), policy=policy, action=action)

    return run_search_program(root, config, build, backend)


@pytest.mark.parametrize("max_considered, simulations", [(1, 5), (2, 7), (3, 16), (3, 50), (16, 40), (5, 3)])
def test_considered_visits_is_mctx_sequence(max_considered, simulations):
    assert considered_visits(max_considered, simulations) == \
        seq_halving.get_sequence_of_considered_visits(max_considered, simulations)


@pytest.mark.parametrize("seed, simulations, max_depth, gumbel_scale", [
    (0, 8, None, 1.0),
    (1, 16, 4, 1.0),  # the self-play shape: the depth cut-off re-evaluates existing children
    (2, 12, None, 0.0),  # no Gumbel noise: deterministic
    (3, 40, None, 1.0),  # deep trees, several halvings
])
def test_gumbel_search_matches_mctx(seed, simulations, max_depth, gumbel_scale):
    net, root = fixed_network(seed), random_root(seed, batch=6)
    config = SearchConfig(num_simulations=simulations, max_depth=max_depth, search="gumbel")
    gumbel = gumbel_scale * mctx_gumbel(seed, 6)
    ours = run_rt_gumbel(net, root, config, gumbel)
    theirs = run_mctx_gumbel(net, root, config, seed, gumbel_scale)
    tree = theirs.search_tree
    for name in ("children_visits", "node_visits", "children_index", "parents", "action_from_parent"):
        np.testing.assert_array_equal(ours[name], getattr(tree, name), err_msg=name)
    for name in ("node_values", "raw_values", "children_values", "children_rewards", "children_prior_logits"):
        np.testing.assert_allclose(ours[name], getattr(tree, name), rtol=1e-4, atol=1e-4, err_msg=name)
    np.testing.assert_array_equal(ours["action"], theirs.action)
    np.testing.assert_allclose(ours["policy"], theirs.action_weights, rtol=1e-4, atol=1e-6)
    invalid = root[3]
    assert (ours["children_visits"][:, 0][invalid] == 0).all() and (ours["policy"][invalid] < 1e-6).all()
    assert not invalid[np.arange(6), ours["action"]].any()


def test_gumbel_search_root_on_jax_matches_mctx():
    """The root's outcome alone (what self-play reads), on jax with the simulation loop scanned."""
    seed, config = 4, SearchConfig(num_simulations=16, max_depth=4, search="gumbel")
    net, root = fixed_network(seed), random_root(seed, batch=5)
    logits, value, embedding, invalid = root
    gumbel = mctx_gumbel(seed, 5)
    ctx = trl.Context("s")
    (s,) = ctx.dims
    (S,) = ctx.bounds
    got = {}
    with ctx:
        out = gumbel_search_root(Root(trl.tensor(logits), trl.tensor(value), trl.tensor(embedding)),
                                 fixed_recurrent_fn(net), trl.tensor(invalid), trl.tensor(gumbel * 0.5), config, s,
                                 trl.tensor(np.full((5, 1), 2.0, np.float32)))  # scaled back to the draws
        for name, tensor in out._asdict().items():
            tensor.sink(lambda point, array, name=name: got.__setitem__(name, np.asarray(array).copy()))
    executable = ctx.compile(bounds={S: config.num_simulations}, backend="jax")
    executable.execute()
    theirs = run_mctx_gumbel(net, root, config, seed, 1.0)
    np.testing.assert_array_equal(got["visits"], theirs.search_tree.children_visits[:, 0])
    np.testing.assert_allclose(got["value"], theirs.search_tree.node_values[:, 0], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got["action"], theirs.action)
    np.testing.assert_allclose(got["policy"], theirs.action_weights, rtol=1e-4, atol=1e-6)


def test_search_config_rejects_unknown_search():
    with pytest.raises(ValueError, match="puct"):
        SearchConfig(search="alphazero")


# ---------------------------------------------------------------------------------------- self-play with it
def gumbel_program(simulations: int, max_depth: int):
    weights = init_weights(SIZES, 0)
    layout = Layout.of(weights)
    config = SearchConfig(num_simulations=simulations, max_depth=max_depth, search="gumbel")
    return SearchProgram(layout, batch=2, config=config), layout.pack(weights)


def test_gumbel_selfplay_plays_the_search_action_and_keeps_the_improved_policy():
    """Self-play under Gumbel MuZero: legal complete games whose greedy (noise-free) game plays, at every decision,
    the action of the program's own noise-free search on that position, and keeps its improved policy (a
    distribution over the legal actions) as the policy target; Reanalyse stores the same targets."""
    problem = build_problem(synthetic_instance(seed=1, num_instructions=8))
    program, weights = gumbel_program(6, 2)
    trajectories = SelfPlay(problem, program, seed=0).play(weights, temperature=1.0, greedy_games=1)
    assert len(trajectories) == 2
    for trajectory in trajectories:
        assert trajectory.game.done and trajectory.game.feasible
        check_mapping(problem, mapping_records(trajectory.game))
        for legal, policy, action in zip(trajectory.legal, trajectory.policies, trajectory.actions):
            assert legal.sum() > 1 and legal[action]
            np.testing.assert_allclose(policy.sum(), 1.0, rtol=1e-5)
            assert (policy[~legal] < 1e-6).all()
    greedy = trajectories[0]
    replay = Replay()
    replay.add(greedy)
    replay.reanalyse_game(program, weights, 0)
    for u, (features, legal) in enumerate(zip(greedy.features, greedy.legal)):
        searched = program.search(weights, np.stack([features] * 2), np.stack([legal] * 2), None)
        assert searched.action[0] == greedy.actions[u]
        np.testing.assert_allclose(greedy.policies[u], searched.policy[0], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(replay.games[0]["policies"][u], searched.policy[0], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(replay.games[0]["values"][u], searched.value[0], rtol=1e-5, atol=1e-6)


def test_gumbel_seeded_root_plays_the_greedy_policy():
    """The root's prior all seed (`seed_weight` 1: the other actions' logits at log(tiny)), one simulation and no
    Gumbel noise: the one simulation visits the seed's move (its score g + logits + sigma(completed Q) is the
    others' plus ~87, more than sigma's range, 5 before any visit), which is then the most visited and the action,
    so the greedy game is the greedy one-step policy's game."""
    problem = build_problem(synthetic_instance(seed=1, num_instructions=8))
    program, weights = gumbel_program(1, 1)
    (seeded,) = SelfPlay(problem, program, seed=0, noise=False, seed_weight=1.0).play(weights, 0.0, greedy_games=1,
                                                                                     count=1)
    expected, total = greedy_game(problem)
    assert seeded.played == expected and seeded.total_reward == total


def test_gumbel_temperature_zero_plays_the_noise_free_search():
    """`gumbel_temperature`: the Gumbel draws scaled by the temperature, so at temperature 0 every game of a noisy
    round plays the noise-free search's game (the round's greedy game); unscaled draws explore."""
    problem = build_problem(synthetic_instance(seed=1, num_instructions=8))
    program, weights = gumbel_program(4, 2)
    scaled = SelfPlay(problem, program, seed=0, gumbel_temperature=True).play(weights, 0.0, greedy_games=1)
    assert scaled[1].played == scaled[0].played
    np.testing.assert_allclose(np.stack(scaled[1].policies), np.stack(scaled[0].policies), rtol=1e-5, atol=1e-7)
    rounds = [SelfPlay(problem, program, seed=seed).play(weights, 0.0, greedy_games=1)[1] for seed in range(4)]
    assert any(game.played != scaled[0].played for game in rounds)
