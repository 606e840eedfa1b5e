"""A short REINFORCE run: the trained policy's proposals against uniform BRKGA on held-out graphs."""

import numpy as np
import pytest

from algorithms.regal import brkga, data, features, train
from algorithms.regal.policy import Sizes


@pytest.fixture(scope="module")
def trained():
    splits = data.splits(train=16, valid=0, test=6, variants=1, ops=(10, 16), seed=3)
    config = train.Config(kind="peak_memory", iterations=40, batch=16, train_budget=100, lr=2e-2,
                          sizes=Sizes(hidden=16, edge_hidden=8, rounds=2), seed=0)
    return train.train(splits.train, config), splits.test


def test_training_records_a_curve_and_weights(trained):
    policy, _ = trained
    assert len(policy.curve) == 40 and policy.weights.shape == (policy.layout.size,)
    assert all(np.isfinite(row["reward"]) and row["reward"] < 0 for row in policy.curve)


def test_trained_proposals_beat_uniform_brkga_on_held_out_graphs(trained):
    policy, held_out = trained
    actions = train.propose(policy, held_out)
    uniform, regal = [], []
    for graph, action in zip(held_out, actions):
        proposal = features.proposal(graph, action)
        for seed in range(3):
            uniform.append(brkga.optimize(graph, "peak_memory", 100, seed=seed).best_cost)
            regal.append(brkga.optimize(graph, "peak_memory", 100, proposal, seed=seed).best_cost)
    improvement = (np.array(uniform) - np.array(regal)) / np.array(uniform)
    print(f"held-out improvement {improvement.mean():+.4f}, matches or beats {np.mean(improvement >= 0):.2f}")
    assert improvement.mean() > 0
