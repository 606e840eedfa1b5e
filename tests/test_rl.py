"""`trl.rl.make_env`: the RT environment agrees with plain gymnasium, restarts episodes by itself, is stepped
in order, and rejects bad actions naming the user's line."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import timerl as trl
from tests.conftest import collect, run

NUM_ENVS = 4


def plain_gymnasium(name: str, actions: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """The same rollout written against gymnasium directly: a fresh reset per iteration (seeded only the
    first time), and an ended episode restarted within the same step."""
    iterations, steps, num_envs = actions.shape[:3]
    envs = [gymnasium.make(name) for _ in range(num_envs)]
    out = {key: [] for key in ("first", "obs", "reward", "ended")}
    for i in range(iterations):
        out["first"].append([env.reset(seed=seed + k if i == 0 else None)[0] for k, env in enumerate(envs)])
        for t in range(steps):
            step = {key: [] for key in ("obs", "reward", "ended")}
            for k, env in enumerate(envs):
                obs, reward, terminated, truncated, _ = env.step(actions[i, t, k])
                if terminated or truncated:
                    obs, _ = env.reset()
                step["obs"].append(obs)
                step["reward"].append(reward)
                step["ended"].append(terminated or truncated)
            for key, value in step.items():
                out[key].append(value)
    shape = (iterations, steps, num_envs)
    return {"first": np.asarray(out["first"]), "obs": np.asarray(out["obs"]).reshape(shape + (-1,)),
            "reward": np.asarray(out["reward"]).reshape(shape), "ended": np.asarray(out["ended"]).reshape(shape)}


def rollout(name: str, actions: np.ndarray, seed: int):
    iterations, steps = actions.shape[:2]
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    env = trl.rl.make_env(name, num_envs=NUM_ENVS, seed=seed)
    dtype = "int64" if env.discrete else "float32"
    with ctx:
        o = trl.placeholder((NUM_ENVS, *env.observation_shape), domain=(i, t))
        o[i, 0] = env.reset(domain=(i,))
        a = trl.source(lambda p: actions[p["i"], p["t"]], shape=actions.shape[2:], dtype=dtype, domain=(i, t))
        o[i, t + 1], r, terminated = env.step(a)
        stores = [collect(x) for x in (o, r, terminated)]
    return ctx, env, {I: iterations, T: steps}, stores


def test_cartpole_matches_gymnasium_with_restarts(backend):
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, size=(2, 40, NUM_ENVS))
    ctx, env, bounds, _ = rollout("CartPole-v1", actions, seed=7)
    assert env.observation_shape == (4,) and env.num_actions == 2
    obs, reward, ended = run(ctx, bounds, backend)
    want = plain_gymnasium("CartPole-v1", actions, seed=7)
    assert want["ended"][:, :-1].any(), "the rollout should contain an automatic restart inside an iteration"
    for i in range(2):
        np.testing.assert_allclose(obs[(i, 0)], want["first"][i], rtol=1e-6)
        for step in range(40):
            np.testing.assert_array_equal(ended[(i, step)], want["ended"][i, step])
            np.testing.assert_allclose(reward[(i, step)], want["reward"][i, step])
            if step + 1 < 40:  # o[i, t + 1]: after an end, the new episode's first observation
                np.testing.assert_allclose(obs[(i, step + 1)], want["obs"][i, step], rtol=1e-6)
    lengths = [e.length for e in env.episodes]
    assert len(lengths) == int(want["ended"].sum()) and all(n >= 1 for n in lengths)


def test_pendulum_continuous_step(backend):
    rng = np.random.default_rng(1)
    actions = rng.uniform(-2, 2, size=(1, 12, NUM_ENVS, 1)).astype(np.float32)
    ctx, env, bounds, _ = rollout("Pendulum-v1", actions, seed=3)
    assert env.observation_shape == (3,) and env.action_shape == (1,) and env.num_actions is None
    obs, reward, ended = run(ctx, bounds, backend)
    want = plain_gymnasium("Pendulum-v1", actions, seed=3)
    for step in range(12):
        np.testing.assert_allclose(reward[(0, step)], want["reward"][0, step], rtol=1e-5)
        assert reward[(0, step)].dtype == np.float32 and ended[(0, step)].dtype == bool
    np.testing.assert_allclose(obs[(0, 11)], want["obs"][0, 10], rtol=1e-5)


@pytest.mark.parametrize("backend_name", ["reference", "torch"])
def test_resets_and_steps_run_in_order(backend_name):
    """Order tokens: reset(i) after the last step of i - 1, step(t) after step(t - 1), even when nothing
    else (here: constant actions) links them; and every step runs, read or not (an environment is a side
    effect), the last one of the last iteration included."""
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    env = trl.rl.make_env("CartPole-v1", num_envs=2, seed=0)
    calls = []
    take, reset = env._take, env._reset
    env._take = lambda point, *args: (calls.append(("step", point["i"], point["t"])), take(point, *args))[1]
    env._reset = lambda point, *args: (calls.append(("reset", point["i"])), reset(point, *args))[1]
    with ctx:
        first = env.reset(domain=(i,))
        _, r, _ = env.step(trl.zeros((2,), dtype="int64", domain=(t,)))
        first.sink(lambda p, v: None)
        r[i, 0].sink(lambda p, v: None)  # demands only t = 0 directly
    ctx.compile({I: 3, T: 4}, backend=backend_name).execute()
    expected = []
    for iteration in range(3):  # every step of iteration i runs before reset(i + 1)
        expected += [("reset", iteration)] + [("step", iteration, step) for step in range(4)]
    assert calls == expected


def bad_action_program(value, dtype):
    ctx = trl.Context("t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    env = trl.rl.make_env("CartPole-v1", num_envs=2, seed=0)
    with ctx:
        env.reset()
        action = trl.source(lambda p: value, shape=(2,), dtype=dtype, domain=(t,))
        _, r, _ = env.step(action)
        r.sink(lambda p, v: None)
    return ctx.compile({T: 2}, backend="reference"), action.node.location


def created_here(location: str) -> bool:
    return location.startswith(f"{__file__}:")


@pytest.mark.parametrize("value, message", [([0, 2], "actions are in [0, 2)"), ([-1, 0], "actions are in")])
def test_out_of_range_discrete_action_names_the_users_line(value, message):
    exe, line = bad_action_program(value, "int64")
    with pytest.raises(trl.rl.ActionError, match=r"actions are in") as error:
        exe.execute()
    assert created_here(line) and line in str(error.value) and message in str(error.value)
    assert isinstance(error.value, trl.TimeRLError)


def test_nan_continuous_action_names_the_users_line():
    ctx = trl.Context("t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    env = trl.rl.make_env("Pendulum-v1", num_envs=2, seed=0)
    with ctx:
        env.reset()
        action = trl.source(lambda p: [[0.5], [np.nan]], shape=(2, 1), domain=(t,))
        _, r, _ = env.step(action)
        r.sink(lambda p, v: None)
    with pytest.raises(trl.rl.ActionError, match="not finite") as error:
        ctx.compile({T: 2}, backend="reference").execute()
    line = action.node.location
    assert created_here(line) and line in str(error.value) and "environment 1" in str(error.value)


@pytest.mark.parametrize("shape, dtype, message", [((3,), "int64", "has shape (3,)"),
                                                    ((2,), "float32", "has dtype float32")])
def test_wrong_action_type_is_a_shape_error_at_definition(shape, dtype, message):
    ctx = trl.Context("t")
    (t,) = ctx.dims
    env = trl.rl.make_env("CartPole-v1", num_envs=2, seed=0)
    with ctx:
        env.reset()
        action = trl.zeros(shape, dtype=dtype, domain=(t,))
        with pytest.raises(trl.ShapeError) as error:
            env.step(action)
    line = action.node.location
    assert created_here(line) and message in str(error.value) and line in str(error.value)


def test_step_before_reset_and_action_domain_are_checked():
    ctx = trl.Context("i t")
    i, t = ctx.dims
    env = trl.rl.make_env("CartPole-v1", num_envs=2, seed=0)
    with ctx:
        action = trl.zeros((2,), dtype="int64", domain=(i, t))
        with pytest.raises(trl.TimeRLError, match="before env.step"):
            env.step(action)
        env.reset(domain=(t,))
        with pytest.raises(trl.TimeRLError, match="one later time dimension"):
            env.step(action)


def test_episode_statistics():
    ends = np.array([[0, 0], [1, 0], [0, 0], [1, 1], [0, 0]], dtype=bool)
    rewards = np.arange(10, dtype=np.float32).reshape(5, 2)
    lengths, returns = trl.rl.episode_statistics(rewards, ends)
    np.testing.assert_array_equal(lengths, [2, 2, 4])
    np.testing.assert_allclose(returns, [0 + 2, 4 + 6, 1 + 3 + 5 + 7])
