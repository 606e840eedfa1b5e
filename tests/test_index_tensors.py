"""Bounds and integer expressions as scalar tensors (SPEC, "Symbols and expressions"): ``loss / T``,
``gamma ** (T - t)``, ``(t + 1).astype("float32")``, against NumPy, torch's promotion and torch autograd."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_values, collect, run

import timerl as trl

STEPS, ITERATIONS = 5, 3


def _series(steps: int) -> np.ndarray:
    return np.linspace(-1.0, 2.0, steps * 2).reshape(steps, 2)


def test_expressions_as_values(backend):
    ctx = trl.Context(dims="i t")
    (i, t), (I, T) = ctx.dims, ctx.bounds
    gamma = 0.9
    with ctx:
        r = trl.source(lambda p: float(p["t"] + 10 * p["i"]), shape=(), dtype="float32", domain=(i, t))
        stores = [collect(r / T), collect(gamma ** (T - t)), collect((t + 1).astype("float32")),
                  collect(T * r), collect(0.5 * t), collect(t - 0.5), collect(r * (I * T - i * T - t)),
                  collect(t.astype("int64")), collect(trl.min(t, 2) + r)]
    run(ctx, {I: ITERATIONS, T: STEPS}, backend)
    expected = [
        lambda k, s: (s + 10 * k) / STEPS, lambda k, s: np.float32(gamma) ** (STEPS - s),
        lambda k, s: np.float32(s + 1), lambda k, s: STEPS * (s + 10.0 * k), lambda k, s: 0.5 * s,
        lambda k, s: s - 0.5, lambda k, s: (s + 10.0 * k) * (ITERATIONS * STEPS - k * STEPS - s),
        lambda k, s: s, lambda k, s: min(s, 2) + s + 10.0 * k]
    for store, value in zip(stores, expected):
        keys = [key for key in store]
        domain_points = {key: value(*(key if len(key) == 2 else (0, key[0]))) for key in keys}
        assert len(keys) in (STEPS, ITERATIONS * STEPS)
        assert_values(store, domain_points)


def test_dtypes_follow_torch_python_ints(backend):
    """An expression is an int: weak, it takes a tensor's dtype as a Python int does in PyTorch."""
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        small = trl.tensor(np.array([1, 2], dtype=np.int32))
        floats = trl.tensor(np.array([1.0, 2.0], dtype=np.float32))
        cases = [small + t, floats * T, floats / (T - t), (T - t) / 2, t.astype("float64") + 1]
        stores = [collect(c) for c in cases]
    want = [torch.tensor([1, 2], dtype=torch.int32) + 3, torch.tensor([1.0, 2.0]) * 4,
            torch.tensor([1.0, 2.0]) / (4 - 3), torch.tensor(4 - 3) / 2, torch.tensor(3.0, dtype=torch.float64) + 1]
    assert [c.dtype for c in cases] == [str(w.dtype).removeprefix("torch.") for w in want]
    run(ctx, {T: 4}, backend)
    for store, value in zip(stores, want):
        store = {key: v for key, v in store.items() if key in ((), (3,))}
        (got,) = store.values()
        assert got.dtype == np.dtype(str(value.dtype).removeprefix("torch."))
        np.testing.assert_allclose(got, value.numpy())


def test_gradients_through_bound_and_step_weights(backend):
    """``(gamma ** (T - t) * x).sum() / T``: the expressions scale the gradient, as constants would in torch."""
    values = _series(STEPS)
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.placeholder((2,), "float64", domain=(t,), requires_grad=True)
        x[t] = trl.source(lambda p: values[p["t"]], shape=(2,), dtype="float64", domain=(t,))
        loss = (0.9 ** (T - t) * x * x).sum() / T + x.sum() * t.astype("float64")
        loss.backward()
        grads = collect(x.grad)
    run(ctx, {T: STEPS}, backend)
    leaf = torch.tensor(values, requires_grad=True)
    steps = torch.arange(STEPS, dtype=torch.float64)
    discounts = 0.9 ** (STEPS - torch.arange(STEPS))  # float32, as torch makes it from an int tensor
    total = (discounts[:, None] * leaf * leaf).sum() / STEPS + (leaf.sum(1) * steps).sum()
    total.backward()
    assert_values(grads, {(k,): leaf.grad[k].numpy() for k in range(STEPS)}, rtol=1e-9, atol=1e-10)


def test_expression_of_another_context_is_refused():
    ours, theirs = trl.Context(dims="t"), trl.Context(dims="t")
    with ours:
        x = trl.zeros((2,), domain=ours.dims)
        with pytest.raises(trl.TimeRLError, match="another context"):
            x * theirs.bounds[0]
