"""DQN (`algorithms/dqn.py`): the compiled backends take the reference interpreter's every decision on a tiny
run, and the torch program learns CartPole in 1,200 steps of 4 environments."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms import dqn

TINY = dict(iterations=2, num_envs=2, steps=12, capacity=16, batch_size=8, target_frequency=5, train_frequency=2,
            learning_starts=4, hidden=(8, 8), lr=1e-2, exploration_fraction=0.2)


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_dqn_matches_reference(backend):
    want = dqn.train(backend="reference", **TINY)
    got = dqn.train(backend=backend, **TINY)
    assert [row["episodes"] for row in got] == [row["episodes"] for row in want]
    np.testing.assert_allclose([row["mean_return"] for row in got], [row["mean_return"] for row in want])
    assert sum(row["episodes"] for row in want) > 0


def test_dqn_learns_cartpole():
    curve = dqn.train(iterations=6, num_envs=4, steps=200, learning_starts=100, target_frequency=50, hidden=(64, 64),
                      batch_size=64, lr=2e-3, exploration_fraction=0.4, backend="torch")
    returns = [row["mean_return"] for row in curve]
    # a random policy: about 22; DQN's curve is noisy from one iteration to the next
    assert max(returns[-2:]) > 60 and max(returns[-2:]) > 2.5 * returns[0], returns
