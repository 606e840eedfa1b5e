"""TD3 (`algorithms/td3.py`): the compiled backends take the reference interpreter's every decision on a tiny
run (short episodes, so that returns reflect the actions learned), and the torch program improves on
Pendulum's random returns within a short run."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms import td3

TINY = dict(iterations=2, num_envs=2, steps=10, capacity=12, batch_size=6, learning_starts=4, hidden=(8, 8), lr=1e-2,
            env_options={"max_episode_steps": 3})


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_td3_matches_reference(backend):
    want = td3.train(backend="reference", env_name="Pendulum-v1", **TINY)
    got = td3.train(backend=backend, env_name="Pendulum-v1", **TINY)
    assert [row["episodes"] for row in got] == [row["episodes"] for row in want]
    np.testing.assert_allclose([row["mean_return"] for row in got], [row["mean_return"] for row in want], rtol=1e-5)
    assert sum(row["episodes"] for row in want) == 2 * (20 // 3)


def test_td3_learns_pendulum():
    curve = td3.train(iterations=4, num_envs=1, steps=600, capacity=10_000, batch_size=64, learning_starts=300,
                      hidden=(64, 64), lr=3e-3, policy_frequency=1, tau=0.01, backend="torch")
    returns = [row["mean_return"] for row in curve]
    assert returns[-1] > -900 and returns[-1] > returns[0] + 400, returns  # random actions: about -1,300
