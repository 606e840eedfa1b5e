"""`execute()` from several threads: the calls on one executable run one after another (each run whole, with
its own pool), different executables run side by side, and a call from inside a running one is refused."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import timerl as trl

STEPS = 24


def _program(offset: float):
    """Suffix sums of ``t + offset``; returns the context, its bound and the list its sink appends to."""
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    seen: list = []
    with ctx:
        x = trl.source(lambda p: np.full(3, p["t"] + offset, np.float32), (3,), "float32", (t,))
        x[t:T].sum(0).sink(lambda p, v: seen.append((p["t"], float(np.asarray(v)[0]))))
    return ctx, T, seen


def _expected(offset: float) -> list:
    return sorted((k, float(sum(j + offset for j in range(k, STEPS)))) for k in range(STEPS))


def _in_threads(calls: list, runs: int = 3) -> list:
    errors: list = []

    def work(call):
        try:
            for _ in range(runs):
                call()
        except Exception as error:  # noqa: BLE001 (reported by the assertion below)
            errors.append(error)

    threads = [threading.Thread(target=work, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_one_executable_in_two_threads(backend):
    ctx, T, seen = _program(0.0)
    exe = ctx.compile(bounds={T: STEPS}, backend=backend)
    assert _in_threads([exe.execute, exe.execute]) == []
    assert len(seen) == 6 * STEPS
    runs = [sorted(seen[k * STEPS:(k + 1) * STEPS]) for k in range(6)]  # each run whole, not interleaved
    assert all(run == _expected(0.0) for run in runs)


def test_two_executables_side_by_side(backend):
    (ctx_a, T_a, seen_a), (ctx_b, T_b, seen_b) = _program(0.0), _program(100.0)
    exe_a = ctx_a.compile(bounds={T_a: STEPS}, backend=backend)
    exe_b = ctx_b.compile(bounds={T_b: STEPS}, backend=backend)
    assert _in_threads([exe_a.execute, exe_b.execute]) == []
    assert sorted(seen_a) == sorted(_expected(0.0) * 3) and sorted(seen_b) == sorted(_expected(100.0) * 3)


def test_execute_from_inside_its_own_run_is_refused(backend):
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    executables: list = []
    with ctx:
        trl.source(lambda p: np.float32(p["t"]), (), "float32", (t,)).sink(lambda p, v: executables[0].execute())
    executables.append(ctx.compile(bounds={T: 2}, backend=backend))
    with pytest.raises(trl.TimeRLError, match=r"test_threads.py:\d+: execute\(\) called while the same executable "
                                              "runs on this thread"):
        executables[0].execute()
