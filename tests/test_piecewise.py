"""Piecewise definitions: forward and backward recurrences, several branches, branches under `ctx.when`."""

from __future__ import annotations

import numpy as np
from conftest import assert_values, collect, points, run

import timerl as trl


def rewards(step: int) -> float:
    return float((3 * step + 1) % 5) - 1.5


def test_forward_recurrence_is_a_cumulative_sum(backend):
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    with ctx:
        x = trl.source(lambda p: rewards(p["t"]), domain=(t,))
        s = trl.placeholder((), "float32", domain=(t,))
        s[0] = x[0]
        s[t + 1] = s[t] + x[t + 1]
        out = collect(s)
    run(ctx, {T: 12}, backend)
    assert_values(out, {(k,): np.cumsum([rewards(j) for j in range(12)])[k] for k in range(12)})


def test_backward_recurrence_is_the_discounted_return(backend):
    gamma, steps = 0.9, 10
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    with ctx:
        r = trl.source(lambda p: rewards(p["t"]), domain=(t,))
        g = trl.placeholder((), "float32", domain=(t,))
        g[T - 1] = r[T - 1]
        g[t - 1] = r[t - 1] + gamma * g[t]
        by_window = r[t:T].discounted_sum(gamma)
        outs = collect(g), collect(by_window)
    run(ctx, {T: steps}, backend)
    expected, running = {}, 0.0
    for k in reversed(range(steps)):
        running = rewards(k) + gamma * running
        expected[(k,)] = running
    assert_values(outs[0], expected, rtol=1e-5)
    assert_values(outs[1], expected, rtol=1e-5)


def test_two_initial_branches_fibonacci(backend):
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    with ctx:
        f = trl.placeholder((), "int64", domain=(t,))
        f[0] = 0
        f[1] = 1
        f[t + 2] = f[t] + f[t + 1]
        out = collect(f)
    run(ctx, {T: 15}, backend)
    fib = [0, 1]
    while len(fib) < 15:
        fib.append(fib[-1] + fib[-2])
    assert_values(out, {(k,): fib[k] for k in range(15)})
    assert out[(14,)].dtype == np.int64


def test_recurrence_with_vector_state_and_range_read(backend):
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.array([rewards(p["t"]), 1.0]), shape=(2,), domain=(t,))
        h = trl.placeholder((2,), "float32", domain=(t,))
        h[0] = trl.zeros((2,))
        h[t + 1] = (h[t] * 0.5 + x[t]).tanh()
        history = h[0:t + 1].mean(dim=0)
        outs = collect(h), collect(history)
    run(ctx, {T: 8}, backend)
    states = [np.zeros(2, np.float32)]
    for k in range(7):
        states.append(np.tanh(states[-1] * 0.5 + np.array([rewards(k), 1.0], np.float32)))
    assert_values(outs[0], {(k,): states[k] for k in range(8)})
    assert_values(outs[1], {(k,): np.mean(states[:k + 1], axis=0) for k in range(8)})


def test_training_loop_shape_two_dimensions(backend):
    """w[i+1] = w[i] - lr * mean over an inner loop over t of something that depends on w[i]."""
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        w = trl.placeholder((2,), "float32", domain=(i,))
        w[0] = trl.tensor([1.0, -1.0])
        x = trl.source(lambda p: np.array([p["t"], p["i"] + 1.0]), shape=(2,), domain=(i, t))
        loss_grad = (w * x)                   # (i, t)
        w[i + 1] = w[i] - 0.1 * loss_grad[i, 0:T].mean(dim=0)
        outs = collect(w), collect(loss_grad)
    run(ctx, {I: 4, T: 3}, backend)
    weights = [np.array([1.0, -1.0], np.float32)]
    for k in range(3):
        xs = np.array([[c, k + 1.0] for c in range(3)], np.float32)
        weights.append(weights[-1] - np.float32(0.1) * (weights[-1] * xs).mean(axis=0))
    assert_values(outs[0], {(k,): weights[k] for k in range(4)}, rtol=1e-5)
    assert_values(outs[1], {(k, c): weights[k] * np.array([c, k + 1.0], np.float32) for k, c in points(4, 3)})


def test_two_dimensional_recurrence(backend):
    """Pascal's triangle: p[i+1, t+1] = p[i, t] + p[i, t+1] with boundary branches."""
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        p = trl.placeholder((), "int64", domain=(i, t))
        p[0, t] = trl.source(lambda q: 1 if q["t"] == 0 else 0, dtype="int64", domain=(t,))
        p[i + 1, 0] = p[i, 0]
        p[i + 1, t + 1] = p[i, t] + p[i, t + 1]
        out = collect(p)
    run(ctx, {I: 6, T: 6}, backend)
    from math import comb

    assert_values(out, {(a, c): comb(a, c) for a, c in points(6, 6)})


