"""Symbolic backpropagation against eager PyTorch, for every domain access pattern of SPEC.md and for
recurrences (through merges) in both directions of time.

Each case feeds ``x`` (a requires_grad placeholder over ``t``, one vector per step) through one access
pattern and differentiates ``sum over t of y[t]``; PyTorch computes the same objective with an explicit loop
over the points where ``y`` can be evaluated (reads that leave ``0 <= t < T`` make a point non-evaluable,
so it contributes nothing).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_values, collect, run

import timerl as trl
from timerl.rt.autodiff import gradient_of, invert_read
from timerl.rt.functional import tanh

STEPS, WIDTH, GAMMA = 7, 3, 0.9


def series(seed: int, shape=(STEPS, WIDTH)) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=shape)


def leaf(values: np.ndarray, dim):
    """A requires_grad placeholder over ``dim`` holding ``values[k]`` at ``dim = k``."""
    x = trl.placeholder(values.shape[1:], "float64", domain=(dim,), requires_grad=True)
    x[dim] = trl.source(lambda p: values[p[dim.name]], values.shape[1:], "float64", (dim,))
    return x


def steps():
    return trl.source(lambda p: STEP_WEIGHTS[p["t"]], (WIDTH,), "float64", (t_dim(),))


STEP_WEIGHTS = series(99)


def t_dim():
    return trl.rt.context.current_context().dims[0]


# ---- point reads ------------------------------------------------------------------------------------------
# (name, index builder, index at t for PyTorch: an int, or None where the read leaves the domain)
POINTS = [
    ("t", lambda t, T: t, lambda k: k),
    ("t+1", lambda t, T: t + 1, lambda k: k + 1),
    ("t-2", lambda t, T: t - 2, lambda k: k - 2),
    ("0", lambda t, T: 0, lambda k: 0),
    ("T-1", lambda t, T: T - 1, lambda k: STEPS - 1),
    ("min(t+2,T-1)", lambda t, T: trl.min(t + 2, T - 1), lambda k: min(k + 2, STEPS - 1)),
    ("max(t-2,0)", lambda t, T: trl.max(t - 2, 0), lambda k: max(k - 2, 0)),
    ("t%3", lambda t, T: t % 3, lambda k: k % 3),
    ("t//2", lambda t, T: t // 2, lambda k: k // 2),
    ("T-1-t", lambda t, T: T - 1 - t, lambda k: STEPS - 1 - k),
]

# ---- range reads: (name, slice builder, indices at t for PyTorch) --------------------------------------------
WINDOWS = [
    ("0:T", lambda t, T: slice(0, T), lambda k: range(STEPS)),
    ("2:5", lambda t, T: slice(2, 5), lambda k: range(2, 5)),
    ("t:T", lambda t, T: slice(t, T), lambda k: range(k, STEPS)),
    ("0:t+1", lambda t, T: slice(0, t + 1), lambda k: range(k + 1)),
    ("t:min(t+3,T)", lambda t, T: slice(t, trl.min(t + 3, T)), lambda k: range(k, min(k + 3, STEPS))),
    ("max(0,t-3):t+1", lambda t, T: slice(trl.max(0, t - 3), t + 1), lambda k: range(max(0, k - 3), k + 1)),
]


def check_gradient(backend, build, objective_terms, inputs=1):
    """``build(xs, t, T)`` -> y over (t,); ``objective_terms(Xs, k)`` -> torch tensor or None (not evaluable)."""
    values = [series(seed) for seed in range(inputs)]
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        xs = [leaf(v, t) for v in values]
        y = build(xs, t, T)
        y.backward()
        stores = [collect(x.grad) for x in xs]
    run(ctx, {T: STEPS}, backend)
    tensors = [torch.tensor(v, requires_grad=True) for v in values]
    total = sum(term.sum() for k in range(STEPS) if (term := objective_terms(tensors, k)) is not None)
    total.backward()
    for store, tensor in zip(stores, tensors):
        assert_values(store, {(k,): tensor.grad[k].numpy() for k in range(STEPS)}, rtol=1e-9, atol=1e-10)
    return ctx


@pytest.mark.parametrize("name,index,torch_index", POINTS, ids=[p[0] for p in POINTS])
def test_point_reads(backend, name, index, torch_index):
    weights = torch.tensor(STEP_WEIGHTS)

    def build(xs, t, T):
        return tanh(xs[0][index(t, T)]) * steps()

    def terms(X, k):
        at = torch_index(k)
        return None if not 0 <= at < STEPS else torch.tanh(X[0][at]) * weights[k]

    check_gradient(backend, build, terms)


@pytest.mark.parametrize("name,window,torch_window", WINDOWS, ids=[w[0] for w in WINDOWS])
def test_window_reads(backend, name, window, torch_window):
    """A discounted sum weighs each element by its position in the window, so a wrong offset shows."""
    weights = torch.tensor(STEP_WEIGHTS)

    def build(xs, t, T):
        return tanh(xs[0][window(t, T)].discounted_sum(GAMMA)) * steps()

    def terms(X, k):
        rows = list(torch_window(k))
        discounts = torch.tensor([GAMMA ** j for j in range(len(rows))], dtype=torch.float64)
        return torch.tanh((discounts[:, None] * X[0][rows]).sum(0)) * weights[k]

    check_gradient(backend, build, terms)


def test_window_mean_and_max(backend):
    """Dynamic-length windows through mean (a symbolic element count) and max."""
    def build(xs, t, T):
        return xs[0][t:T].mean(0) * xs[0][trl.max(0, t - 2):t + 1].max(0)

    def terms(X, k):
        return X[0][k:].mean(0) * X[0][max(0, k - 2):k + 1].max(0).values

    check_gradient(backend, build, terms)


def test_two_inputs_and_shared_reads(backend):
    """One tensor read through several patterns in one op, a second one through a shift."""
    def build(xs, t, T):
        x, z = xs
        return x * x[0] + z[t + 1] * x[t:T].sum(0)

    def terms(X, k):
        x, z = X
        if k + 1 >= STEPS:
            return None
        return x[k] * x[0] + z[k + 1] * x[k:].sum(0)

    check_gradient(backend, build, terms, inputs=2)


def test_rnn_through_time(backend):
    """h[0] = tanh(x[0]); h[t+1] = tanh(W @ h[t] + x[t+1]): the gradient is a recurrence backwards in time."""
    W0 = series(7, (WIDTH, WIDTH)) * 0.5
    X = series(3)
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        W = trl.tensor(W0, dtype="float64", requires_grad=True)
        x = leaf(X, t)
        h = trl.placeholder((WIDTH,), "float64", domain=(t,))
        h[0] = tanh(x[0])
        h[t + 1] = tanh(W @ h[t] + x[t + 1])
        (h * steps()).backward()
        grad_W, grad_x = collect(W.grad), collect(x.grad)
    run(ctx, {T: STEPS}, backend)
    Wt, Xt = torch.tensor(W0, requires_grad=True), torch.tensor(X, requires_grad=True)
    state, total = torch.tanh(Xt[0]), 0
    for k in range(STEPS):
        if k:
            state = torch.tanh(Wt @ state + Xt[k])
        total = total + (state * torch.tensor(STEP_WEIGHTS[k])).sum()
    total.backward()
    assert_values(grad_W, {(): Wt.grad.numpy()}, rtol=1e-9, atol=1e-10)
    assert_values(grad_x, {(k,): Xt.grad[k].numpy() for k in range(STEPS)}, rtol=1e-9, atol=1e-10)


def test_cumulative_sum_recurrence(backend):
    """s[0] = x[0]; s[t+1] = s[t] + x[t+1]: x.grad[t] sums the weights of every later step."""
    def build(xs, t, T):
        s = trl.placeholder((WIDTH,), "float64", domain=(t,))
        s[0] = xs[0][0]
        s[t + 1] = s[t] + xs[0][t + 1]
        return s * steps() * s

    def terms(X, k):
        s = X[0][:k + 1].sum(0)
        return s * torch.tensor(STEP_WEIGHTS[k]) * s

    check_gradient(backend, build, terms)


def test_anticausal_recurrence(backend):
    """The SPEC's return: g[T-1] = r[T-1]; g[t-1] = r[t-1] + 0.5 * g[t]; gradients then flow forward."""
    def build(xs, t, T):
        g = trl.placeholder((WIDTH,), "float64", domain=(t,))
        g[T - 1] = xs[0][T - 1]
        g[t - 1] = xs[0][t - 1] + g[t] * 0.5
        return tanh(g) * steps()

    def terms(X, k):
        discounts = torch.tensor([0.5 ** j for j in range(STEPS - k)], dtype=torch.float64)
        return torch.tanh((discounts[:, None] * X[0][k:]).sum(0)) * torch.tensor(STEP_WEIGHTS[k])

    check_gradient(backend, build, terms)


