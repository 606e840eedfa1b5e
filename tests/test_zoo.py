"""The algorithm zoo (`benchmarks/zoo`): every module follows the protocol; each timerl algorithm agrees with the
reference interpreter on a tiny size and learns in a few seconds; the eager twins learn too."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from algorithms import a2c, ppo, recurrent_a2c, td_lambda
from benchmarks import zoo
from benchmarks.zoo.a2c_gae import train_eager


def test_every_module_follows_the_protocol():
    modules = zoo.modules()
    assert {"a2c_gae", "a2c_nstep", "ppo_pendulum", "recurrent_a2c", "reinforce", "td_lambda"} <= set(modules)
    for module in modules.values():
        assert module.SIZES and all(len(size) == 2 for size in module.SIZES)
        assert module.SIZES == sorted(module.SIZES, key=lambda size: size[0] * size[1])


def _curve(train, **kwargs):
    return [(row["episodes"], row["mean_return"]) for row in train(**kwargs)]


@pytest.mark.parametrize("backend, n_step", [("torch", None), ("jax", 3)])
def test_a2c_matches_the_reference(backend, n_step):
    sizes = dict(iterations=2, num_envs=2, steps=12, n_step=n_step, seed=3, hidden=8, lr=0.05)
    assert _curve(a2c.train, backend=backend, **sizes) == _curve(a2c.train, backend="reference", **sizes)


@pytest.mark.parametrize("n_step", [None, 5])
def test_a2c_and_its_eager_twin_learn(n_step):
    torch.set_num_threads(1)
    returns = [row["mean_return"] for row in a2c.train(iterations=20, num_envs=8, steps=64, n_step=n_step,
                                                      lr=5e-3, backend="torch", seed=0)]
    assert np.mean(returns[-5:]) > 1.5 * np.mean(returns[:3]), returns
    eager = train_eager(8, 64, 20, seed=1, n_step=n_step, lr=5e-3)["returns"]
    assert np.mean(eager[-5:]) > 1.5 * np.mean(eager[:3]), eager


def test_recurrent_a2c_matches_the_reference():
    sizes = dict(iterations=2, num_envs=2, steps=10, hidden=4, lr=0.05, seed=1)
    assert _curve(recurrent_a2c.train, backend="torch", **sizes) == _curve(recurrent_a2c.train, backend="reference",
                                                                           **sizes)


def test_recurrent_a2c_learns():
    torch.set_num_threads(1)
    returns = [row["mean_return"] for row in recurrent_a2c.train(iterations=30, num_envs=8, steps=128, lr=3e-3,
                                                                 backend="torch", seed=0)]
    assert np.mean(returns[-5:]) > 1.25 * np.mean(returns[:3]), returns


def test_td_lambda_matches_the_reference():
    sizes = dict(iterations=2, num_envs=2, steps=10, seed=2)
    ours = [row["value_error"] for row in td_lambda.train(backend="torch", **sizes)]
    reference = [row["value_error"] for row in td_lambda.train(backend="reference", **sizes)]
    np.testing.assert_allclose(ours, reference, rtol=1e-4)


def test_td_lambda_learns_the_values():
    errors = [row["value_error"] for row in td_lambda.train(iterations=12, num_envs=8, steps=128, seed=0)]
    assert np.mean(errors[-4:]) < 0.75 * errors[0], errors


def test_ppo_pendulum_matches_the_reference():
    sizes = dict(iterations=2, num_envs=2, steps=8, epochs=2, minibatches=2, hidden=8, seed=0, reward_scale=0.1)
    ours = ppo.train("Pendulum-v1", backend="torch", **sizes)
    reference = ppo.train("Pendulum-v1", backend="reference", **sizes)
    for mine, theirs in zip(ours, reference):
        assert mine["mean_return"] == pytest.approx(theirs["mean_return"], rel=1e-4)
        assert mine["value_loss"] == pytest.approx(theirs["value_loss"], rel=1e-3)


PROGRAMS = {
    "a2c_gae": lambda **k: a2c.train(**k),
    "a2c_nstep": lambda **k: a2c.train(n_step=3, **k),
    "recurrent_a2c": lambda **k: recurrent_a2c.train(hidden=4, **k),
    "td_lambda": lambda **k: td_lambda.train(**k),
    "ppo_pendulum": lambda **k: ppo.train("Pendulum-v1", epochs=1, minibatches=2, hidden=8, **k),
}


@pytest.mark.parametrize("name, backend", [(name, "torch") for name in PROGRAMS if name != "a2c_gae"]
                         + [("recurrent_a2c", "jax")])
def test_no_zoo_statement_runs_point_by_point_outside_a_recurrence(name, backend):
    stats: dict = {}
    PROGRAMS[name](iterations=1, num_envs=2, steps=4, backend=backend, stats=stats)
    for line in stats["executable"].explain().splitlines():
        if "point by point" in line:
            assert "recurrence" in line and "not part of its recurrence" not in line, line
