"""Memory-aware schedules (issue 9, item 1): producers next to their consumers, frees right after the last
reader, constants and parameter-free sources included. Peak memory is measured on torch at two sequence
lengths; a schedule that keeps every point of a window program alive grows 16x between them."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl
from timerl.sched.ast import Deallocate, Execute, Loop, Sequence

POINT = 256  # float32 elements: 1 KiB per point


def run_window(steps: int, scale: float | None):
    """g[t] = sum of y[t:min(t+4, T)] with y = x * scale + 1 (or x + 1 when ``scale`` is None)."""
    values: dict = {}
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.full(POINT, p["t"], np.float32), shape=(POINT,), domain=(t,))
        y = (x * scale if scale is not None else x) + 1.0
        g = y[t:trl.min(t + 4, T)].sum(0)
        g.sink(lambda p, v: values.__setitem__(p["t"], np.asarray(v).copy()))
    # point by point: the executor's batched loops (vectorize) trade this memory for speed by design
    exe = ctx.compile({T: steps}, backend="torch", vectorize=False)
    exe.execute()
    factor = 1.0 if scale is None else scale
    for k in range(steps):
        window = range(k, min(k + 4, steps))
        expected = sum(factor * j + 1.0 for j in window)
        np.testing.assert_allclose(values[k], np.full(POINT, expected, np.float32), rtol=1e-6)
    assert sorted(values) == list(range(steps)) and exe.stats["leaked_points"] == 0
    return exe


@pytest.mark.parametrize("scale", [None, 2.0])
def test_window_memory_is_flat_with_and_without_constants(scale):
    short = run_window(64, scale).stats["peak_device_bytes"]
    long = run_window(1024, scale).stats["peak_device_bytes"]
    assert short >= 5 * POINT * 4  # four window points and the sum are live together
    assert long <= 1.5 * short, (short, long)


def test_constants_run_once_before_the_loop():
    exe = run_window(8, 2.0)
    top = exe.schedule.root.body
    assert isinstance(top[-1], Loop) and not any(isinstance(child, Loop) for child in top[:-1]), str(exe.schedule)
    assert sum(_count(child, Execute) for child in top[:-1]) == 2, str(exe.schedule)  # 2.0 and 1.0


def _count(node, kind) -> int:
    if isinstance(node, kind):
        return 1
    if isinstance(node, Sequence):
        return sum(_count(child, kind) for child in node.body)
    if isinstance(node, Loop):
        return _count(node.body, kind)
    return sum(_count(child, kind) for child in (getattr(node, "then", None), getattr(node, "orelse", None))
               if child is not None)


def test_every_deallocation_is_inside_the_loop_that_reads_it():
    exe = run_window(8, 2.0)
    loop = next(child for child in exe.schedule.root.body if isinstance(child, Loop))
    assert _count(loop, Deallocate) >= 2, str(exe.schedule)  # y's window point and g after the sink


@pytest.mark.parametrize("fusion", [True, False])
def test_per_iteration_sink_runs_inside_its_iteration(fusion):
    """A sink of r[i, 0:T] runs inside iteration i: after every step of iteration i - 1, before iteration i + 1
    starts. With fusion it also runs after the step sinks of iteration i (it reads the statement that calls
    them); without fusion the two sinks are statements that depend on nothing of each other, in either order."""
    seen: list[tuple[int, int]] = []
    ctx = trl.Context(dims="i t")
    (i, t), (I, T) = ctx.dims, ctx.bounds
    with ctx:
        w = trl.param(np.ones(2, np.float32), domain=(i,))
        r = (trl.source(lambda p: np.full(2, p["t"], np.float32), shape=(2,), domain=(i, t)) * w).sum()
        r.sink(lambda p, v: seen.append(("step", p["i"])))
        r[i, 0:T].sink(lambda p, v: seen.append(("log", p["i"])))
        w[i + 1] = w[i] - 0.01 * r[i, 0:T].sum(0)
    ctx.compile({I: 3, T: 4}, backend="torch", options=trl.CompileOptions(fusion=fusion)).execute()
    logs = [k for k, entry in enumerate(seen) if entry[0] == "log"]
    steps_of = {n: [k for k, entry in enumerate(seen) if entry == ("step", n)] for n in range(3)}
    assert len(logs) == 3
    for n, where in enumerate(logs):
        assert where > max(steps_of[n] if fusion else steps_of.get(n - 1, [-1])), seen
        if n + 1 < 3:
            assert where < min(steps_of[n + 1]), seen
