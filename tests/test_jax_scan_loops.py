"""Whole loops compiled into `lax.scan` on jax (`timerl.runtime.jax_scan`): every compiled program gives what
the reference interpreter gives and what jax gives without scans (``scan_loops=False``), and loops that do not
qualify (a host callback) keep the point-by-point program."""

from __future__ import annotations

import re
import sys

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
    for backend, options in (("reference", {}), ("jax", {"scan_loops": True}), ("jax", {"scan_loops": False})):
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


def backward_advantages():
    """GAE's shape over (i, t): per-step rewards computed by a forward recurrence before the loop (read along it), a
    backward recurrence adv[i, t - 1] = delta[i, t - 1] + 0.9 * keep[i, t - 1] * adv[i, t] started at T - 1,
    and every advantage read after the loop (isl runs it with a counter that goes up while t goes down)."""
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        s = trl.placeholder((2,), dtype="float32", domain=(i, t))  # a forward recurrence: "acting"
        s[i, 0] = trl.randn((2,), domain=(i,))
        s[i, t + 1] = s[i, t] * 0.8 + trl.randn((2,), domain=(i, t))
        r = s * 1.0
        keep = (r > -1.0).astype("float32")  # "not done"
        value = (r * 0.5).tanh()
        delta = r + 0.99 * keep * value - value * 0.5
        adv = trl.placeholder((2,), dtype="float32", domain=(i, t))
        adv[i, T - 1] = delta[i, T - 1]
        adv[i, t - 1] = delta[i, t - 1] + 0.9 * keep[i, t - 1] * adv[i, t]
        stores = [collect(adv[i, 0:T]), collect((adv - adv.mean()).abs().sum())]
    return ctx, stores


def test_a_backward_recurrence_reading_values_along_the_loop_is_one_scan_and_matches():
    (reference, scanned, plain), (exe, exe_plain) = run_three_ways(
        backward_advantages, lambda ctx: dict(zip(ctx.bounds, (3, 11))))
    assert compiled_loops(exe) and not compiled_loops(exe_plain)
    for want, got, other in zip(reference, scanned, plain):
        assert_values(got, want)
        assert_values(other, want)
    assert exe.stats["leaked_points"] == 0


def walking_index(lines: dict | None = None):
    """A carried integer k[t] = t indexes a table of 4 (``gather``) and a one-hot of 5 inside the loop: in range
    for T <= 4; at T > 4 the gather fails first, at t = 4 (the one-hot would at t = 5)."""
    lines = {} if lines is None else lines
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        k = trl.placeholder((1,), dtype="int64", domain=(t,))
        k[0] = trl.tensor(np.array([0], dtype=np.int64))
        k[t + 1] = k[t] + 1
        table = trl.tensor(np.array([0.5, -1.0, 2.0, 4.0], dtype=np.float32))
        lines["gather"] = next_line()
        value = table.gather(0, k[t])
        hot = k[t].one_hot(5)
        stores = [collect(value[0:T]), collect(hot[0:T])]
    return ctx, stores


def next_line() -> str:
    """``file:line`` of the caller's next line: where an error under test must point."""
    return f"test_jax_scan_loops.py:{sys._getframe(1).f_lineno + 1}"


def test_value_checks_run_inside_the_scan():
    """In range: one scan, the reference's values. Out of range: the error the point-by-point program raises
    (message, the user's line, the point of the first failing iteration), raised after the scan."""
    (reference, scanned, plain), (exe, _) = run_three_ways(walking_index, lambda ctx: {ctx.bounds[0]: 4})
    assert compiled_loops(exe)
    for want, got, other in zip(reference, scanned, plain):
        assert_values(got, want)
        assert_values(other, want)
    errors = []
    for backend, options in (("reference", {}), ("jax", {"scan_loops": True}), ("jax", {"scan_loops": False})):
        lines: dict = {}
        ctx, stores = walking_index(lines)
        exe = ctx.compile(bounds={ctx.bounds[0]: 7}, backend=backend, **options)
        if backend == "jax":
            assert bool(compiled_loops(exe)) == options["scan_loops"]
        with pytest.raises(trl.IndexOutOfRangeError) as info:
            exe.execute()
        errors.append(re.sub(r"%\d+", "%", str(info.value)))  # the reference numbers its nodes apart
        assert all(not store for store in stores)  # nothing read after the loop was used
    assert errors[1] == errors[2]
    assert lines["gather"] in errors[1] and "{'t': 4}" in errors[1]
    assert "index 4 is out of range for a dimension of size 4" in errors[1]
    assert lines["gather"] in errors[0]  # the reference interpreter evaluates in its own order: another point


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


