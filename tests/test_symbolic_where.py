"""``trl.where(cond, a, b)`` with a symbolic condition (what the error for ``if t == 0:`` recommends), and a
condition used where a tensor is expected: against NumPy on every backend, and its gradient against torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_values, collect, run

import timerl as trl

STEPS, ITERATIONS = 5, 2


def test_where_with_a_symbolic_condition(backend):
    ctx = trl.Context(dims="i t")
    (i, t), (I, T) = ctx.dims, ctx.bounds
    with ctx:
        r = trl.source(lambda p: np.full(2, p["t"] + 10 * p["i"]), shape=(2,), dtype="float32", domain=(i, t))
        first = collect(trl.where(t == 0, r, r * 10))
        inner = collect(trl.where((t > 1) & (t < T - 1) | (i == I - 1), 1.0, 0.0))
        masked = collect(r * (t >= 2))
        negated = collect(trl.where(~(t < 3), r, -r))
    run(ctx, {I: ITERATIONS, T: STEPS}, backend)
    value = lambda k, s: np.full(2, s + 10 * k, np.float32)  # noqa: E731
    every = [(k, s) for k in range(ITERATIONS) for s in range(STEPS)]
    assert_values(first, {(k, s): value(k, s) * (1 if s == 0 else 10) for k, s in every})
    assert_values(inner, {(k, s): np.float32(1 < s < STEPS - 1 or k == ITERATIONS - 1) for k, s in every})
    assert_values(masked, {(k, s): value(k, s) * (s >= 2) for k, s in every})
    assert_values(negated, {(k, s): value(k, s) * (1 if s >= 3 else -1) for k, s in every})


def test_gradient_through_a_symbolic_where(backend):
    X = np.linspace(-1.0, 1.0, STEPS * 3).reshape(STEPS, 3)
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.placeholder((3,), "float64", domain=(t,), requires_grad=True)
        x[t] = trl.source(lambda p: X[p["t"]], (3,), "float64", (t,))
        trl.where(t == T - 1, x.tanh() * 3.0, x * x).backward()
        grads = collect(x.grad)
    run(ctx, {T: STEPS}, backend)
    Xt = torch.tensor(X, requires_grad=True)
    torch.cat([(Xt[:-1] * Xt[:-1]).flatten(), (Xt[-1].tanh() * 3.0)]).sum().backward()
    assert_values(grads, {(k,): Xt.grad[k].numpy() for k in range(STEPS)}, rtol=1e-12)


def test_the_advice_of_the_if_error_works():
    ctx = trl.Context(dims="t")
    (t,), _ = ctx.dims, ctx.bounds
    with ctx:
        x = trl.zeros((2,))
        with pytest.raises(trl.TimeRLError, match=r"trl\.where\(cond, a, b\)"):
            if t == 0:
                pass
        assert trl.where(t == 0, x, x + 1).domain == (t,)
