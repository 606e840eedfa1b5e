"""`make_env(..., simulator="rt")`: CartPole-v1, Pendulum-v1, MountainCar-v0 and Acrobot-v1 written in RT ops
agree with gymnasium step for step. gymnasium replays the actions the RT program took, starting from the RT
environment's own float64 state (its reset draws come from the program's random stream and cannot match
gymnasium's), and is put in the RT state again after every automatic restart; between restarts it runs on
its own."""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import pytest

import timerl as trl
from algorithms.reinforce import train
from tests.conftest import collect, run
from timerl.rt import functional as F

CONTROLLED = np.array([True, True, False, False])  # balanced by a controller / random actions
NUM_ENVS = len(CONTROLLED)


# Actions computed in the program from the observation o: a controller that balances the pole, swings the
# pendulum or rocks the car up the hill (so episodes run into the time limit, or reach the flag), and uniform
# random actions from the noise (so CartPole episodes terminate early).
CONTROLLERS = {
    "CartPole-v1": lambda o: (o.spatial[:, 2] + 0.2 * o.spatial[:, 3] > 0).astype("int64"),
    "Pendulum-v1": lambda o: (o.spatial[:, 2] * 0.5).clip(-2.0, 2.0).unsqueeze(1),
    "MountainCar-v0": lambda o: trl.where(o.spatial[:, 1] > 0, 2, 0),
    "Acrobot-v1": lambda o: trl.where(o.spatial[:, 5] > 0, 2, 0),
}
RANDOM = {
    "CartPole-v1": lambda noise: (noise < 0.5).astype("int64"),
    "Pendulum-v1": lambda noise: (noise * 4.0 - 2.0).unsqueeze(1),
    "MountainCar-v0": lambda noise: (noise * 3.0).astype("int64"),
    "Acrobot-v1": lambda noise: (noise * 3.0).astype("int64"),
}


# gymnasium's uniform reset ranges (low, high) of the float64 state
RESET_RANGE = {"CartPole-v1": (-0.05, 0.05), "Pendulum-v1": (-np.array([math.pi, 1.0]), np.array([math.pi, 1.0])),
               "MountainCar-v0": (np.array([-0.6, 0.0]), np.array([-0.4, 0.0])), "Acrobot-v1": (-0.1, 0.1)}


def rt_rollout(name: str, iterations: int, steps: int, backend: str, **options):
    """Runs the RT environment, the first environments under the controller, the others at random.
    Returns the collected values by name."""
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    env = trl.rl.make_env(name, num_envs=NUM_ENVS, simulator="rt", **options)
    with ctx:
        o = trl.placeholder((NUM_ENVS, *env.observation_shape), domain=(i, t))
        o[i, 0] = env.reset(domain=(i,))
        noise = trl.rand((NUM_ENVS,), domain=(i, t))
        controlled = trl.tensor(CONTROLLED).reshape(NUM_ENVS, *(1 for _ in env.action_shape))
        a = trl.where(controlled, CONTROLLERS[name](o), RANDOM[name](noise))
        o[i, t + 1], r, terminated = env.step(a)
        names = ("obs", "action", "reward", "ended", "state")
        stores = dict(zip(names, (collect(x) for x in (o, a, r, terminated, env.state))))
    run(ctx, {I: iterations, T: steps}, backend)
    return env, stores


def observe(name: str, state: np.ndarray) -> np.ndarray:
    """gymnasium's observation of a float64 state."""
    if name == "Pendulum-v1":
        return np.array([np.cos(state[0]), np.sin(state[0]), state[1]], dtype=np.float32)
    if name == "Acrobot-v1":
        return np.array([np.cos(state[0]), np.sin(state[0]), np.cos(state[1]), np.sin(state[1]), *state[2:]],
                        dtype=np.float32)
    return state.astype(np.float32)


