"""Gradient nodes whose contributions are always there become plain sums (timerl.pdg.contributions): the
backward pass of a step with no shifted reads loses its gradient nodes, values stay hand-derived on every
backend; a contribution whose consumer cannot be evaluated at some points keeps its node (and its zeros)."""

from __future__ import annotations

import numpy as np

import timerl as trl
from conftest import assert_values, collect, run
from timerl.compile import optimize_pdg

STEPS = 5
X = np.linspace(-1.0, 1.0, STEPS * 3).reshape(STEPS, 3)
W = np.cos(np.arange(STEPS * 3, dtype=np.float64)).reshape(STEPS, 3)


def _gradient_nodes(ctx, bounds) -> int:
    return sum(n.op == "grad_accumulate" for n in optimize_pdg(ctx.graph(), bounds, trl.CompileOptions(contributions=True)).nodes)


def test_contributions_at_the_own_point_are_summed_without_a_gradient_node(backend):
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: X[p["t"]], (3,), "float64", (t,), requires_grad=True)
        w = trl.source(lambda p: W[p["t"]], (3,), "float64", (t,))
        y = (x * w).tanh() + x * x  # x has two consumers at its own point: the sum of two contributions
        y.sum().backward()
        grad = collect(x.grad)
    assert _gradient_nodes(ctx, {T: STEPS}) == 0
    run(ctx, {T: STEPS}, backend)
    expected = (1.0 - np.tanh(X * W) ** 2) * W + 2.0 * X
    assert_values(grad, {(k,): expected[k] for k in range(STEPS)}, rtol=1e-9, atol=1e-12)


def test_a_consumer_not_evaluable_everywhere_keeps_its_mask(backend):
    """``y[t] = x[t] * w[t - 1]`` cannot be evaluated at ``t = 0``: there it contributes nothing to x.grad."""
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: X[p["t"]], (3,), "float64", (t,), requires_grad=True)
        w = trl.source(lambda p: W[p["t"]], (3,), "float64", (t,))
        y = x * w[t - 1]
        y.backward()
        grad = collect(x.grad)
    assert _gradient_nodes(ctx, {T: STEPS}) == 2  # y's (its seed is masked by y too) and x's
    run(ctx, {T: STEPS}, backend)
    assert_values(grad, {(k,): W[k - 1] if k else np.zeros(3) for k in range(STEPS)}, rtol=1e-12)
