"""Each output freed after its own last reader (issue 9, item 1): an environment step stores observation,
reward and episode end as one point; the observation is read at the next step, the rewards by a window at
the end. Freed together, every observation lived to the end, so peak memory grew with the observations'
bytes per step. Peaks are compared across lengths against the bytes of the outputs that must wait (derived
from the program's shapes); values against the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl
from timerl.backends.base import get_backend
from timerl.runtime.memory import MemoryPool
from timerl.sched.ast import Deallocate, If, Loop, Sequence

ENVS = 4
REWARD_BYTES = ENVS * 4  # float32 per environment: the only output read after its step
OBSERVATION_BYTES = ENVS * 4 * 4  # CartPole: 4 float32 per environment
END_BYTES = ENVS  # bool


def env_program(values: dict):
    """Act on CartPole by the pole's angle, keep every observation's sum, and the rewards of the whole
    sequence (read once, after the last step)."""
    ctx = trl.Context("t")
    (t,), (T,) = ctx.dims, ctx.bounds
    env = trl.rl.make_env("CartPole-v1", num_envs=ENVS, seed=0)
    with ctx:
        o = trl.placeholder((ENVS, 4), domain=(t,))
        o[0] = env.reset()
        action = (o.spatial[:, 2] > 0).astype("int64")
        o[t + 1], reward, _ended = env.step(action)
        o.sum(1).sink(lambda p, v: values.setdefault("o", {}).__setitem__(p["t"], np.asarray(v).copy()))
        reward[0:T].sink(lambda p, v: values.__setitem__("r", np.asarray(v).copy()))
    return ctx, T


def run(steps: int, backend: str = "torch", **options):
    values: dict = {}
    ctx, T = env_program(values)
    exe = ctx.compile({T: steps}, backend=backend, **options)
    exe.execute()
    return exe, values


# With fusion off, each observation's sum is a statement of its own, which loop distribution batches after the
# rollout: every observation then waits for it (memory traded for a batched loop, by design). The default case
# is about outputs of one fused step, so it states its options.
@pytest.mark.parametrize("backend,options", [("torch", {"options": trl.CompileOptions(fusion=True)}),
                                             ("torch", {"vectorize": False}),
                                             ("torch", {"device_memory": 10 ** 6}), ("jax", {})])
def test_outputs_read_at_the_next_step_do_not_wait_for_the_window_at_the_end(backend, options):
    _, expected = run(40, "reference")
    peaks = {}
    for steps in (16, 40):
        exe, values = run(steps, backend, **options)
        peaks[steps] = exe.stats["peak_device_bytes"]
        if steps == 40:
            np.testing.assert_allclose(values["r"], expected["r"], rtol=1e-6)
            np.testing.assert_allclose(np.stack([values["o"][k] for k in range(steps)]),
                                       np.stack([expected["o"][k] for k in range(steps)]), rtol=1e-5)
    growth = (peaks[40] - peaks[16]) / 24
    # only the reward waits for the window; freed with it, observation and end would add theirs per step
    assert growth <= REWARD_BYTES, (peaks, growth)
    assert growth < REWARD_BYTES + OBSERVATION_BYTES + END_BYTES


def leaves(node):
    if isinstance(node, Sequence):
        for child in node.body:
            yield from leaves(child)
    elif isinstance(node, Loop):
        yield from leaves(node.body)
    elif isinstance(node, If):
        yield from leaves(node.then)
        if node.orelse is not None:
            yield from leaves(node.orelse)
    else:
        yield node


def test_the_schedule_frees_the_step_outputs_apart():
    exe, _ = run(8, "torch", vectorize=False)
    partial = [n for n in leaves(exe.schedule.root) if isinstance(n, Deallocate) and n.parts is not None]
    step = [n for n in exe.graph.nodes if n.op == "udf" and len(n.outputs) >= 3]  # the environment step
    assert len(step) == 1
    parts = {outputs for node in partial for member, outputs in node.parts if member == step[0].id}
    # observation, reward, episode end (and the env's order token) each freed once, not all in one statement
    assert sorted(k for outputs in parts for k in outputs) == list(range(len(step[0].outputs))), str(exe.schedule)
    assert len(parts) >= 2 and " outputs %" in str(exe.schedule)


def test_pool_frees_outputs_one_by_one_and_the_point_with_the_last():
    backend = get_backend("torch")
    pool = MemoryPool(None, backend, swap=False)
    values = tuple(backend.from_numpy(np.zeros(n, np.float32)) for n in (4, 2, 1))  # 16, 8, 4 bytes
    pool.store((7, (0,)), values, 28)
    pool.free_outputs((7, (0,)), (0,), 3)
    assert pool.device_bytes == 12 and pool.has((7, (0,)))
    assert pool.load((7, (0,)))[0] is None and pool.load((7, (0,)))[1] is values[1]
    pool.free_outputs((7, (0,)), (2,), 3)
    assert pool.device_bytes == 8
    pool.free_outputs((7, (0,)), (1,), 3)
    assert pool.device_bytes == 0 and not pool.has((7, (0,))) and pool.peak_device_bytes == 28


def test_a_partly_freed_point_swaps_only_what_is_left():
    backend = get_backend("torch")
    pool = MemoryPool(64, backend, swap=True)
    values = tuple(backend.from_numpy(np.ones(n, np.float32)) for n in (8, 4))  # 32 and 16 bytes
    pool.store((3, (1,)), values, 48)
    pool.free_outputs((3, (1,)), (0,), 2)
    pool.offload((3, (1,)))
    assert pool.device_bytes == 0 and pool.host_bytes == 16 and pool.bytes_offloaded == 16
    pool.fetch((3, (1,)))
    fetched = pool.load((3, (1,)))
    assert fetched[0] is None and backend.to_numpy(fetched[1]).tolist() == [1.0] * 4 and pool.device_bytes == 16