def replay(name: str, rt: dict, iterations: int, steps: int, **options) -> dict[str, int]:
    """Steps gymnasium environments with the RT program's actions and asserts every step agrees; returns
    how many episode ends of each kind the rollout went through."""
    counts = {"terminated": 0, "truncated": 0}
    for k in range(NUM_ENVS):
        env = gymnasium.make(name, **options)
        for i in range(iterations):
            env.reset(seed=k)  # a fresh episode (and time limit) per iteration, as in the RT env
            env.unwrapped.state = rt["state"][(i, 0)][k].copy()
            np.testing.assert_array_equal(rt["obs"][(i, 0)][k], observe(name, rt["state"][(i, 0)][k]))
            for t in range(steps):
                where = f"{name} env {k} at (i={i}, t={t})"
                action = rt["action"][(i, t)][k]
                obs, reward, terminated, truncated, _ = env.step(int(action) if action.ndim == 0 else action)
                assert rt["ended"][(i, t)][k] == (terminated or truncated), where
                np.testing.assert_allclose(rt["reward"][(i, t)][k], np.float32(reward), rtol=1e-6, atol=1e-6,
                                           err_msg=where)
                counts["terminated"] += terminated
                counts["truncated"] += truncated and not terminated
                if t + 1 == steps:
                    continue
                state = rt["state"][(i, t + 1)][k]
                if terminated or truncated:  # the restart's draw is the RT env's own: take it over
                    low, high = RESET_RANGE[name]
                    assert np.all((low <= state) & (state <= high)), where
                    env.reset()
                    env.unwrapped.state = state.copy()
                    np.testing.assert_array_equal(rt["obs"][(i, t + 1)][k], observe(name, state))
                    continue
                np.testing.assert_allclose(state, np.asarray(env.unwrapped.state), rtol=1e-9, atol=1e-10,
                                           err_msg=where)
                np.testing.assert_allclose(rt["obs"][(i, t + 1)][k], obs, rtol=1e-6, atol=1e-7, err_msg=where)
    return counts


def test_sin_cos_remainder_match_numpy(backend):
    """The ops the dynamics add, in float64 (the divisor's sign, like Python's %, for remainder)."""
    x = np.random.default_rng(0).uniform(-9.0, 9.0, size=(2, 5))
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        s = trl.placeholder((2, 5), "float64", domain=(i, t))
        s[i, 0] = trl.tensor(x, "float64")
        s[i, t + 1] = s * 0.5
        outputs = [collect(F.apply(op, s)) for op in ("sin", "cos")]
        outputs.append(collect(F.apply("remainder", s, trl.tensor([[2 * math.pi], [-1.5]], "float64"))))
    got = run(ctx, {I: 1, T: 2}, backend)
    for t_ in range(2):
        value = x * 0.5 ** t_
        for store, want in zip(got, (np.sin(value), np.cos(value), np.remainder(value, [[2 * math.pi], [-1.5]]))):
            assert store[(0, t_)].dtype == np.float64
            np.testing.assert_allclose(store[(0, t_)], want, rtol=1e-15, atol=1e-15)


# Acrobot's Runge-Kutta step is ~200 ops: XLA compiles its groups for ~10 s on this 2-core machine, and the
# reference takes seconds per hundred steps, so its rollouts run on torch (the one-step cases on reference too).
SLOW = {"Acrobot-v1": ("torch",)}


@pytest.mark.parametrize("name, steps, limit", [("CartPole-v1", 60, 25), ("Pendulum-v1", 30, 12),
                                                ("MountainCar-v0", 30, 12), ("Acrobot-v1", 130, 100)])
def test_rt_env_matches_gymnasium_step_for_step(backend, name, steps, limit):
    """Short time limits (gymnasium.make's max_episode_steps) put truncations, terminations and restarts
    inside a few dozen steps."""
    if backend not in SLOW.get(name, (backend,)):
        pytest.skip(f"{name} rollouts run on {', '.join(SLOW[name])} only (see SLOW)")
    env, rt = rt_rollout(name, 2, steps, backend, max_episode_steps=limit)
    assert env.max_episode_steps == limit and env.simulator == "rt"
    counts = replay(name, rt, 2, steps, max_episode_steps=limit)
    assert counts["truncated"] >= 2
    if name in ("CartPole-v1", "Acrobot-v1"):
        assert counts["terminated"] >= 2
    for value in rt["obs"].values():
        assert value.dtype == np.float32
    assert all(v.dtype == np.float32 for v in rt["reward"].values())
    assert all(v.dtype == bool for v in rt["ended"].values())


@pytest.mark.parametrize("name, steps", [("CartPole-v1", 505), ("Pendulum-v1", 205), ("MountainCar-v0", 205)])
def test_default_time_limits(name, steps):
    """gymnasium's own limits, 500 and 200 steps, counted across restarts like its TimeLimit wrapper."""
    env, rt = rt_rollout(name, 1, steps, "torch")
    counts = replay(name, rt, 1, steps)
    ends = np.array([rt["ended"][(0, t)] for t in range(steps)])
    controlled = ends[:, CONTROLLED]
    if name == "CartPole-v1":  # the controller balances until the limit
        assert controlled[:499].sum() == 0 and controlled[499].all() and counts["terminated"] > 0
    elif name == "MountainCar-v0":  # the controller reaches the flag, random pushes do not
        assert controlled[:199].any(axis=0).all() and counts["terminated"] >= CONTROLLED.sum()
        assert ends[:199, ~CONTROLLED].sum() == 0 and ends[199, ~CONTROLLED].all()
    else:
        assert ends[:199].sum() == 0 and ends[199].all() and counts["truncated"] == NUM_ENVS


