"""Gradients through every range read of SPEC.md followed by any op, against eager PyTorch, on every backend.

A range read has a dynamic length (``T - t`` for ``x[t:T]``), so every op after it works on a value whose
shape changes from point to point; its gradient must too. Each case reads two ``requires_grad`` tensors
``x`` and ``y`` through one window and applies one op family (elementwise, reduction, matmul); PyTorch
computes ``sum over t of weight[t] * op(X[rows(t)], Y[rows(t)])`` with an explicit loop.

Also here: ``requires_grad=`` on every creation function, and a fresh ``x.grad`` after a later ``backward()``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_values, collect, run

import timerl as trl

STEPS, WIDTH = 6, 3

# (name, slice at symbolic t, rows at concrete k)
WINDOWS = [
    ("0:T", lambda t, T: slice(0, T), lambda k: range(STEPS)),
    ("t:T", lambda t, T: slice(t, T), lambda k: range(k, STEPS)),
    ("0:t+1", lambda t, T: slice(0, t + 1), lambda k: range(k + 1)),
    ("t:min(t+3,T)", lambda t, T: slice(t, trl.min(t + 3, T)), lambda k: range(k, min(k + 3, STEPS))),
    ("max(0,t-3):t+1", lambda t, T: slice(trl.max(0, t - 3), t + 1), lambda k: range(max(0, k - 3), k + 1)),
]

# (name, op on the two windows a, b (shape (length, WIDTH)); ``top(v)`` is the max over dim 0 of either kind)
OPS = [
    ("elementwise", lambda a, b, top: (a * b).tanh() + a.exp() * 0.25),
    ("reduction", lambda a, b, top: (a.softmax(0) * b).sum(0) + (a * b).cumsum(0).mean(0) * top(a)),
    ("matmul", lambda a, b, top: (a.transpose(0, 1) @ b).tanh().sum() + (a @ b.transpose(0, 1)).tanh().sum()),
]


def _series(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(STEPS, WIDTH))


def _leaf(values: np.ndarray, t):
    x = trl.placeholder((WIDTH,), "float64", domain=(t,), requires_grad=True)
    x[t] = trl.source(lambda p: values[p["t"]], (WIDTH,), "float64", (t,))
    return x


@pytest.mark.parametrize("op_name,op", OPS, ids=[o[0] for o in OPS])
@pytest.mark.parametrize("name,window,rows", WINDOWS, ids=[w[0] for w in WINDOWS])
def test_window_then_op(backend, name, window, rows, op_name, op):
    X, Y, weights = _series(0), _series(1), np.random.default_rng(2).normal(size=STEPS)
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x, y = _leaf(X, t), _leaf(Y, t)
        weight = trl.source(lambda p: weights[p["t"]], (), "float64", (t,))
        out = op(x[window(t, T)], y[window(t, T)], lambda v: v.max(0))
        (out.sum() * weight).backward()
        grads = collect(x.grad), collect(y.grad)
    run(ctx, {T: STEPS}, backend)

    Xt, Yt = torch.tensor(X, requires_grad=True), torch.tensor(Y, requires_grad=True)
    total = sum(op(Xt[list(rows(k))], Yt[list(rows(k))], lambda v: v.max(0).values).sum() * weights[k]
                for k in range(STEPS))
    total.backward()
    for store, tensor in zip(grads, (Xt, Yt)):
        assert_values(store, {(k,): tensor.grad[k].numpy() for k in range(STEPS)}, rtol=1e-8, atol=1e-10)


CREATIONS = [
    ("source", lambda t: trl.source(lambda p: np.full(WIDTH, 0.3 * p["t"] - 0.5), (WIDTH,), "float64", (t,),
                                    requires_grad=True)),
    ("rand", lambda t: trl.rand((WIDTH,), "float64", (t,), requires_grad=True)),
    ("randn", lambda t: trl.randn((WIDTH,), "float64", (t,), requires_grad=True)),
    ("tensor", lambda t: trl.tensor(_series(5)[0], "float64", (t,), requires_grad=True)),
    ("full", lambda t: trl.full((WIDTH,), 0.7, "float64", (t,), requires_grad=True)),
    ("placeholder", lambda t: _leaf(_series(6), t)),
]


@pytest.mark.parametrize("name,create", CREATIONS, ids=[c[0] for c in CREATIONS])
def test_requires_grad_on_every_creation_function(backend, name, create):
    """d/dx of sum_t tanh(x[t])**2 summed over the window t:T is (t + 1) * 2 tanh(x) (1 - tanh(x)**2)."""
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = create(t)
        squared = x.tanh() * x.tanh()
        squared[t:T].sum().backward()
        values, grads = collect(x), collect(x.grad)
    run(ctx, {T: STEPS}, backend)
    expected = {}
    for (k,), value in values.items():
        v = torch.tensor(value, requires_grad=True)
        (torch.tanh(v) ** 2 * (k + 1)).sum().backward()
        expected[(k,)] = v.grad.numpy()
    assert_values(grads, expected, rtol=1e-9, atol=1e-12)


def test_integer_tensors_cannot_require_gradients():
    with trl.Context(dims="t"):
        with pytest.raises(trl.TimeRLError, match="floating-point"):
            trl.arange(4, requires_grad=True)


def test_grad_is_fresh_after_every_backward(backend):
    """x.grad sums every backward() so far: read after the second, it includes both objectives."""
    X = _series(3)
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = _leaf(X, t)
        (x * x).backward()
        first = collect(x.grad)
        x[0:T].sum().backward()
        both = collect(x.grad)
    run(ctx, {T: STEPS}, backend)
    assert_values(first, {(k,): 2 * X[k] for k in range(STEPS)}, rtol=1e-12)
    assert_values(both, {(k,): 2 * X[k] + 1 for k in range(STEPS)}, rtol=1e-12)


@pytest.mark.parametrize("name,window,rows", WINDOWS, ids=[w[0] for w in WINDOWS])
def test_backward_of_an_unreduced_window(backend, name, window, rows):
    """``y.backward()`` on a value whose shape is a window's dynamic length sums all of its elements."""
    X = _series(4)
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = _leaf(X, t)
        y = x[window(t, T)].tanh() * 3.0
        y.backward()
        grads = collect(x.grad)
    run(ctx, {T: STEPS}, backend)
    Xt = torch.tensor(X, requires_grad=True)
    points = range(STEPS) if y.domain else [0]  # x[0:T] is one tensor, not one per t
    sum((Xt[list(rows(k))].tanh() * 3.0).sum() for k in points).backward()
    assert_values(grads, {(k,): Xt.grad[k].numpy() for k in range(STEPS)}, rtol=1e-9, atol=1e-12)
