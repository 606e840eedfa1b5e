"""Scheduled swapping (issue 9, item 2; paper §6.2): offload and fetch statements placed at compile time, each
point offloaded after its last use before its last reader and fetched right before that reader, kept only
where the budget needs them (decided by a byte-counting dry run). Reactive LRU swapping stays as the
fallback, counted apart in ``exe.stats``."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl
from timerl.sched.ast import Fetch, Offload

POINT = 256  # float32 elements: 1 KiB per point
KIB = POINT * 4


def reverse_sum_program(values: dict):
    """y[t] = 2 s[t] of a forward recurrence s is read at once (c[t] = y[t] + 1) and again by a sum running
    backwards over time (b[t] = y[t] + b[t + 1]): every y waits for the backward pass, T KiB at once without
    swapping (the shape of Monte Carlo returns against a forward pass)."""
    ctx = trl.Context("t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.full(POINT, p["t"] + 1.0, np.float32), shape=(POINT,), domain=(t,))
        s = trl.placeholder((POINT,), domain=(t,))
        s[0] = x[0]
        s[t + 1] = s[t] * 0.5 + x[t + 1]
        y = s * 2.0
        (y + 1.0).sum().sink(lambda p, v: values.setdefault("c", {}).__setitem__(p["t"], float(v)))
        b = trl.placeholder((POINT,), domain=(t,))
        b[T - 1] = y[T - 1]
        b[t - 1] = y[t - 1] + b[t]
        b.sum().sink(lambda p, v: values.setdefault("b", {}).__setitem__(p["t"], float(v)))
    return ctx, T


def run(steps: int, backend: str = "torch", **options):
    values: dict = {}
    ctx, T = reverse_sum_program(values)
    exe = ctx.compile({T: steps}, backend=backend, vectorize=False, **options) if backend != "reference" else \
        ctx.compile({T: steps}, backend=backend)
    exe.execute()
    return exe, values


def test_scheduled_swaps_fit_a_budget_the_schedule_exceeds_and_agree_with_the_reference():
    steps = 32
    _, expected = run(steps, "reference")
    exe, values = run(steps, device_memory=10 * KIB, swap=True)
    unswapped_exe, unswapped_values = run(steps)
    assert values == unswapped_values  # swapping moves values, never changes them
    for name in ("b", "c"):
        assert sorted(values[name]) == list(range(steps))
        np.testing.assert_allclose([values[name][k] for k in range(steps)],
                                   [expected[name][k] for k in range(steps)], rtol=1e-6)
    unswapped = unswapped_exe.stats["peak_device_bytes"]
    assert unswapped >= steps * KIB  # every y[t] lives until the backward sum reaches it
    stats = exe.stats
    assert stats["peak_device_bytes"] <= 10 * KIB
    assert stats["scheduled_offloads"] >= steps - 10 and stats["scheduled_fetches"] == stats["scheduled_offloads"]
    assert stats["reactive_offloads"] == 0 and stats["reactive_fetches"] == 0, stats
    assert stats["bytes_offloaded"] == stats["bytes_fetched"] == stats["scheduled_offloads"] * KIB
    assert exe.schedule.count(Offload) >= 1 and exe.schedule.count(Fetch) >= 1, str(exe.schedule)


def test_no_swap_statements_when_the_budget_fits_without():
    exe, values = run(16, device_memory=64 * KIB, swap=True)
    assert exe.schedule.count(Offload) == 0 and exe.schedule.count(Fetch) == 0
    assert exe.stats["scheduled_offloads"] == exe.stats["reactive_offloads"] == 0


def test_without_swap_the_same_budget_raises_with_the_true_peak():
    with pytest.raises(trl.DeviceOutOfMemoryError, match="swap=True may help"):
        run(32, device_memory=10 * KIB)


@pytest.mark.parametrize("backend", ["jax"])
def test_scheduled_swaps_on_jax_agree_with_no_swapping(backend):
    _, expected = run(12, backend)
    exe, values = run(12, backend, device_memory=8 * KIB, swap=True)
    assert values == expected and exe.stats["scheduled_offloads"] > 0
    assert exe.stats["peak_device_bytes"] <= 8 * KIB
