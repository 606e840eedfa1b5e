"""The hand-fused `lax.scan` PPO (`benchmarks/jax_scan_ppo.py`), the baseline of timerl's RT-CartPole PPO on jax:
its orthogonal initialization is orthogonal, and it learns CartPole like `algorithms/ppo.py` does."""

from __future__ import annotations

import numpy as np

from benchmarks.jax_scan_ppo import _orthogonal, train_scan


def test_initialization_is_orthogonal_and_scaled():
    rng = np.random.default_rng(0)
    for n_in, n_out in ((4, 64), (64, 64), (64, 2)):
        weight = np.asarray(_orthogonal(rng, n_in, n_out, 2.0), np.float64)
        small = min(n_in, n_out)
        gram = weight.T @ weight if n_in >= n_out else weight @ weight.T
        np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=1e-5)


def test_scan_ppo_learns_cartpole():
    curve: list[float] = []
    train_scan(iterations=16, num_envs=16, steps=100, epochs=4, minibatches=4, lr=2.5e-3, curve=curve)
    assert len(curve) == 16
    first, last = np.mean(curve[:3]), np.mean(curve[-3:])
    assert last > 1.5 * first, (first, last)
