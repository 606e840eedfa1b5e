"""A `DeviceOutOfMemoryError` states a budget that works: with ``swap=True`` compiling again with the stated
``device_memory`` runs (it does not loop upward), without swap the stated budget runs too; every such message
names the op and the user's line."""

from __future__ import annotations

import re

import numpy as np
import pytest

import timerl as trl

POINT = 256  # float32 elements: 1 KiB a point
KIB = POINT * 4


def _window(ctx):
    (t,), (T,) = ctx.dims, ctx.bounds
    x = trl.source(lambda p: np.full(POINT, p["t"], np.float32), shape=(POINT,), domain=(t,))
    return x[t:trl.min(t + 4, T)].sum(0)


def _mirror(ctx):
    (t,), (T,) = ctx.dims, ctx.bounds
    x = trl.source(lambda p: np.full(POINT, p["t"], np.float32), shape=(POINT,), domain=(t,))
    return x + x[T - 1 - t]


def _reverse_sum(ctx):
    (t,), (T,) = ctx.dims, ctx.bounds
    x = trl.source(lambda p: np.full(POINT, p["t"] + 1.0, np.float32), shape=(POINT,), domain=(t,))
    s = trl.placeholder((POINT,), domain=(t,))
    s[0] = x[0]
    s[t + 1] = s[t] * 0.5 + x[t + 1]
    y = (s * 2.0).tanh()
    b = trl.placeholder((POINT,), domain=(t,))
    b[T - 1] = y[T - 1]
    b[t - 1] = y[t - 1] + b[t]
    return b + y


PROGRAMS = {"window": _window, "mirror": _mirror, "reverse_sum": _reverse_sum}


def _compile_and_run(make, backend: str, **options):
    ctx = trl.Context(dims="t")
    (T,) = ctx.bounds
    with ctx:
        make(ctx).sum().sink(lambda p, v: None)
    exe = ctx.compile({T: 12}, backend=backend, vectorize=False, **options)
    exe.execute()
    return exe


@pytest.mark.parametrize("swap", [True, False])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_stated_budget_fits(compiled_backend, name, swap):
    make = PROGRAMS[name]
    for budget in (1, 2 * KIB, 5 * KIB):
        try:
            _compile_and_run(make, compiled_backend, device_memory=budget, swap=swap)
            continue
        except trl.DeviceOutOfMemoryError as error:
            message = str(error)
        assert "test_memory_budget_errors.py:" in message and "(%" in message, message  # the op and its line
        stated = int(re.search(r"needs at least (\d+) bytes", message).group(1))
        assert stated > budget, message
        exe = _compile_and_run(make, compiled_backend, device_memory=stated, swap=swap)
        assert exe.stats["peak_device_bytes"] <= stated
