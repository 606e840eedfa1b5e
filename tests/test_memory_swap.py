"""Scheduled swapping (issue 9, item 2; paper §6.2): offload and fetch statements placed at compile time, each
point offloaded after its last use before its last reader and fetched ahead of that reader (as far as the
budget allows), kept only where the budget needs them (decided by a byte-counting dry run). Reactive LRU
swapping stays as the fallback, counted apart in ``exe.stats``."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl
from timerl.runtime.dryrun import required_device_bytes
from timerl.sched.ast import Fetch, Offload, every_node
from timerl.sched.schedule import FETCH_DISTANCES

POINT = 256  # float32 elements: 1 KiB per point
KIB = POINT * 4
# The fetch tests count fetches ahead of their reader against one stream of fetches (the backward pass's). With
# fusion off, the source x is a statement of its own, which isl runs as a loop before the recurrence: its
# points are swapped too, a second stream whose first fetch cannot run ahead either (same values, peak within
# the budget). These tests are about the fused program's schedule, so they pin fusion on.
FUSED = trl.CompileOptions(fusion=True, vectorize=False)


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
    exe, values = run(steps, device_memory=10 * KIB, swap=True, options=FUSED)
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
    assert stats["fetches_ahead"] >= stats["scheduled_fetches"] - 1  # all but the backward pass's first read


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


def fetch_distances(exe) -> set[int]:
    return {node.distance for node in every_node(exe.schedule.root) if isinstance(node, Fetch)}


def test_fetches_run_ahead_of_their_readers_as_far_as_the_budget_allows():
    """Each y[t] is fetched some executions of the backward sum ahead of the one that reads it, so the copy
    can overlap with them. A fetch d executions ahead keeps d more points (1 KiB each) on the device: the
    dry run counts them, and the distance is the largest that fits: the farthest candidate with room for it,
    fewer where the budget is tight (the dry run's peaks with every unit: 4.0 KiB at distances 0 and 1,
    5.0 KiB at 2, 7.0 KiB at 4), the values always those of the run without swapping."""
    _, expected = run(32)
    chosen = {}
    for kib in (5, 16):
        exe, values = run(32, device_memory=kib * KIB, swap=True, options=FUSED)
        stats = exe.stats
        assert values == expected
        assert stats["reactive_offloads"] == stats["reactive_fetches"] == 0, stats
        assert stats["peak_device_bytes"] <= kib * KIB
        assert required_device_bytes(exe.schedule, exe.graph, exe.groups, exe.bounds, exe.transient) == \
            stats["peak_device_bytes"]
        assert stats["fetches_ahead"] >= stats["scheduled_fetches"] - 1 > 0
        assert " ahead " in str(exe.schedule)
        chosen[kib] = fetch_distances(exe)
    assert chosen[16] == {max(FETCH_DISTANCES)} and chosen[5] == {2}


def test_fetches_on_jax_run_ahead_and_agree_with_no_swapping():
    _, expected = run(12, "jax")
    exe, values = run(12, "jax", device_memory=8 * KIB, swap=True, options=FUSED)
    assert values == expected and exe.stats["fetches_ahead"] >= exe.stats["scheduled_fetches"] - 1 > 0
    assert exe.stats["reactive_offloads"] == exe.stats["reactive_fetches"] == 0
