"""REINFORCE learns CartPole-v1 with Monte Carlo and with 8-step returns (small sizes: about 5 s each on the
reference interpreter); the masked discounted returns never cross an episode end."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl
from algorithms.reinforce import discounted_returns, train
from tests.conftest import collect, run


@pytest.mark.parametrize("n_step", [None, 8], ids=["monte-carlo", "8-step"])
def test_reinforce_learns_cartpole(backend, n_step):
    curve = train("CartPole-v1", iterations=20, num_envs=16, steps=100, n_step=n_step, lr=1e-2, seed=0,
                  backend=backend)
    lengths = [row["mean_length"] for row in curve]
    assert [row["iteration"] for row in curve] == list(range(20))
    first, last = np.mean(lengths[:5]), np.mean(lengths[-5:])
    assert last > 80 and last > first + 25, f"no clear improvement: {np.round(lengths, 1)}"


@pytest.mark.parametrize("n_step", [None, 3])
def test_discounted_returns_stop_at_episode_ends(backend, n_step):
    gamma, steps = 0.5, 7
    rewards = np.arange(1, steps * 2 + 1, dtype=np.float32).reshape(steps, 2)
    ends = np.zeros((steps, 2), dtype=bool)
    ends[2, 0] = ends[5, 0] = ends[4, 1] = True
    ctx = trl.Context("t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    with ctx:
        r = trl.source(lambda p: rewards[p["t"]], shape=(2,), domain=(t,))
        d = trl.source(lambda p: ends[p["t"]], shape=(2,), dtype="bool", domain=(t,))
        end = T if n_step is None else trl.min(t + n_step, T)
        collect(discounted_returns(r[t:end], d[t:end], gamma))
    (got,) = run(ctx, {T: steps}, backend)
    for step in range(steps):
        for k in range(2):
            expected, discount = 0.0, 1.0
            stop = steps if n_step is None else min(step + n_step, steps)
            for later in range(step, stop):
                expected += discount * rewards[later, k]
                discount *= gamma
                if ends[later, k]:
                    break
            np.testing.assert_allclose(got[(step,)][k], expected, rtol=1e-6, err_msg=f"t={step}, env {k}")