def test_branches_under_when_split_the_domain(backend):
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    with ctx:
        x = trl.source(lambda p: float(p["t"]), domain=(t,))
        o = trl.placeholder((), "float32", domain=(t,))
        with ctx.when(t % 2 == 0):
            o[t] = x * 10.0
        with ctx.when(t % 2 == 1):
            o[t] = -x
        out = collect(o)
    run(ctx, {T: 6}, backend)
    assert_values(out, {(k,): 10.0 * k if k % 2 == 0 else -float(k) for k in range(6)})


def test_shifted_branch_under_when(backend):
    """A when-condition on a shifted branch is written in the right-hand side's coordinates."""
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    with ctx:
        s = trl.placeholder((), "float32", domain=(t,))
        s[0] = 1.0
        with ctx.when(t < 3):                 # s[t + 1] for t < 3: defines s[1], s[2], s[3]
            s[t + 1] = s[t] * 2.0
        with ctx.when(t >= 3):
            s[t + 1] = s[t] + 1.0
        out = collect(s)
    run(ctx, {T: 7}, backend)
    assert_values(out, {(k,): v for k, v in enumerate([1.0, 2.0, 4.0, 8.0, 9.0, 10.0, 11.0])})


def test_param_is_a_placeholder_over_iterations(backend):
    ctx = trl.Context(dims="i")
    (i,) = ctx.dims
    (I,) = ctx.bounds
    with ctx:
        w = trl.param(np.array([2.0, 4.0], dtype=np.float32))
        assert w.requires_grad and w.domain == (i,) and w.shape == (2,)
        w[i + 1] = w[i] * 0.5
        out = collect(w)
    run(ctx, {I: 4}, backend)
    assert_values(out, {(k,): np.array([2.0, 4.0]) * 0.5 ** k for k in range(4)})


def test_rhs_never_read_outside_its_target(backend):
    """g[t-1] = r[t-1] + g[t] must never read r at -1 (the source would raise)."""
    seen = []

    def reward(point):
        assert 0 <= point["t"] < 5
        seen.append(point["t"])
        return 1.0

    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    with ctx:
        r = trl.source(reward, domain=(t,))
        g = trl.placeholder((), "float32", domain=(t,))
        g[T - 1] = r[T - 1]
        g[t - 1] = r[t - 1] + g[t]
        out = collect(g)
    run(ctx, {T: 5}, backend)
    assert_values(out, {(k,): 5.0 - k for k in range(5)})
    assert sorted(set(seen)) == list(range(5))


def test_state_carried_for_a_shorter_group_runs_inside_it(backend):
    # the placeholder runs on t < T, its only reader on t < T - 1: the placeholder becomes a member of the
    # reader's group (no statement that only loads and stores it), and its last point, read by nobody, is dropped
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.full(3, rewards(p["t"]), np.float32), shape=(3,), domain=(t,))
        s = trl.placeholder((3,), "float32", domain=(t,))
        s[0] = trl.tensor(np.array([1.0, 2.0, 3.0], np.float32))
        with ctx.when(t <= T - 2):
            nxt = s[t] * 0.5 + x[t]
            s[t + 1] = nxt
            out = collect(nxt)
    exe = ctx.compile(bounds={T: 9}, backend=backend)
    exe.execute()
    state, expected = np.array([1.0, 2.0, 3.0]), {}
    for k in range(8):
        state = state * 0.5 + rewards(k)
        expected[(k,)] = state
    assert_values(out, expected)
    if backend != "reference":  # the interpreter runs op by op, without groups
        group = next(g for g in exe.groups.values() if s.node.id in g.members)
        # no groups of several statements without fusion; the placeholder stays apart without state_fusion
        assert (nxt.node.id in group.members) == (exe.options.fusion and exe.options.state_fusion)
        assert exe.stats["leaked_points"] == 0


def test_bool_assigned_to_an_int_placeholder_is_cast(backend):
    # as PyTorch's `x[...] = mask` does: True is 1, False 0, in the placeholder's dtype (SPEC: PyTorch semantics)
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    with ctx:
        s = trl.placeholder((3,), "int32", domain=(t,))
        s[0] = trl.tensor(np.array([1, 2, 3], np.int32))
        s[t + 1] = s[t] > 1
        out = collect(s)
    run(ctx, {T: 3}, backend)
    assert_values(out, {(0,): [1, 2, 3], (1,): [0, 1, 1], (2,): [0, 0, 0]})
    assert all(v.dtype == np.int32 for v in out.values())
