"""A short training as the bench trains the runtime policy (imitation of the heuristic proposal, then
REINFORCE from there): the trained policy's proposals against uniform BRKGA on held-out graphs."""

import numpy as np
import pytest

from algorithms.regal import brkga, data, features, train
from algorithms.regal.policy import Sizes


SIZES = Sizes(hidden=32, edge_hidden=16, rounds=2)  # hidden 16 at lr 2e-2 stalled at -1.1 in imitation (measured)


@pytest.fixture(scope="module")
def splits():
    return data.splits(train=16, valid=0, test=6, variants=1, ops=(10, 16), seed=3)


@pytest.fixture(scope="module")
def cloned(splits):
    targets = [features.imitation_target(graph, "runtime") for graph in splits.train]
    config = train.Config(iterations=800, batch=16, lr=1e-2, sizes=SIZES)
    return train.imitate(splits.train, targets, config), targets


@pytest.fixture(scope="module")
def trained(splits, cloned):
    config = train.Config(kind="runtime", iterations=40, batch=16, train_budget=100, lr=1e-3, samples=4, seeds=1,
                          sizes=SIZES, seed=0)
    return train.train(splits.train, config, start=cloned[0].weights), splits.test


def test_training_records_a_curve_and_weights(trained):
    policy, _ = trained
    assert len(policy.curve) == 40 and policy.weights.shape == (policy.layout.size,)
    assert all(np.isfinite(row["reward"]) and row["reward"] < 0 for row in policy.curve)


def test_trained_proposals_beat_uniform_brkga_on_held_out_graphs(trained):
    """800 iterations of imitation, then 40 of REINFORCE with the BRKGA reward (runtime, BRKGA-100, lr 1e-3);
    on held-out graphs, proposals drawn from the policy (one draw per graph, as training drew them) beat
    uniform BRKGA on average (same budget, same seeds, computed here). Measured with training seed 0: +5.63%
    on 100% of (graph, seed) pairs with 15 node features and the limit's rounding tolerance (+8.04% before
    it; +6.72%, 89% with 14 features after 400 iterations of imitation) since imitation starts from a
    full-scale policy head (from the 0.01-scaled head: +1.37%, 61%; the imitation target itself: +8.6%, 100%;
    REINFORCE alone from a fresh start, 40 iterations at lr 2e-2, measured +0.14% with 11 node features,
    +1.35% with 10)."""
    policy, held_out = trained
    actions = train.propose(policy, held_out, greedy=False, seed=1)
    uniform, regal = [], []
    for graph, action in zip(held_out, actions):
        proposal = features.proposal(graph, action)
        for seed in range(3):
            uniform.append(brkga.optimize(graph, "runtime", 100, seed=seed).best_cost)
            regal.append(brkga.optimize(graph, "runtime", 100, proposal, seed=seed).best_cost)
    improvement = (np.array(uniform) - np.array(regal)) / np.array(uniform)
    print(f"held-out improvement {improvement.mean():+.4f}, matches or beats {np.mean(improvement >= 0):.2f}")
    assert improvement.mean() > 0.005


def test_reinforce_learns_a_rewarded_action():
    """The learning machinery alone: a reward that counts the ops whose priority head chose action 4
    (mean 0.3, concentration 10) must teach the greedy policy to choose it. (Graphs of one size, so no
    padded op, whose actions are not learned, enters the count.)"""
    graphs = data.generate(4, 1, ops=(7, 7), seed=9)
    config = train.Config(iterations=50, batch=4, lr=2e-2, sizes=Sizes(hidden=8, edge_hidden=4, rounds=1))

    def reward(point, actions):
        return (np.asarray(actions)[:, :, features.DEVICES] == 4).mean(axis=1).astype(np.float32),

    policy = train.train(graphs, config, reward_fn=reward)
    rewards = [row["reward"] for row in policy.curve]
    assert np.mean(rewards[-5:]) > np.mean(rewards[:5]) + 0.3
    greedy = train.propose(policy, graphs)
    most_likely = np.mean([(a[:, features.DEVICES] == 4).mean() for a in greedy])
    assert most_likely > 0.9
    # sampled actions follow the policy as training drew them: at least as often 4 as in the last training
    # iterations (the final weights come after one more update), not more often than the argmax (as often
    # once the policy chooses 4 with certainty: with the 13th node feature both measured 1.000)
    sampled = train.propose(policy, graphs * 8, greedy=False, seed=1)
    frequency = np.mean([(a[:, features.DEVICES] == 4).mean() for a in sampled])
    print(f"sampled frequency {frequency:.3f}, last rewards {np.mean(rewards[-5:]):.3f}, greedy {most_likely:.3f}")
    assert np.mean(rewards[-5:]) - 0.05 < frequency <= most_likely
    again = train.propose(policy, graphs * 8, greedy=False, seed=1)
    assert all((a == b).all() for a, b in zip(sampled, again))


def test_imitation_learns_the_heuristic_and_reinforce_starts_from_it(splits, cloned):
    """Behaviour cloning on the runtime imitation targets (the list schedule where it fits the memory limit,
    uniform elsewhere) of the training graphs: the greedy policy reproduces the target actions (measured with
    15 node features: 99.9% after 800 iterations, mean log-likelihood -1.82 -> -0.007; after 400 it was still
    on a plateau, 89.5% and -0.24, where training seeds 1 and 2 had converged; with 14 features 100% after 400,
    -2.25 -> -0.004, from a full-scale policy head; from the 0.01-scaled head of REINFORCE's initialization it
    was 73% and -2.22 -> -0.53).
    REINFORCE started from those weights with a constant reward (every sample of a graph equal: zero
    advantage) leaves the policy's proposals as they were; from a fresh start they differ."""
    policy, targets = cloned
    uniform = [(t == features.UNIFORM).all() for t in targets]
    assert any(uniform) and not all(uniform)
    likelihood = [row["reward"] for row in policy.curve]
    greedy = train.propose(policy, splits.train)
    agreement = np.mean([(a == t).mean() for a, t in zip(greedy, targets)])
    print(f"agreement {agreement:.3f}, log-likelihood {likelihood[0]:.3f} -> {likelihood[-1]:.3f}")
    assert likelihood[-1] > likelihood[0] + 1.0 and likelihood[-1] > -0.1
    assert agreement > 0.95

    def constant(point, actions):
        return np.full(len(actions), -1.0, np.float32),

    config = train.Config(iterations=3, batch=16, samples=2, lr=1e-2, sizes=SIZES)
    tuned = train.train(splits.train, config, reward_fn=constant, start=policy.weights)
    assert all((a == b).all() for a, b in zip(train.propose(tuned, splits.train), greedy))
    fresh = train.train(splits.train, config, reward_fn=constant)
    assert not all((a == b).all() for a, b in zip(train.propose(fresh, splits.train), greedy))
