"""MMap-MuZero's supports, networks, targets, learner and self-play against NumPy written here and hand-derived
values."""

from __future__ import annotations

import numpy as np

import timerl as trl
from algorithms.mmap.baselines.heuristic import heuristic_play
from algorithms.mmap.baselines.policies import greedy_action
from algorithms.mmap.baselines.result import new_game
from algorithms.mmap.check import check_mapping
from algorithms.mmap.mapping import mapping_records
from algorithms.mmap.problem import build_problem
from algorithms.mmap.synthetic import synthetic_instance
from algorithms.muzero.agent import MuZeroConfig
from algorithms.muzero.features import FEATURES, Encoder, block_slice
from algorithms.muzero.learner import LearnerConfig, batch_shapes, train
from algorithms.muzero.mcts import SearchConfig
from algorithms.muzero.networks import Layout, Networks, Sizes, init_weights
from algorithms.muzero.replay import Replay
from algorithms.muzero.selfplay import SearchProgram, SelfPlay, Trajectory, demonstration
from algorithms.muzero.support import ATOMS, REWARD_SCALE, SUPPORT, scalar_of, squash, two_hot, unsquash

SIZES = Sizes(hidden=8, image=4, trunk=8, head=8)


def test_two_hot_expectation_is_the_squashed_value():
    x = np.array([0.0, 0.3, -2.5, 7.0, 99.0, -40.0])
    distributions = two_hot(x)
    np.testing.assert_allclose(distributions.sum(-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(distributions @ np.arange(-SUPPORT, SUPPORT + 1), squash(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(unsquash(squash(x)), x, rtol=1e-9, atol=1e-9)
    assert (distributions > 0).sum(-1).max() <= 2


def random_weights(seed=0):
    weights = init_weights(SIZES, seed)
    rng = np.random.default_rng(seed)
    return {name: rng.normal(scale=0.3, size=array.shape).astype(np.float32) for name, array in weights.items()}


# ---- NumPy twins of the networks
def dense(w, x, name):
    return x @ w[f"{name}.w"] + w[f"{name}.b"]


def relu(x):
    return np.maximum(x, 0.0)


def scale(state):
    low, high = state.min(-1, keepdims=True), state.max(-1, keepdims=True)
    return (state - low) / np.maximum(high - low, 1e-5)


def np_representation(w, features):
    image = features[:, block_slice("memory_map")]
    rest = np.concatenate([features[:, :block_slice("memory_map").start],
                           features[:, block_slice("memory_map").stop:]], axis=1)
    mixed = np.concatenate([relu(dense(w, image, "repr.image")), relu(dense(w, rest, "repr.rest"))], axis=1)
    return scale(dense(w, relu(dense(w, mixed, "repr.mix")), "repr.out"))


def np_dynamics(w, state, action):
    joined = np.concatenate([state, np.eye(3)[action]], axis=1)
    following = scale(dense(w, relu(dense(w, joined, "dyn.mix")), "dyn.out"))
    return following, dense(w, relu(dense(w, joined, "dyn.reward_hidden")), "dyn.reward")


def np_prediction(w, state):
    return (dense(w, relu(dense(w, state, "pred.policy_hidden")), "pred.policy"),
            dense(w, relu(dense(w, state, "pred.value_hidden")), "pred.value"))


def log_softmax(x):
    shifted = x - x.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def cross_entropy(logits, target):
    return -(target * log_softmax(logits)).sum(-1)


def np_unroll_loss(w, batch, unroll, head_loss=cross_entropy):
    """The K-step unroll loss; ``head_loss(output, target)`` for the value (weight 0.25) and reward (/ K) heads:
    cross-entropy on categorical supports (the default) or a squared error on scalar heads."""
    state = np_representation(w, batch["features"])
    total = 0.0
    for k in range(unroll + 1):
        weight = 1.0 if k == 0 else 1.0 / unroll
        policy, value = np_prediction(w, state)
        policy = np.where(batch["legal"][:, k] > 0.5, policy, -1e4)
        total = total + weight * (cross_entropy(policy, batch["policy"][:, k]) * batch["policy_mask"][:, k]
                                  + 0.25 * head_loss(value, batch["value"][:, k]))
        if k < unroll:
            state, reward = np_dynamics(w, state, batch["actions"][:, k])
            total = total + head_loss(reward, batch["reward"][:, k]) / unroll
    return total.mean()


def run_networks(weights: dict, outputs) -> tuple[np.ndarray, np.ndarray, dict]:
    """The networks of ``weights`` on 5 random feature rows and actions (seed 2), compiled for torch:
    ``outputs(nets, state, following, reward, policy, value)`` names the tensors to sink. Returns the features,
    the actions and what each sink got."""
    layout = Layout.of(weights)
    rng = np.random.default_rng(2)
    features = rng.normal(size=(5, FEATURES)).astype(np.float32)
    action = rng.integers(3, size=5)
    got = {}
    ctx = trl.Context("i")
    with ctx:
        nets = Networks(trl.tensor(layout.pack(weights)), layout)
        state = nets.representation(trl.tensor(features))
        following, reward = nets.dynamics(state, trl.tensor(action))
        policy, value = nets.prediction(following)
        for name, tensor in outputs(nets, state, following, reward, policy, value).items():
            tensor.sink(lambda point, array, name=name: got.__setitem__(name, np.asarray(array)))
    ctx.compile(bounds={ctx.bounds[0]: 1}, backend="torch").execute()
    return features, action, got


def test_networks_match_numpy():
    weights = random_weights(1)
    features, action, got = run_networks(weights, lambda nets, state, following, reward, policy, value: {
        "state": state, "following": following, "reward": reward, "policy": policy, "value": value,
        "value_scalar": scalar_of(value)})
    state = np_representation(weights, features)
    following, reward = np_dynamics(weights, state, action)
    policy, value = np_prediction(weights, following)
    expected_scalar = unsquash((np.exp(log_softmax(value)) * np.arange(-SUPPORT, SUPPORT + 1)).sum(-1))
    for name, array in {"state": state, "following": following, "reward": reward, "policy": policy,
                        "value": value, "value_scalar": expected_scalar}.items():
        np.testing.assert_allclose(got[name], array, rtol=1e-4, atol=1e-4, err_msg=name)


def test_reward_head_reads_the_action_by_hand():
    """The reward is predicted from [state, one-hot action] (the dynamics' input), so an action's immediate reward
    is one hidden layer away (it was read from the next state, and on transformer_decode the learned rewards did
    not separate the actions). Hand-set weights: hidden unit 0 = relu(one-hot action 0), reward logit of atom
    SUPPORT + 2 = 5 * unit 0, all else zero. Action 0: p = e^5 / (e^5 + ATOMS - 1) on atom +2 and (1 - p) / 20 on
    each other atom (they sum to -2), so the expected atom is 2 p - 2 (1 - p) / 20 and the reward its unsquash;
    actions 1 and 2: uniform atoms, expected atom 0, reward 0."""
    weights = {name: np.zeros_like(array) for name, array in init_weights(SIZES, 0).items()}
    weights["dyn.reward_hidden.w"][SIZES.hidden + 0, 0] = 1.0
    weights["dyn.reward.w"][0, SUPPORT + 2] = 5.0
    layout = Layout.of(weights)
    got = {}
    ctx = trl.Context("i")
    with ctx:
        nets = Networks(trl.tensor(layout.pack(weights)), layout)
        state = nets.representation(trl.tensor(np.ones((3, FEATURES), np.float32)))
        _, reward = nets.dynamics(state, trl.tensor(np.array([0, 1, 2])))
        scalar_of(reward).sink(lambda point, array: got.__setitem__("reward", np.asarray(array)))
    ctx.compile(bounds={ctx.bounds[0]: 1}, backend="torch").execute()
    p = np.exp(5.0) / (np.exp(5.0) + ATOMS - 1)
    np.testing.assert_allclose(got["reward"], [unsquash(2.0 * p - 2.0 * (1.0 - p) / 20.0), 0.0, 0.0], rtol=1e-4,
                               atol=1e-4)


def fake_trajectory(rewards, values, legal_first=(True, True, False)):
    steps = len(rewards)
    trajectory = Trajectory()
    for k in range(steps):
        trajectory.features.append(np.full(FEATURES, k, np.float32))
        trajectory.legal.append(np.array(legal_first if k == 0 else (True, True, True)))
        trajectory.actions.append(k % 3)
        trajectory.rewards.append(rewards[k])
        trajectory.policies.append(np.eye(3)[k % 3])
        trajectory.values.append(values[k])
    return trajectory


def test_value_targets_by_hand():
    replay = Replay(unroll=2, n_step=2, discount=0.5)
    replay.add(fake_trajectory([1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0]))
    # z_u = r_u + 0.5 r_{u+1} + 0.25 v_{u+2} while u + 2 < 4, then the rewards left only
    np.testing.assert_allclose(replay.value_targets(replay.games[0]), [9.5, 13.5, 5.0, 4.0])
    batch = replay.sample(64, np.random.default_rng(0))
    for name, (shape, dtype) in batch_shapes(LearnerConfig(batch=64, unroll=2)).items():
        assert batch[name].shape == shape and batch[name].dtype == dtype, name
    starts = batch["features"][:, 0].astype(int)
    for row, t in enumerate(starts):
        for k in range(3):
            inside = t + k < 4
            assert batch["policy_mask"][row, k] == inside
            target = [9.5, 13.5, 5.0, 4.0][t + k] if inside else 0.0
            np.testing.assert_allclose(batch["value"][row, k], two_hot(np.array(target)), atol=1e-6)
            if inside:
                np.testing.assert_array_equal(batch["policy"][row, k], np.eye(3)[(t + k) % 3])
        for k in range(2):
            if t + k < 4:
                assert batch["actions"][row, k] == (t + k) % 3
                np.testing.assert_allclose(batch["reward"][row, k], two_hot(np.array(float(t + k + 1))), atol=1e-6)


def train_fixed_batch(weights: dict, scalar_heads: bool = False) -> tuple[Layout, dict, list]:
    """40 learner steps (batch 6, K = 2, lr 1e-2) on one batch sampled from a fake trajectory, its features
    random: the layout, the batch and what each step published (weights, loss)."""
    layout = Layout.of(weights)
    replay = Replay(unroll=2, n_step=3, discount=0.9999, scalar_heads=scalar_heads)
    rng = np.random.default_rng(4)
    replay.add(fake_trajectory(list(rng.normal(size=6)), list(rng.normal(size=6))))
    config = LearnerConfig(batch=6, unroll=2, lr=1e-2)
    batch = replay.sample(config.batch, rng)
    batch["features"] = rng.normal(size=batch["features"].shape).astype(np.float32)
    published = []
    train(layout.pack(weights), layout, config, 40, lambda i: batch,
          lambda i, w, loss: published.append((w, loss)))
    return layout, batch, published


def test_learner_matches_numpy_loss_and_learns_a_fixed_batch():
    weights = random_weights(3)
    layout, batch, published = train_fixed_batch(weights)
    losses = [loss for _, loss in published]
    assert len(published) == 40
    np.testing.assert_allclose(losses[0], np_unroll_loss(weights, batch, 2), rtol=1e-4)
    later = layout.unpack(published[10][0])
    np.testing.assert_allclose(losses[11], np_unroll_loss(later, batch, 2), rtol=1e-4)
    assert losses[-1] < 0.7 * losses[0]


def test_selfplay_plays_legal_complete_games():
    problem = build_problem(synthetic_instance(seed=1, num_instructions=8))
    weights = init_weights(SIZES, 0)
    layout = Layout.of(weights)
    program = SearchProgram(layout, batch=2, config=SearchConfig(num_simulations=4, max_depth=2))
    trajectories = SelfPlay(problem, program, seed=0).play(layout.pack(weights), temperature=1.0)
    assert len(trajectories) == 2
    scale = REWARD_SCALE / (problem.latency_all_slow - problem.latency_all_fast)
    for trajectory in trajectories:
        game = trajectory.game
        assert game.done and game.feasible
        check_mapping(problem, mapping_records(game))
        np.testing.assert_allclose(sum(trajectory.rewards), game.total_reward * scale, rtol=1e-6, atol=1e-9)
        for legal, policy, action in zip(trajectory.legal, trajectory.policies, trajectory.actions):
            assert legal.sum() > 1 and legal[action]
            np.testing.assert_allclose(policy.sum(), 1.0, rtol=1e-6)
            assert (policy[~legal] == 0).all()
    assert Encoder(problem).encode(trajectories[0].game)[0].shape == (FEATURES,)
    assert ATOMS == 2 * SUPPORT + 1


def test_demonstration_replays_the_heuristics_game():
    """The heuristic's game as a trajectory (MuZero's replay starts with it): the same game (reward and
    mapping), a one-hot policy target on a legal move at every decision, and the rewards summing to its return."""
    problem = build_problem(synthetic_instance(seed=2, num_instructions=10))
    played = heuristic_play(problem)
    trajectory = demonstration(problem, played.actions)
    game = trajectory.game
    assert game.done and game.total_reward == played.reward and trajectory.played == list(played.actions)
    assert mapping_records(game) == played.mapping
    scale = REWARD_SCALE / (problem.latency_all_slow - problem.latency_all_fast)
    np.testing.assert_allclose(sum(trajectory.rewards), game.total_reward * scale, rtol=1e-6, atol=1e-9)
    assert trajectory.actions and len(trajectory.features) == len(trajectory.actions) == len(trajectory.values)
    for legal, policy, action in zip(trajectory.legal, trajectory.policies, trajectory.actions):
        assert legal.sum() > 1 and legal[action] and policy[action] == 1.0 and policy.sum() == 1.0


def test_demonstration_targets_are_reanalysed():
    """A demonstration enters the replay with the search's targets (Reanalyse), not one-hot on the demonstrator's
    moves: every position's policy is the program's visit distribution on that position and its value the
    search's root value (checked against the program run on the same rows), its actions and rewards unchanged."""
    problem = build_problem(synthetic_instance(seed=2, num_instructions=10))
    trajectory = demonstration(problem, heuristic_play(problem).actions)
    weights = init_weights(SIZES, 0)
    layout = Layout.of(weights)
    program = SearchProgram(layout, batch=2, config=SearchConfig(num_simulations=4, max_depth=2))
    replay = Replay()
    replay.add(trajectory)
    replay.reanalyse_game(program, layout.pack(weights), 0)
    game = replay.games[0]
    length = len(trajectory.actions)
    assert length >= 2
    for u in range(length):
        features = np.stack([trajectory.features[u]] * 2)
        legal = np.stack([trajectory.legal[u]] * 2)
        visits, values = program.run(layout.pack(weights), features, legal, None)
        np.testing.assert_allclose(game["policies"][u], visits[0] / visits[0].sum(), rtol=1e-6)
        np.testing.assert_allclose(game["values"][u], values[0], rtol=1e-5, atol=1e-6)
        assert (game["policies"][u][~trajectory.legal[u]] == 0).all()
    np.testing.assert_array_equal(game["actions"], trajectory.actions)
    np.testing.assert_allclose(game["rewards"], trajectory.rewards)


def test_learner_steps_follow_the_budget():
    config = MuZeroConfig(steps_per_round=20, steps_per_second=20.0)
    assert [config.learner_steps(s) for s in (0.1, 15.0, 60.0)] == [20, 300, 1200]
    assert MuZeroConfig(iterations=7).learner_steps(60.0) == 7


def test_occupied_rows_and_one_greedy_game():
    """`Occupancy.occupied_rows` (the encoder's memory map, unpacked at once) is `occupied_row` stacked; the
    final greedy game of a run is one game of a batch-2 program (`count=1`), the same as its batch's row 0."""
    problem = build_problem(synthetic_instance(seed=1, num_instructions=8))
    weights = init_weights(SIZES, 0)
    layout = Layout.of(weights)
    program = SearchProgram(layout, batch=2, config=SearchConfig(num_simulations=4, max_depth=2))
    (alone,) = SelfPlay(problem, program, seed=0, noise=False).play(layout.pack(weights), 0.0, greedy_games=1,
                                                                    count=1)
    both = SelfPlay(problem, program, seed=0, noise=False).play(layout.pack(weights), 0.0, greedy_games=1)
    assert alone.played == both[0].played and alone.total_reward == both[0].total_reward
    occupancy = alone.game.occupancy
    times = np.arange(occupancy.num_times)
    np.testing.assert_array_equal(occupancy.occupied_rows(times),
                                  np.stack([occupancy.occupied_row(t) for t in times]))
    assert occupancy.occupied_rows(times).any()


def test_policy_loss_is_over_legal_actions_by_hand():
    """All-zero weights (uniform logits over policy, value and reward atoms), K = 1, the policy target (0.5, 0, 0.5)
    on a position where NoCopy is illegal and the unrolled step masked out: the loss is log 2 (the policy over the two
    legal actions; log 3 unmasked) + 0.25 log 21 (value) + log 21 (reward, / K) + 0.25 log 21 (value at k = 1)."""
    weights = {name: np.zeros_like(array) for name, array in init_weights(SIZES, 0).items()}
    layout = Layout.of(weights)
    config = LearnerConfig(batch=2, unroll=1, lr=0.0)
    batch = {name: np.zeros(shape, dtype) for name, (shape, dtype) in batch_shapes(config).items()}
    batch["policy"][:, 0] = (0.5, 0.0, 0.5)
    batch["legal"][:] = 1.0
    batch["legal"][:, 0, 1] = 0.0
    batch["policy_mask"][:, 0] = 1.0
    batch["value"][:, :, SUPPORT] = 1.0
    batch["reward"][:, :, SUPPORT] = 1.0
    losses = []
    train(layout.pack(weights), layout, config, 1, lambda i: batch, lambda i, w, loss: losses.append(loss))
    np.testing.assert_allclose(losses[0], np.log(2.0) + 1.5 * np.log(ATOMS), rtol=1e-5)


def played_with(problem, policy) -> tuple[list[int], float]:
    """A one-step policy's game (game -> action), written out here: its actions and its return."""
    game = new_game(problem)
    actions = []
    while not game.done:
        actions.append(policy(game))
        game.play(actions[-1])
    return actions, game.total_reward


def greedy_game(problem) -> tuple[list[int], float]:
    """The greedy one-step policy's game (`policies.greedy_action`): its actions and its return."""
    return played_with(problem, greedy_action)


def test_seeded_root_plays_the_greedy_policy():
    """With the root's prior all seed (`seed_weight` 1) and one simulation, the one visit goes to the seed's move,
    so the noise-free greedy game is the greedy one-step policy's game (`policies.greedy_action`), played here
    without MuZero; the seeds are kept per decision, one-hot on that move."""
    problem = build_problem(synthetic_instance(seed=1, num_instructions=8))
    weights = init_weights(SIZES, 0)
    layout = Layout.of(weights)
    program = SearchProgram(layout, batch=2, config=SearchConfig(num_simulations=1, max_depth=1))
    (seeded,) = SelfPlay(problem, program, seed=0, noise=False, seed_weight=1.0).play(layout.pack(weights), 0.0,
                                                                                     greedy_games=1, count=1)
    expected, total = greedy_game(problem)
    assert seeded.played == expected and seeded.total_reward == total
    assert len(seeded.seeds) == len(seeded.actions) > 0
    assert [int(np.argmax(seed)) for seed in seeded.seeds] == seeded.actions
    replay = Replay()
    replay.add(seeded)
    replay.reanalyse_game(program, layout.pack(weights), 0, seed_weight=1.0)
    assert np.array_equal(np.argmax(replay.games[0]["policies"], -1), seeded.actions)
