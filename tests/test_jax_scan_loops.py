"""Whole loops compiled into `lax.scan` on jax (`timerl.runtime.jax_scan`): every compiled program gives what
the reference interpreter gives and what jax gives without scans (``scan_loops=False``), and loops that do not
qualify (a host callback, a read two iterations back) keep the point-by-point program."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl
from algorithms.reinforce import train

from conftest import assert_values, collect


def compiled_loops(exe) -> list[str]:
    return [line.strip() for line in exe._program.source.splitlines() if "lax.scan" in line]


def run_three_ways(build, bounds: dict, seed: int = 0):
    """The collected values on the reference, on jax with scans and on jax without; the jax executables."""
    results, executables = [], []
    for backend, options in (("reference", {}), ("jax", {}), ("jax", {"scan_loops": False})):
        ctx, stores = build()
        exe = ctx.compile(bounds=bounds(ctx), backend=backend, seed=seed, **options)
        exe.execute()
        results.append([dict(store) for store in stores])
        executables.append(exe)
    return results, executables[1:]


def decaying_noise():
    """s[t + 1] = 0.5 * s[t] + u[t] with a draw u per step and an int counter carried beside it; the whole
    trajectory is read after the loop (a range read: its sink is outside the loop)."""
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        s = trl.placeholder((3,), dtype="float32", domain=(t,))
        k = trl.placeholder((), dtype="int64", domain=(t,))
        s[0] = trl.tensor(np.array([1.0, -2.0, 0.5], dtype=np.float32))
        k[0] = trl.tensor(np.array(0, dtype=np.int64))
        u = trl.rand((3,), domain=(t,))
        s[t + 1] = s[t] * 0.5 + u[t] - 0.25
        k[t + 1] = k[t] + (s[t].sum() > 0).astype("int64")
        stores = [collect(s[0:T]), collect(k[0:T])]
    return ctx, stores


def test_a_recurrence_with_draws_is_one_scan_and_matches():
    (reference, scanned, plain), (exe, exe_plain) = run_three_ways(decaying_noise, lambda ctx: {ctx.bounds[0]: 12},
                                                                   seed=5)
    assert compiled_loops(exe) and not compiled_loops(exe_plain)
    for want, got, other in zip(reference, scanned, plain):
        assert_values(got, want)
        assert_values(other, want)
    assert exe.stats["leaked_points"] == 0


def nested_with_parameters():
    """An outer loop over i updating a parameter-like w[i]; inside, a loop over t whose state starts from
    w[i] at t == 0 and reads w[i] (the same at every t) at every step; per-iteration results are read
    after the inner loop."""
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        w = trl.placeholder((2, 2), dtype="float32", domain=(i,))
        w[0] = trl.tensor(np.array([[0.9, 0.1], [-0.2, 0.8]], dtype=np.float32))
        h = trl.placeholder((2,), dtype="float32", domain=(i, t))
        h[i, 0] = w[i].sum(dim=0)
        h[i, t + 1] = (h[i, t] @ w[i]).tanh() + trl.randn((2,), domain=(i, t))[i, t] * 0.1
        total = h[i, 0:T].sum(dim=0)
        w[i + 1] = w[i] - 0.01 * total.unsqueeze(0) * total.unsqueeze(1)
        stores = [collect(total), collect(w[I - 1])]
    return ctx, stores


def test_inner_loop_reading_the_outer_point_matches():
    (reference, scanned, plain), (exe, _) = run_three_ways(nested_with_parameters,
                                                           lambda ctx: dict(zip(ctx.bounds, (4, 9))), seed=2)
    assert compiled_loops(exe)
    for want, got, other in zip(reference, scanned, plain):
        assert_values(got, want)
        assert_values(other, want)
    assert exe.stats["leaked_points"] == 0


def host_callback_in_the_loop():
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        s = trl.placeholder((), dtype="float64", domain=(t,))
        s[0] = trl.tensor(np.array(1.0))
        x = trl.source(lambda p: np.array(float(p["t"])), shape=(), dtype="float64", domain=(t,))
        s[t + 1] = s[t] * 0.9 + x[t]
        stores = [collect(s[0:T])]
    return ctx, stores


def two_steps_back():
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        f = trl.placeholder((), dtype="float64", domain=(t,))
        f[0] = trl.tensor(np.array(1.0))
        f[1] = trl.tensor(np.array(1.0))
        f[t + 2] = f[t] + f[t + 1] * 0.5
        stores = [collect(f[0:T])]
    return ctx, stores


@pytest.mark.parametrize("build", [host_callback_in_the_loop, two_steps_back])
def test_loops_that_do_not_qualify_keep_the_point_by_point_program(build):
    (reference, scanned, _), (exe, _) = run_three_ways(build, lambda ctx: {ctx.bounds[0]: 10})
    assert not compiled_loops(exe)
    for want, got in zip(reference, scanned):
        assert_values(got, want)


def reinforce_curves(iterations: int, backends) -> tuple[list, list]:
    curves, executables = [], []
    for backend, options in backends:
        stats: dict = {}
        curve = train("CartPole-v1", iterations=iterations, num_envs=4, steps=12, backend=backend, simulator="rt",
                      compile_options=options, stats=stats, seed=1)
        curves.append([(row["episodes"], row["mean_length"], row["mean_return"]) for row in curve])
        executables.append(stats.get("executable"))
    return curves, executables


def test_rt_cartpole_reinforce_acting_loop_is_one_scan_and_matches():
    """REINFORCE with the RT CartPole: the acting loop compiles into scans. The first iteration's episode
    statistics (every action of the iteration) equal the reference interpreter's; three iterations (actions
    after parameter updates) equal jax's without scans. (Later iterations of jax, with or without scans,
    differ from the reference's at this size: a difference of the jax path older than the scans, see the
    README's speed section; torch agrees with the reference.)"""
    curves, executables = reinforce_curves(1, (("reference", {}), ("jax", {}), ("jax", {"scan_loops": False})))
    assert curves[1] == curves[0] and curves[2] == curves[0]
    assert compiled_loops(executables[1]) and not compiled_loops(executables[2])
    curves, _ = reinforce_curves(3, (("jax", {}), ("jax", {"scan_loops": False})))
    assert curves[0] == curves[1]
