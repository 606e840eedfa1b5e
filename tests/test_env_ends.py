"""Episode ends as off-policy learners need them: every environment step runs, the last one of a run
included, so episode statistics match a plain gymnasium loop; ``env.step(action, truncation=True)`` keeps
``terminated`` apart from ``truncated`` and gives the final observation, so a time-limit end bootstraps."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import timerl as trl
from tests.conftest import collect, run

NUM_ENVS = 3
GAMMA = 0.9
VALUE_WEIGHTS = np.array([0.5, -1.0, 0.25], np.float32)  # a fixed value function of Pendulum's observation


def gymnasium_loop(name: str, actions: np.ndarray, seed: int, **kwargs) -> dict[str, list]:
    """The same actions in plain gymnasium environments, reset once (seeded) and after every end."""
    envs = [gymnasium.make(name, **kwargs) for _ in range(actions.shape[1])]
    for k, env in enumerate(envs):
        env.reset(seed=seed + k)
    out = {key: [] for key in ("reward", "terminated", "truncated", "final", "episodes")}
    lengths, returns = np.zeros(len(envs), int), np.zeros(len(envs))
    for step in actions:
        row = {key: [] for key in ("reward", "terminated", "truncated", "final")}
        for k, env in enumerate(envs):
            obs, reward, terminated, truncated, _ = env.step(step[k])
            lengths[k] += 1
            returns[k] += reward
            for key, value in zip(("reward", "terminated", "truncated", "final"), (reward, terminated, truncated, obs)):
                row[key].append(value)
            if terminated or truncated:
                out["episodes"].append((k, int(lengths[k]), float(returns[k])))
                lengths[k], returns[k] = 0, 0.0
                env.reset()
        for key, value in row.items():
            out[key].append(np.asarray(value))
    return out


def test_every_step_runs_and_episodes_match_gymnasium(compiled_backend):
    """Nothing reads the observations; the environment still takes all T steps, and the episode that ends
    at the very last one is counted."""
    actions = np.random.default_rng(0).integers(0, 2, size=(80, NUM_ENVS))
    full = gymnasium_loop("CartPole-v1", actions, seed=5)
    ends = np.flatnonzero(np.any(full["terminated"], axis=1))
    steps = int(ends[-1]) + 1  # the run stops right at an episode end
    actions = actions[:steps]
    want = sorted(gymnasium_loop("CartPole-v1", actions, seed=5)["episodes"])
    ctx = trl.Context("t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    env = trl.rl.make_env("CartPole-v1", num_envs=NUM_ENVS, seed=5)
    with ctx:
        env.reset()
        a = trl.source(lambda p: actions[p["t"]], shape=(NUM_ENVS,), dtype="int64", domain=(t,))
        _, r, _ = env.step(a)
        r[0].sink(lambda p, v: None)
    for backend in ("reference", compiled_backend):
        env.episodes.clear()
        run(ctx, {T: steps}, backend)
        assert sorted((e.env, e.length, e.total_return) for e in env.episodes) == want
        assert max(e.point["t"] for e in env.episodes) == steps - 1


def bootstrap_program(simulator: str, actions: np.ndarray, max_steps: int):
    """One-step TD targets ``r + gamma * (1 - terminated) * V(final_obs)`` with a fixed linear ``V``; for the
    RT simulator, its float64 state too."""
    ctx = trl.Context("t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    env = trl.rl.make_env("Pendulum-v1", num_envs=NUM_ENVS, seed=11, simulator=simulator,
                          max_episode_steps=max_steps)
    with ctx:
        o = trl.placeholder((NUM_ENVS, 3), domain=(t,))
        o[0] = env.reset()
        a = trl.source(lambda p: actions[p["t"]], shape=(NUM_ENVS, 1), dtype="float32", domain=(t,))
        o[t + 1], r, terminated, truncated, final_obs = env.step(a, truncation=True)
        value = (final_obs * trl.tensor(VALUE_WEIGHTS)).sum(-1)
        target = r + GAMMA * (1.0 - terminated.astype("float32")) * value
        stores = [collect(x) for x in (target, terminated, truncated, final_obs, o)]
        if simulator == "rt":
            stores.append(collect(env.state))
    return ctx, {T: len(actions)}, stores


def test_truncation_bootstraps_from_the_final_observation(compiled_backend):
    steps, max_steps = 17, 5
    actions = np.random.default_rng(1).uniform(-2, 2, size=(steps, NUM_ENVS, 1)).astype(np.float32)
    want = gymnasium_loop("Pendulum-v1", actions, seed=11, max_episode_steps=max_steps)
    for backend in ("reference", compiled_backend):
        ctx, bounds, _ = bootstrap_program("gymnasium", actions, max_steps)
        target, terminated, truncated, final_obs, obs = run(ctx, bounds, backend)
        for step in range(steps):
            expected = want["reward"][step] + GAMMA * (1.0 - want["terminated"][step]) * (
                want["final"][step] @ VALUE_WEIGHTS)
            np.testing.assert_allclose(target[(step,)], expected, rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(truncated[(step,)], want["truncated"][step])
            np.testing.assert_array_equal(terminated[(step,)], want["terminated"][step])
            np.testing.assert_allclose(final_obs[(step,)], want["final"][step], rtol=1e-6)
        assert np.asarray(want["truncated"]).sum() == NUM_ENVS * (steps // max_steps)
        # after a time-limit end the next observation is a fresh episode's, not the final one
        end = max_steps - 1
        assert not np.allclose(obs[(end + 1,)], final_obs[(end,)])


def test_rt_simulator_splits_ends_like_gymnasium(compiled_backend):
    """The RT Pendulum: truncated exactly at the time limit, never terminated, and the final observation is
    gymnasium's step from the same state under the same action."""
    steps, max_steps = 12, 4
    actions = np.random.default_rng(2).uniform(-2, 2, size=(steps, NUM_ENVS, 1)).astype(np.float32)
    ctx, bounds, _ = bootstrap_program("rt", actions, max_steps)
    reference = run(ctx, bounds, "reference")
    compiled = run(ctx, bounds, compiled_backend)
    for got, want in zip(compiled, reference):
        for key in want:
            np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-5)
    _, terminated, truncated, final_obs, _, state = reference
    gym = gymnasium.make("Pendulum-v1").unwrapped
    gym.reset(seed=0)
    for step in range(steps):
        assert not terminated[(step,)].any()
        np.testing.assert_array_equal(truncated[(step,)], np.full(NUM_ENVS, (step + 1) % max_steps == 0))
        for k in range(NUM_ENVS):
            gym.state = state[(step,)][k].copy()
            reached = gym.step(actions[step, k])[0]
            np.testing.assert_allclose(final_obs[(step,)][k], reached, rtol=1e-6, atol=1e-6)
