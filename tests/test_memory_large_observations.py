"""Large observations (issue 9, item 5; paper Fig. 10, 11): image observations (`algorithms.pixel_cartpole`)
through a patch embedding (`trl.nn.PatchEmbedding`), REINFORCE under a device budget that only scheduled
swapping can meet, and the byte-counting dry run that chooses the swaps for programs whose sizes depend on
the point (windows ``r[t:T]``)."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

import timerl as trl
from algorithms.reinforce import train
from timerl import nn
from timerl.runtime.dryrun import required_device_bytes
from timerl.sched import ast

ENV = "algorithms.pixel_cartpole:PixelCartPole-v0"


def test_patch_embedding_equals_a_torch_convolution_with_kernel_and_stride_the_patch():
    images = np.random.default_rng(0).normal(size=(3, 2, 3, 8, 12)).astype(np.float32)  # 3 steps of 2 images
    seen: dict = {}
    ctx = trl.Context("t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: images[p["t"]], shape=(2, 3, 8, 12), domain=(t,))
        embedding = nn.PatchEmbedding((3, 8, 12), patch=4, n_out=5, domain=(), seed=7)
        embedding(x).sink(lambda p, v: seen.__setitem__(p["t"], np.asarray(v)))
    weight, bias = nn._initial(np.random.default_rng(7), 3 * 4 * 4, 5, None)
    convolution = torch.nn.functional.conv2d(torch.as_tensor(images.reshape(6, 3, 8, 12)),
                                             torch.as_tensor(weight.reshape(5, 3, 4, 4), dtype=torch.float32),
                                             torch.as_tensor(bias, dtype=torch.float32), stride=4)
    expected = convolution.permute(0, 2, 3, 1).reshape(3, 2, 2 * 3 * 5).numpy()  # (rows, cols, features)
    for backend in ("reference", "torch", "jax"):
        seen.clear()
        ctx.compile({T: 3}, backend=backend).execute()
        for step in range(3):
            np.testing.assert_allclose(seen[step], expected[step], rtol=1e-5, atol=1e-5, err_msg=backend)
    with pytest.raises(trl.TimeRLError, match="does not divide"):
        with trl.Context("t"):
            nn.PatchEmbedding((3, 8, 12), patch=5, n_out=2)


def test_pixel_frames_show_the_cart_and_the_pole():
    env = trl.rl.make_env(ENV, num_envs=1, size=16)
    assert env.observation_shape == (3, 16, 16)
    frames = gymnasium.make(ENV, size=16)
    first, _ = frames.reset(seed=0)
    second, *_ = frames.step(0)
    assert first[0].sum() > 0 and first[1].sum() > 0 and first[2].sum() == 0  # no previous frame yet
    np.testing.assert_array_equal(second[2], first[0] + first[1])  # channel 2: the previous frame


def pixel_run(backend: str, n_step: int | None, steps: int = 20, **options) -> tuple[list, dict]:
    stats: dict = {}
    curve = train(ENV, iterations=2, num_envs=2, steps=steps, n_step=n_step, backend=backend, stats=stats,
                  env_options=dict(size=64), compile_options=options or None)
    return [(row["episodes"], row["mean_length"]) for row in curve], stats


@pytest.mark.parametrize("n_step", [None, 4])
def test_dry_run_peak_is_the_pools_peak_for_windows_that_depend_on_the_step(n_step):
    _, stats = pixel_run("torch", n_step, steps=8, device_memory=1 << 40)
    exe = stats["executable"]
    assert required_device_bytes(exe.schedule, exe.graph, exe.groups, exe.bounds, exe.transient) == \
        stats["peak_device_bytes"]


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_pixel_reinforce_under_a_budget_swaps_as_scheduled_and_learns_the_same(backend):
    """Monte Carlo keeps every step's frames until the end of the iteration: half of that peak fits
    only with swaps, which the compiler schedules (none reactive), and the episodes are those of the run
    without a budget (and, on torch, of the reference interpreter)."""
    unbounded, plain = pixel_run(backend, None, device_memory=1 << 40, swap=True)
    assert plain["scheduled_offloads"] == 0
    budget = plain["peak_device_bytes"] // 2
    curve, stats = pixel_run(backend, None, device_memory=budget, swap=True)
    assert curve == unbounded
    if backend == "torch":
        reference, _ = pixel_run("reference", None)
        assert curve == reference
    assert stats["peak_device_bytes"] <= budget
    assert stats["scheduled_offloads"] > 0 and stats["scheduled_fetches"] > 0
    assert stats["reactive_offloads"] == stats["reactive_fetches"] == 0, stats
    assert stats["fetches_ahead"] > 0  # frames come back ahead of the backward pass that reads them
    assert stats["peak_host_bytes"] > 0


@pytest.mark.parametrize("n_step", [None, 4])
def test_dry_run_of_the_chosen_swaps_is_the_pools_run_with_fused_recurrences(n_step):
    """The acting group fuses across the recurrence (the environment step with the policy that reads the
    frame it fed back): its frame and its reward have different readers and move apart (swap units by
    member), and the byte count that chose the swaps replays outputs freed after their own last reader
    before an offload as the pool does. Its peak is the pool's, within the budget, with no reactive swap.
    About fused groups, so fusion is pinned on (with it off every op is a statement, whose outputs move as one;
    the dry run then still equals the pool)."""
    fused = trl.CompileOptions(fusion=True)
    _, plain = pixel_run("torch", n_step, steps=8, device_memory=1 << 40, swap=True, options=fused)
    budget = plain["peak_device_bytes"] * 2 // 3
    _, stats = pixel_run("torch", n_step, steps=8, device_memory=budget, swap=True, options=fused)
    exe = stats["executable"]
    moves = [n for n in ast.every_node(exe.schedule.root) if isinstance(n, (ast.Offload, ast.Fetch))]
    assert any(n.members is not None for n in moves)  # some members of a group stay while others move
    assert required_device_bytes(exe.schedule, exe.graph, exe.groups, exe.bounds, exe.transient) == \
        stats["peak_device_bytes"] <= budget
    assert stats["reactive_offloads"] == stats["reactive_fetches"] == 0, stats
