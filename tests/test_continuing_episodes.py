"""Episodes across iterations (SPEC, "Networks, distributions, environments"): a program that resets once and
starts iteration ``i + 1`` from the observation iteration ``i`` ended on steps its environments exactly as a
gymnasium loop that never resets between updates; episode statistics count spanning episodes whole."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from conftest import collect, run

import timerl as trl

NUM_ENVS, ITERATIONS, STEPS, SEED = 3, 4, 9, 5
LIMIT = 13  # a short time limit: truncations land inside iterations and episodes span their boundaries


def _actions(i: int, t: int) -> np.ndarray:
    return np.array([(3 * i + t * (k + 1) + k) % 2 for k in range(NUM_ENVS)], dtype=np.int64)


def _continuing_program(simulator: str):
    ctx = trl.Context("i t")
    (i, t), (I, T) = ctx.dims, ctx.bounds
    env = trl.rl.make_env("CartPole-v1", num_envs=NUM_ENVS, seed=SEED, simulator=simulator,
                          max_episode_steps=LIMIT)
    with ctx:
        observed = trl.placeholder((NUM_ENVS, 4), domain=(i, t))
        observed[0, 0] = env.reset()
        action = trl.source(lambda p: _actions(p["i"], p["t"]), (NUM_ENVS,), "int64", (i, t))
        next_o, r, done = env.step(action)
        observed[i + 1, 0] = next_o[i, T - 1]
        observed[i, t + 1] = next_o
        stores = [collect(x) for x in (observed, r, done)]
        if simulator == "rt":
            stores.append(collect(env.state))
    return ctx, (I, T), env, stores


def _flat(store: dict) -> list[np.ndarray]:
    return [store[(i, t)] for i in range(ITERATIONS) for t in range(STEPS)]


def test_gymnasium_episodes_continue_across_iterations(backend):
    ctx, (I, T), env, (observed, rewards, ends) = _continuing_program("gymnasium")
    run(ctx, {I: ITERATIONS, T: STEPS}, backend)
    vector = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1", max_episode_steps=LIMIT)] * NUM_ENVS,
                                            autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)
    obs, _ = vector.reset(seed=SEED)
    lengths, returns, running = [], [], np.zeros(NUM_ENVS, dtype=np.int64)
    for step, (o, r, d) in enumerate(zip(_flat(observed), _flat(rewards), _flat(ends))):
        np.testing.assert_array_equal(o, obs, err_msg=f"step {step}")
        obs, reward, terminated, truncated, _ = vector.step(_actions(*divmod(step, STEPS)))
        np.testing.assert_array_equal(r, reward.astype(np.float32))
        np.testing.assert_array_equal(d, terminated | truncated)
        running += 1
        for k in np.flatnonzero(terminated | truncated):
            lengths.append(int(running[k]))
            running[k] = 0
    assert any(length > STEPS for length in lengths)  # some episodes did span iterations
    assert sorted(e.length for e in env.episodes) == sorted(lengths)
    assert sorted(e.total_return for e in env.episodes) == sorted(float(n) for n in lengths)  # CartPole: 1 a step

    counted = trl.rl.RunningEpisodes(NUM_ENVS)
    per_block = [counted(np.stack([rewards[(i, t)] for t in range(STEPS)]),
                         np.stack([ends[(i, t)] for t in range(STEPS)])) for i in range(ITERATIONS)]
    assert sorted(np.concatenate([n for n, _ in per_block]).tolist()) == sorted(lengths)
    assert sorted(np.concatenate([g for _, g in per_block]).tolist()) == sorted(float(n) for n in lengths)


@pytest.mark.parametrize("backend", ["reference", "torch", "jax"])
def test_rt_cartpole_continues_across_iterations(backend):
    """The RT simulator, replayed in gymnasium from its own first state (its reset draws are the program's):
    one gymnasium episode stream per environment, never reset at an iteration boundary."""
    ctx, (I, T), _, (observed, rewards, ends, states) = _continuing_program("rt")
    run(ctx, {I: ITERATIONS, T: STEPS}, backend)
    flat_states, flat_ends = _flat(states), _flat(ends)
    spanning = 0
    for k in range(NUM_ENVS):
        env = gymnasium.make("CartPole-v1", max_episode_steps=LIMIT)
        env.reset(seed=k)
        env.unwrapped.state = flat_states[0][k].copy()
        start = 0  # the step the current episode started at
        for step, (reward, end) in enumerate(zip(_flat(rewards), flat_ends)):
            _, g_reward, terminated, truncated, _ = env.step(int(_actions(*divmod(step, STEPS))[k]))
            assert end[k] == (terminated or truncated) and reward[k] == np.float32(g_reward), (k, step)
            if step + 1 == len(flat_ends):
                break
            following = flat_states[step + 1][k]
            if terminated or truncated:
                spanning += start // STEPS != step // STEPS  # begun in an earlier iteration
                start = step + 1
                env.reset()
                env.unwrapped.state = following.copy()
            else:
                np.testing.assert_allclose(following, env.unwrapped.state, rtol=1e-9, atol=1e-10)
    assert spanning


def test_step_needs_time_last():
    ctx = trl.Context("i j t")
    i, j, t = ctx.dims
    env = trl.rl.make_env("CartPole-v1", num_envs=2)
    with ctx:
        env.reset()
        with pytest.raises(trl.TimeRLError, match="iteration and a time dimension"):
            env.step(trl.zeros((2,), "int64", domain=(i, j, t)))