# Hand-picked states and actions at the edges of each environment's dynamics.
EDGE_CASES = {
    "CartPole-v1": (  # at rest; crossing the cart limit; past the angle limit; at the limits moving back
        [[0.0, 0.0, 0.0, 0.0], [2.39, 1.0, 0.0, 0.0], [0.0, 0.0, 0.2, 0.5], [-2.4, 0.3, -0.2094, 0.3]],
        [0, 1, 0, 1]),
    "Pendulum-v1": (  # speed clipped; angle past pi (normalized cost); torque beyond the limit; at rest
        [[math.pi, 7.9], [4.0, -8.0], [0.5, 0.0], [0.0, 0.0]], [[2.0], [-0.7], [3.5], [-2.5]]),
    "MountainCar-v0": (  # into the left wall; onto the flag; speed clipped; at rest, no push
        [[-1.19, -0.02], [0.49, 0.02], [-0.5, -0.07], [-0.5, 0.0]], [0, 2, 0, 1]),
    "Acrobot-v1": (  # at rest; both angles wrapping; swung up (terminal); velocities clipped
        [[0.0, 0.0, 0.0, 0.0], [3.1, -3.1, 4 * math.pi - 0.1, -9 * math.pi + 0.1], [math.pi - 0.05, 0.0, 0.0, 0.0],
         [0.0, 0.0, 4 * math.pi, 9 * math.pi]], [1, 2, 0, 2]),
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_dynamics_from_chosen_states(backend, name):
    """One step of `dynamics` from the same states under the same actions as gymnasium's env.step."""
    if backend not in SLOW.get(name, ("reference", backend)):
        pytest.skip(f"{name} runs on reference and {', '.join(SLOW[name])} only (see SLOW)")
    states, actions = (np.asarray(v) for v in EDGE_CASES[name])
    ctx = trl.Context("t")
    env = trl.rl.make_env(name, num_envs=len(states), simulator="rt")
    dtype = "int64" if env.discrete else "float32"
    with ctx:
        after, reward, terminated = env.dynamics(trl.tensor(states, "float64"), trl.tensor(actions, dtype))
        got = [collect(x) for x in (after, reward.astype("float32"), terminated)]
    run(ctx, {}, backend)
    for k, (state, action) in enumerate(zip(states, actions)):
        gym_env = gymnasium.make(name).unwrapped
        gym_env.reset(seed=0)
        gym_env.state = state.copy()
        _, want_reward, want_terminated, _, _ = gym_env.step(int(action) if env.discrete else action.astype(np.float32))
        np.testing.assert_allclose(got[0][()][k], np.asarray(gym_env.state, np.float64), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(got[1][()][k], np.float32(want_reward), rtol=1e-7)
        assert bool(got[2][()][k]) == want_terminated, f"{name} case {k}"


def test_no_host_code_runs_the_environment():
    """Every node the RT environment adds is an array op or a random draw: no udf, source or sink."""
    for name in ("CartPole-v1", "Pendulum-v1", "MountainCar-v0", "Acrobot-v1"):
        ctx = trl.Context("i t")
        i, t = ctx.dims
        env = trl.rl.make_env(name, num_envs=2, simulator="rt")
        with ctx:
            action = trl.zeros((2, *env.action_shape), "int64" if env.discrete else "float32", domain=(i, t))
            before = len(ctx.nodes)
            o = trl.placeholder((2, *env.observation_shape), domain=(i, t))
            o[i, 0] = env.reset(domain=(i,))
            o[i, t + 1], r, terminated = env.step(action)
        ops = {node.op for node in ctx.nodes[before:]}
        assert not ops & {"udf", "source", "sink"} and "rand" in ops, sorted(ops)


def test_one_rollout_without_iterations(backend):
    """reset() with no domain: one batch of episodes over t alone, truncated every 3 steps."""
    ctx = trl.Context("t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    env = trl.rl.make_env("Pendulum-v1", num_envs=2, simulator="rt", max_episode_steps=3)
    with ctx:
        o = trl.placeholder((2, 3), domain=(t,))
        o[0] = env.reset()
        o[t + 1], r, terminated = env.step(trl.zeros((2, 1), domain=(t,)))
        ends, rewards = collect(terminated), collect(r)
    run(ctx, {T: 7}, backend)
    assert [bool(ends[(k,)].all()) for k in range(7)] == [False, False, True, False, False, True, False]
    assert all(not ends[(k,)].any() or ends[(k,)].all() for k in range(7))
    assert all((rewards[(k,)] <= 0).all() for k in range(7))


def test_interface_matches_the_gymnasium_env():
    for name in ("CartPole-v1", "Pendulum-v1", "MountainCar-v0", "Acrobot-v1"):
        rt_env = trl.rl.make_env(name, num_envs=3, simulator="rt")
        gym_env = trl.rl.make_env(name, num_envs=3)
        assert (rt_env.simulator, gym_env.simulator) == ("rt", "gymnasium")  # gymnasium stays the default
        assert (rt_env.observation_shape, rt_env.num_actions, rt_env.action_shape, rt_env.discrete) == (
            gym_env.observation_shape, gym_env.num_actions, gym_env.action_shape, gym_env.discrete)
        assert rt_env.max_episode_steps == gymnasium.make(name).spec.max_episode_steps


def test_reset_draws_are_uniform_in_gymnasiums_range():
    ctx = trl.Context("i")
    (i,) = ctx.dims
    (I,) = ctx.bounds
    env = trl.rl.make_env("Pendulum-v1", num_envs=64, simulator="rt")
    with ctx:
        first = collect(env.reset(domain=(i,)))
    run(ctx, {I: 8}, "reference", seed=3)
    values = np.stack(list(first.values()))  # (8, 64, 3): cos, sin, theta_dot
    theta = np.arctan2(values[..., 1], values[..., 0])
    assert np.abs(values[..., 2]).max() <= 1.0 and np.abs(values[..., 2]).mean() == pytest.approx(0.5, abs=0.06)
    assert np.abs(theta).mean() == pytest.approx(math.pi / 2, abs=0.15)
    assert len({v.tobytes() for v in first.values()}) == 8  # a fresh draw per iteration


@pytest.mark.parametrize("call, message", [
    (lambda: trl.rl.make_env("CartPole-v1", simulator="brax"), "choose one of"),
    (lambda: trl.rl.make_env("LunarLander-v3", simulator="rt"), "no RT simulator"),
    (lambda: trl.rl.make_env("CartPole-v1", simulator="rt", render_mode="human"), "render_mode"),
    (lambda: trl.rl.make_env("CartPole-v1", simulator="rt", max_episode_steps=0), "positive int"),
    (lambda: trl.rl.make_env("CartPole-v1", num_envs=0, simulator="rt"), "num_envs must be a positive int"),
    (lambda: trl.rl.make_env("CartPole-v1", simulator="rt").episodes, "episode_statistics"),
])
def test_bad_make_env_calls_name_the_users_line(call, message):
    with pytest.raises(trl.TimeRLError, match=message) as error:
        call()
    assert f"{__file__}:" in str(error.value)


def test_wrong_action_dtype_is_a_shape_error():
    ctx = trl.Context("i t")
    i, t = ctx.dims
    env = trl.rl.make_env("CartPole-v1", num_envs=2, simulator="rt")
    with ctx:
        env.reset(domain=(i,))
        with pytest.raises(trl.ShapeError, match="discrete actions are integers"):
            env.step(trl.zeros((2,), "float32", domain=(i, t)))


@pytest.fixture
def one_torch_thread():
    """Tiny matmuls on a shared 2-core machine: a second intra-op thread only waits for the first."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_reinforce_learns_with_the_rt_cartpole(one_torch_thread):
    curve = train("CartPole-v1", iterations=20, num_envs=16, steps=100, lr=1e-2, seed=0, backend="torch",
                  simulator="rt")
    lengths = [row["mean_length"] for row in curve]
    first, last = np.mean(lengths[:5]), np.mean(lengths[-5:])
    assert last > 80 and last > first + 25, f"no clear improvement: {np.round(lengths, 1)}"


def test_jax_scan_baseline_steps_like_gymnasium():
    """The benchmark's in-jax CartPole (float32) follows gymnasium from the same states and actions."""
    import jax
    import jax.numpy as jnp

    from benchmarks.jax_scan_reinforce import cartpole_step

    cartpole_step = jax.jit(cartpole_step)
    rng = np.random.default_rng(0)
    envs = [gymnasium.make("CartPole-v1") for _ in range(6)]
    state = np.stack([env.reset(seed=k)[0] for k, env in enumerate(envs)]).astype(np.float64)
    for env, row in zip(envs, state):
        env.unwrapped.state = row.copy()
    ended = np.zeros(6, bool)
    for _ in range(40):
        actions = rng.integers(0, 2, size=6)
        got, terminated = cartpole_step(jnp.asarray(state, jnp.float32), jnp.asarray(actions))
        for k, env in enumerate(envs):
            if ended[k]:
                continue
            _, _, want_terminated, _, _ = env.step(int(actions[k]))
            np.testing.assert_allclose(np.asarray(got[k]), env.unwrapped.state, rtol=1e-4, atol=1e-5)
            assert bool(terminated[k]) == want_terminated
            ended[k] = want_terminated
        state = np.stack([env.unwrapped.state for env in envs])
    assert ended.any()