def test_loops_that_do_not_qualify_keep_the_point_by_point_program():
    (reference, scanned, _), (exe, _) = run_three_ways(host_callback_in_the_loop, lambda ctx: {ctx.bounds[0]: 10})
    assert not compiled_loops(exe)
    for want, got in zip(reference, scanned):
        assert_values(got, want)


def test_a_read_two_steps_back_scans_as_isl_shifts_it():
    """f[t + 2] = f[t] + f[t + 1] / 2: isl runs the sum one iteration behind the merge that reads it, so each
    statement reads the other at the same iteration or the one before, and the loop is one scan."""
    (reference, scanned, _), (exe, _) = run_three_ways(two_steps_back, lambda ctx: {ctx.bounds[0]: 10})
    assert compiled_loops(exe)
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
    differ from the reference's at this size: round-off that Adam amplifies where the exact gradient is 0,
    see the next test.)"""
    curves, executables = reinforce_curves(1, (("reference", {}), ("jax", {"scan_loops": True}), ("jax", {"scan_loops": False})))
    assert curves[1] == curves[0] and curves[2] == curves[0]
    assert compiled_loops(executables[1]) and not compiled_loops(executables[2])
    curves, _ = reinforce_curves(3, (("jax", {}), ("jax", {"scan_loops": False})))
    assert curves[0] == curves[1]


def test_rt_cartpole_reinforce_on_jax_takes_the_reference_actions_where_episodes_end():
    """Three iterations of REINFORCE on jax take the reference interpreter's actions (so their updates agree)
    at 4 envs x 40 steps, where episodes end in every iteration. At 4 x 12 none ends in the first iteration:
    every environment's returns are the same, the baseline makes each advantage exactly 0 and the reference's
    gradient is exactly 0, while XLA's fused mean differs from the returns by an ulp (advantages ~1e-6, gradients
    ~1e-7); Adam's first step, m / (sqrt(v) + 1e-8), turns any such gradient into a step of about lr, so jax's
    parameters move by up to 0.01 where the reference's stay: round-off, not a wrong gradient."""
    curves = []
    for backend in ("reference", "jax"):
        curve = train("CartPole-v1", iterations=3, num_envs=4, steps=40, backend=backend, simulator="rt", seed=0)
        curves.append([(row["episodes"], row["mean_length"], row["mean_return"]) for row in curve])
    assert curves[0] == curves[1]
    assert all(episodes > 0 for episodes, _, _ in curves[0])


def host_driven_recurrence(host: dict):
    """s[0] = x, s[t + 1] = 0.5 * s[t] + x with ``x`` a source reading ``host`` (the same at every t): a
    program executed once per new host value, as MuZero's search is per move."""
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda point: host["x"], shape=(3,), dtype="float32")
        s = trl.placeholder((3,), dtype="float32", domain=(t,))
        s[0] = x
        s[t + 1] = s[t] * 0.5 + x
        stores = [collect(s[0:T]), collect(s[T - 1] * 2.0)]
    return ctx, stores


@pytest.mark.parametrize("build", ["host", "nested"])
def test_executing_a_scanned_program_again_matches_the_reference_each_time(build):
    """A scanned loop plans its run once per value of its outer counters and keeps the plan for the next
    execution (`ScannedLoop._run_plan`): each execution, with new host values, still gives the reference's
    values and leaks no point; a loop inside an outer loop (a new plan per outer point) too."""
    rng = np.random.default_rng(3)
    host: dict = {}
    make = (lambda: host_driven_recurrence(host)) if build == "host" else nested_with_parameters
    (ctx, stores), (ref_ctx, ref_stores) = make(), make()
    exe = ctx.compile(bounds={ctx.bounds[0]: 4} if build == "host" else {ctx.bounds[0]: 3, ctx.bounds[1]: 5},
                      backend="jax", seed=2, scan_loops=True)
    reference = ref_ctx.compile(bounds={b: v for b, v in zip(ref_ctx.bounds, (4,) if build == "host" else (3, 5))},
                                backend="reference", seed=2)
    assert compiled_loops(exe)
    for _ in range(3):
        host["x"] = rng.normal(size=3).astype(np.float32)
        for store in stores + ref_stores:
            store.clear()
        exe.execute()
        reference.execute()
        for got, want in zip(stores, ref_stores):
            assert_values(got, want)
        assert exe.stats["leaked_points"] == 0
