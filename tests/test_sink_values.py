"""Sinks receive NumPy arrays in host memory on every backend (SPEC, "Compiling and running"), or with
``native=True`` the backend's own array; either way they cannot change what other ops read."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import torch

import timerl as trl

NATIVE = {"reference": np.ndarray, "torch": torch.Tensor, "jax": jax.Array}


def _program(native: bool, seen: list):
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.placeholder((3,), "float32", domain=(t,))
        x[0] = trl.zeros((3,))
        x[t + 1] = x[t] + 1.0

        def keep(point, value):
            seen.append((point["t"], value))
            try:
                value += 100  # a sink's attempt to write: refused (read-only) or into its own copy
            except (ValueError, RuntimeError, TypeError):
                pass

        x.sink(keep, native=native)
        x.sum().sink(lambda p, v: seen.append(("sum", p["t"], v)))
    return ctx, T


@pytest.mark.parametrize("native", [False, True])
def test_sink_values_by_backend(backend, native):
    seen: list = []
    ctx, T = _program(native, seen)
    ctx.compile(bounds={T: 4}, backend=backend).execute()
    rows = [entry[1] for entry in seen if entry[0] != "sum"]
    sums = {entry[1]: entry[2] for entry in seen if entry[0] == "sum"}
    assert len(rows) == 4 and len(sums) == 4
    kind = NATIVE[backend] if native else np.ndarray
    assert all(isinstance(v, kind) for v in rows)
    assert all(isinstance(v, np.ndarray) and v.dtype == np.float32 for v in sums.values())
    for step in range(4):  # the writes above changed nothing the program reads
        assert float(sums[step]) == 3.0 * step


def test_native_is_a_flag():
    ctx = trl.Context(dims="t")
    with ctx:
        with pytest.raises(trl.TimeRLError, match="native"):
            trl.zeros((2,), domain=ctx.dims).sink(print, native="yes")