def test_branch_without_the_dimension(backend):
    """o[0] = x[0] * 2; o[t+1] = w (no t): w's gradient sums the branch's points only (a merge of the same
    conditions passes the gradient where the branch holds, zeros elsewhere)."""
    W0 = series(11, (WIDTH,))
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        w = trl.tensor(W0, dtype="float64", requires_grad=True)
        x = leaf(series(0), t)
        o = trl.placeholder((WIDTH,), "float64", domain=(t,))
        o[0] = x[0] * 2.0
        o[t + 1] = tanh(w)
        (o * steps()).backward()
        grad_w, grad_x = collect(w.grad), collect(x.grad)
    run(ctx, {T: STEPS}, backend)
    slope = 1 - np.tanh(W0) ** 2
    assert_values(grad_w, {(): slope * STEP_WEIGHTS[1:].sum(0)}, rtol=1e-9, atol=1e-10)
    want_x = {(k,): (2.0 * STEP_WEIGHTS[0] if k == 0 else np.zeros(WIDTH)) for k in range(STEPS)}
    assert_values(grad_x, want_x, rtol=1e-9, atol=1e-10)


def test_detach_blocks(backend):
    def build(xs, t, T):
        x = xs[0]
        return x * x.detach() * 3.0

    check_gradient(backend, build, lambda X, k: X[0][k] * X[0][k].detach() * 3.0)


