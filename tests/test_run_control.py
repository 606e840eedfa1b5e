"""Run control and checkpoints: a program run in parts, stopped by a sink, or resumed from a checkpoint in a
new compile computes what one uninterrupted run computes, bit for bit (torch and jax); trained weights load
into another program."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl

ITERATIONS, STEPS, ENVS = 6, 5, 3


def _program(stop_at: int | None = None):
    """A policy-gradient learner on the RT CartPole, whose episodes continue across iterations: parameters,
    Adam's moments, the environment's state and random draws all carry from one iteration to the next."""
    ctx = trl.Context("i t")
    (i, t), (I, T) = ctx.dims, ctx.bounds
    env = trl.rl.make_env("CartPole-v1", num_envs=ENVS, simulator="rt", max_episode_steps=7)
    seen: dict = {"weights": {}, "bias": {}, "rewards": {}}
    with ctx:
        policy = trl.nn.Linear(4, 2, domain=(i,))
        observed = trl.placeholder((ENVS, 4), domain=(i, t))
        observed[0, 0] = env.reset()
        pi = trl.distributions.Categorical(logits=policy(observed))
        action = pi.sample()
        next_o, r, done = env.step(action)
        observed[i, t + 1] = next_o
        observed[i + 1, 0] = next_o[i, T - 1]
        loss = -(pi.log_prob(action) * r[i, t:T].sum(0).detach()).mean() / T
        loss.backward()
        trl.optim.Adam(policy.parameters(), lr=0.05).step()
        policy.weight.sink(lambda p, w: seen["weights"].__setitem__(p["i"], w))
        policy.bias.sink(lambda p, b: seen["bias"].__setitem__(p["i"], b))
        r[i, 0:T].sink(lambda p, v: seen["rewards"].__setitem__(p["i"], v))
        if stop_at is not None:
            def stop(point, value):
                if point["i"] == stop_at:
                    raise trl.Stop

            r[i, T - 1].sink(stop)
    return ctx, {I: ITERATIONS, T: STEPS}, seen


def _same(a: dict, b: dict) -> None:
    assert sorted(a["weights"]) == sorted(b["weights"]) == list(range(ITERATIONS))
    for key in ("weights", "bias", "rewards"):
        for k in a[key]:
            np.testing.assert_array_equal(a[key][k], b[key][k], err_msg=f"{key} at i={k}")


@pytest.fixture(params=["torch", "jax"])
def whole(request):
    ctx, bounds, seen = _program()
    ctx.compile(bounds=bounds, backend=request.param, seed=3).execute()
    return request.param, seen


def test_parts_and_stop_equal_one_run(whole):
    backend, expected = whole
    ctx, bounds, seen = _program(stop_at=1)
    exe = ctx.compile(bounds=bounds, backend=backend, seed=3)
    exe.execute()  # the sink stops the run after iteration 1
    assert exe.stopped and exe.iteration == 2 and not exe.finished and sorted(seen["weights"]) == [0, 1]
    exe.execute(iterations=2, resume=True)
    assert exe.iteration == 4 and not exe.stopped
    exe.execute(resume=True)
    assert exe.finished
    _same(seen, expected)
    with pytest.raises(trl.TimeRLError, match="complete"):
        exe.execute(resume=True)


def test_checkpoint_resumes_in_a_new_compile(whole, tmp_path):
    backend, expected = whole
    path = str(tmp_path / "run.npz")
    ctx, bounds, first = _program()
    exe = ctx.compile(bounds=bounds, backend=backend, seed=3)
    exe.execute(iterations=ITERATIONS // 2)
    exe.save(path)
    ctx, bounds, second = _program()
    resumed = ctx.compile(bounds=bounds, backend=backend, seed=3)
    resumed.load(path)
    resumed.execute(resume=True)
    assert resumed.finished
    _same({key: {**first[key], **second[key]} for key in first}, expected)
    ctx, bounds, _ = _program()
    with pytest.raises(trl.TimeRLError, match="seed"):
        ctx.compile(bounds=bounds, backend=backend, seed=4).load(path)


def test_parts_are_refused_where_they_cannot_run():
    ctx = trl.Context("t")
    with ctx:
        trl.zeros((2,), domain=ctx.dims).sink(lambda p, v: None)
    with pytest.raises(trl.TimeRLError, match="reference"):
        ctx.compile(bounds={ctx.bounds[0]: 3}, backend="reference").execute(iterations=1)


def test_trained_weights_load_into_an_evaluation_program(whole):
    backend, trained = whole
    weights = [trained["weights"][ITERATIONS - 1], trained["bias"][ITERATIONS - 1]]  # the last iteration's
    observations = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    evaluation = trl.Context("t")
    logits: dict = {}
    with evaluation:
        policy = trl.nn.Linear(4, 2, domain=())
        policy.load_parameters(weights)
        o = trl.source(lambda p: observations[p["t"]], (4,), "float32", evaluation.dims)
        policy(o).sink(lambda p, v: logits.__setitem__(p["t"], v))
        with pytest.raises(trl.ShapeError, match="shape"):
            trl.nn.Linear(4, 3, domain=()).load_parameters(weights)
    evaluation.compile(bounds={evaluation.bounds[0]: 5}, backend=backend).execute()
    np.testing.assert_allclose(np.stack([logits[k] for k in range(5)]), observations @ weights[0].T + weights[1],
                               rtol=1e-5, atol=1e-6)