def test_when_block_limits_the_objective(backend):
    """y exists only at even t, so only those points are in the objective."""
    def build(xs, t, T):
        with trl.rt.context.current_context().when(t % 2 == 0):
            return tanh(xs[0][t + 1]) * steps()

    def terms(X, k):
        return torch.tanh(X[0][k + 1]) * torch.tensor(STEP_WEIGHTS[k]) if k % 2 == 0 and k + 1 < STEPS else None

    check_gradient(backend, build, terms)


def test_param_gradient_sums_over_steps(backend):
    """A per-iteration parameter read at every step: its gradient at i sums over t."""
    ctx = trl.Context(dims="i t")
    (i, t), (I, T) = ctx.dims, ctx.bounds
    X = series(5, (2, STEPS, WIDTH))
    with ctx:
        w = trl.param(np.ones(WIDTH), dtype="float64")
        w[i + 1] = w.detach() * 2.0
        x = trl.source(lambda p: X[p["i"], p["t"]], (WIDTH,), "float64", (i, t))
        (tanh(w * x)).backward()
        assert w.grad.domain == (i,) and w.grad.shape == (WIDTH,) and w.grad.dtype == "float64"
        store = collect(w.grad)
    run(ctx, {I: 2, T: STEPS}, backend)
    want = {}
    for k in range(2):
        wt = torch.tensor(np.ones(WIDTH) * 2.0 ** k, requires_grad=True)
        torch.tanh(wt * torch.tensor(X[k])).sum().backward()
        want[(k,)] = wt.grad.numpy()
    assert_values(store, want, rtol=1e-9, atol=1e-10)


def test_gradient_graph_is_finite_and_marked():
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    with ctx:
        x = leaf(series(0), t)
        h = trl.placeholder((WIDTH,), "float64", domain=(t,))
        h[0] = x[0]
        h[t + 1] = tanh(h[t] + x[t + 1])
        before = len(ctx.nodes)
        h.backward()
        after = len(ctx.nodes)
        grad = x.grad
    assert after - before < 40
    assert all(node.gradient_of is not None for node in ctx.nodes[before:after])
    assert grad.node.op == "grad_accumulate" and grad.node.gradient_of == x.node.id
    assert gradient_of(h).node.gradient_of == h.node.id


def test_inverse_of_future_window_matches_paper():
    """Paper §5.1: [t:T] inverts into [0:t+1]."""
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        r = trl.source(lambda p: 1.0, domain=(t,))
        g = r[t:T].sum()
    edge = g.node.inputs[0]
    [(condition, index)] = invert_read(edge, g.node, r.node, {t: T})
    assert condition is trl.symbolic.TRUE
    assert str(index[0].start) == "0" and index[0].stop.same(trl.min(t + 1, T))


def test_errors():
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    with ctx:
        x = trl.source(lambda p: 1.0, domain=(t,))
        with pytest.raises(trl.TimeRLError, match="requires_grad"):
            (x * 2.0).backward()
        w = trl.tensor(1.0, requires_grad=True)
        with pytest.raises(trl.TimeRLError, match="backward"):
            _ = w.grad
        with pytest.raises(trl.TimeRLError, match="floating-point"):
            (x > 0).backward()
        y = trl.placeholder((), "float32", domain=(t,), requires_grad=True)
        y[t] = x
        with pytest.raises(trl.TimeRLError, match="cannot differentiate the read"):
            (y[(3 * t) % 5] * w).backward()  # affine (t*t is now refused at construction) but not invertible
        with pytest.raises(trl.DomainError, match="affine"):
            y[(t * t) % 5]
