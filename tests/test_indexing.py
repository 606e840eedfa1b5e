"""Every form of domain index (points, constants, min/max, mod/floordiv, ranges, windows) and x.spatial[...]."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_values, collect, points, run

import timerl as trl


def value_at(step: int) -> np.ndarray:
    return np.array([step, step * step % 7], dtype=np.float32)


def time_program():
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    ctx.__enter__()
    x = trl.source(lambda p: value_at(p["t"]), shape=(2,), domain=(t,))
    return ctx, t, T, x


def run_time(ctx, T, backend, steps, result):
    out = collect(result)
    ctx.__exit__(None, None, None)
    run(ctx, {T: steps}, backend)
    return out


def X(steps):
    return np.stack([value_at(k) for k in range(steps)])


POINT_FORMS = {
    "t": (lambda t, T: t, lambda k, n: k),
    "T-1-t": (lambda t, T: T - 1 - t, lambda k, n: n - 1 - k),
    "min(t+5,T-1)": (lambda t, T: trl.min(t + 5, T - 1), lambda k, n: min(k + 5, n - 1)),
    "max(t-3,0)": (lambda t, T: trl.max(t - 3, 0), lambda k, n: max(k - 3, 0)),
    "t%8": (lambda t, T: t % 8, lambda k, n: k % 8),
    "t//2": (lambda t, T: t // 2, lambda k, n: k // 2),
    "(t+3)%4": (lambda t, T: (t + 3) % 4, lambda k, n: (k + 3) % 4),
    "T-1-t//3": (lambda t, T: T - 1 - t // 3, lambda k, n: n - 1 - k // 3),
    "2*t//3": (lambda t, T: 2 * t // 3, lambda k, n: 2 * k // 3),
}


@pytest.mark.parametrize("form", sorted(POINT_FORMS))
def test_point_index(backend, form):
    build, where = POINT_FORMS[form]
    steps = 20
    ctx, t, T, x = time_program()
    y = x[build(t, T)]
    assert y.domain == (t,) and y.shape == (2,)
    out = run_time(ctx, T, backend, steps, y)
    assert_values(out, {(k,): value_at(where(k, steps)) for k in range(steps)})


@pytest.mark.parametrize("index", ["0", "T-1", "3"])
def test_constant_index_drops_the_dimension(backend, index):
    steps = 6
    ctx, _t, T, x = time_program()
    position = {"0": 0, "T-1": T - 1, "3": 3}[index]
    y = x[position] * 1.0
    assert y.domain == ()
    out = run_time(ctx, T, backend, steps, y)
    assert_values(out, {(): value_at({"0": 0, "T-1": steps - 1, "3": 3}[index])})


RANGE_FORMS = {
    "0:T": (lambda t, T: x_slice(0, T), lambda k, n: (0, n)),
    "t:T": (lambda t, T: x_slice(t, T), lambda k, n: (k, n)),
    "0:t+1": (lambda t, T: x_slice(0, t + 1), lambda k, n: (0, k + 1)),
    "t:min(t+3,T)": (lambda t, T: x_slice(t, trl.min(t + 3, T)), lambda k, n: (k, min(k + 3, n))),
    "max(0,t-3):t+1": (lambda t, T: x_slice(trl.max(0, t - 3), t + 1), lambda k, n: (max(0, k - 3), k + 1)),
    "t//2:t+1": (lambda t, T: x_slice(t // 2, t + 1), lambda k, n: (k // 2, k + 1)),
    ":": (lambda t, T: slice(None), lambda k, n: (0, n)),
    "2:": (lambda t, T: slice(2, None), lambda k, n: (2, n)),
}


def x_slice(start, stop):
    return slice(start, stop)


@pytest.mark.parametrize("form", sorted(RANGE_FORMS))
@pytest.mark.parametrize("reduce", ["identity", "sum", "discounted_sum"])
def test_range_index(backend, form, reduce):
    build, where = RANGE_FORMS[form]
    steps = 7
    ctx, t, T, x = time_program()
    window = x[build(t, T)]
    assert window.shape[1:] == (2,)
    result = {"identity": window * 1.0, "sum": window.sum(dim=0),
              "discounted_sum": window.discounted_sum(0.9)}[reduce]
    out = run_time(ctx, T, backend, steps, result)
    expected = {}
    for k in range(steps):
        start, stop = where(k, steps)
        rows = X(steps)[start:stop]
        if reduce == "sum":
            rows = rows.sum(axis=0)
        elif reduce == "discounted_sum":
            rows = sum(np.float32(0.9) ** j * rows[j] for j in range(len(rows)))
        expected[() if result.domain == () else (k,)] = rows
    assert_values(out, expected)


def test_range_length_is_symbolic():
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    with ctx:
        x = trl.zeros((2,), domain=(t,))
        assert x[0:T].shape == (T, 2) and x[0:T].domain == ()
        assert x[t:T].shape[0].same(T - t) and x[t:T].domain == (t,)
        assert x[0:t + 1].shape[0].same(t + 1)
        assert x[2:5].shape == (3, 2)


def test_two_dimensions_point_and_range(backend):
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        x = trl.source(lambda p: 10.0 * p["i"] + p["t"], domain=(i, t))
        last = x[i, T - 1]              # i only
        first_row = x[0]                # x[0, t]: t only
        block = x[0:I, t:T]             # two ranges, in index order
        past = x[i, 0:t + 1].sum()      # (i, t)
        outs = [collect(v) for v in (last, first_row, block, past)]
    assert last.domain == (i,) and first_row.domain == (t,) and block.domain == (t,) and past.domain == (i, t)
    n_i, n_t = 3, 4
    run(ctx, {I: n_i, T: n_t}, backend)
    grid = np.array([[10.0 * a + c for c in range(n_t)] for a in range(n_i)])
    assert_values(outs[0], {(a,): grid[a, -1] for a in range(n_i)})
    assert_values(outs[1], {(c,): grid[0, c] for c in range(n_t)})
    assert_values(outs[2], {(c,): grid[:, c:] for c in range(n_t)})
    assert_values(outs[3], {(a, c): grid[a, :c + 1].sum() for a, c in points(n_i, n_t)})


def test_range_of_a_transformed_view(backend):
    """A range over a view that is already shifted (x[T-1-t]) reads the reversed sequence."""
    steps = 5
    ctx, t, T, x = time_program()
    reversed_x = x[T - 1 - t]
    window = reversed_x[0:t + 1]
    out = run_time(ctx, T, backend, steps, window * 1.0)
    assert_values(out, {(k,): X(steps)[::-1][:k + 1] for k in range(steps)})


def test_range_over_computed_tensor(backend):
    steps = 6
    ctx, t, T, x = time_program()
    y = (x * 2.0).sum()
    out = run_time(ctx, T, backend, steps, y[t:T].sum() - y[0:t + 1].mean())
    ys = X(steps).sum(axis=1) * 2
    assert_values(out, {(k,): ys[k:].sum() - ys[:k + 1].mean() for k in range(steps)})


def test_shifted_read_inside_when(backend):
    steps = 6
    ctx, t, T, x = time_program()
    with ctx.when(t < T - 1):
        difference = x[t + 1] - x[t]
        out = run_time(ctx, T, backend, steps, difference)
    assert_values(out, {(k,): value_at(k + 1) - value_at(k) for k in range(steps - 1)})


def test_sum_over_other_dimension(backend):
    """x[0:I] of an (i, t) tensor inside a t-only computation: a reduction across iterations."""
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.array([p["i"], p["t"]], dtype=np.float32), shape=(2,), domain=(i, t))
        over_i = x[0:I].sum(dim=0)
        out = collect(over_i)
    assert over_i.domain == (t,)
    run(ctx, {I: 4, T: 3}, backend)
    assert_values(out, {(c,): [6.0, 4.0 * c] for c in range(3)})


def test_spatial_indexing_keeps_domain(backend):
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.arange(12, dtype=np.float32).reshape(3, 4) + p["t"], shape=(3, 4),
                       domain=(t,))
        picked = x.spatial[1:, None, 2]
        window = x[0:t + 1].spatial[:, 0, -1]
        outs = collect(picked), collect(window)
    assert picked.domain == (t,) and picked.shape == (2, 1)
    run(ctx, {T: 3}, backend)
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert_values(outs[0], {(k,): (base + k)[1:, None, 2] for k in range(3)})
    assert_values(outs[1], {(k,): np.array([(base + j)[0, -1] for j in range(k + 1)]) for k in range(3)})


def test_missing_trailing_index_is_the_dimension(backend):
    ctx = trl.Context(dims="b t")
    b, t = ctx.dims
    B, T = ctx.bounds
    with ctx:
        x = trl.source(lambda p: 10.0 * p["b"] + p["t"], domain=(b, t))
        first = x[0]
        same = x[b]
        outs = collect(first), collect(same + 0.0)
    assert first.domain == (t,) and same.domain == (b, t)
    run(ctx, {B: 2, T: 3}, backend)
    assert_values(outs[0], {(c,): float(c) for c in range(3)})
    assert_values(outs[1], {(a, c): 10.0 * a + c for a, c in points(2, 3)})


WINDOW_OPS = {
    "softmax": (lambda w: w.softmax(dim=0), lambda a: np.exp(a) / np.exp(a).sum(axis=0)),
    "cumsum": (lambda w: w.cumsum(dim=0), lambda a: np.cumsum(a, axis=0)),
    "discounted_cum_sum": (lambda w: w.discounted_cum_sum(0.5),
                           lambda a: np.stack([sum(0.5 ** (j - k) * a[j] for j in range(k, len(a)))
                                               for k in range(len(a))])),
    "argmax": (lambda w: w.argmax(dim=0), lambda a: a.argmax(axis=0)),
    "max": (lambda w: w.max(dim=0), lambda a: a.max(axis=0)),
    "matmul": (lambda w: w @ trl.tensor([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0]]),
               lambda a: a @ np.array([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0]], np.float32)),
    "flip": (lambda w: w.flip(0), lambda a: a[::-1]),
    "transpose": (lambda w: w.transpose(0, 1), lambda a: a.T),
    "square_sum": (lambda w: (w * w).sum(dim=0), lambda a: (a * a).sum(axis=0)),
    "expand": (lambda w: w.sum(dim=1).unsqueeze(1).expand(-1, 3), lambda a: np.repeat(a.sum(1)[:, None], 3, 1)),
    "spatial": (lambda w: w.spatial[:, 1], lambda a: a[:, 1]),
}


@pytest.mark.parametrize("name", sorted(WINDOW_OPS))
@pytest.mark.parametrize("future", [True, False], ids=["t:T", "0:t+1"])
def test_ops_on_windows_of_dynamic_length(backend, name, future):
    build, expected = WINDOW_OPS[name]
    steps = 4
    ctx, t, T, x = time_program()
    window = x[t:T] if future else x[0:t + 1]
    out = run_time(ctx, T, backend, steps, build(window))
    rows = X(steps)
    assert_values(out, {(k,): expected(rows[k:] if future else rows[:k + 1]) for k in range(steps)}, rtol=1e-5)


def test_point_of_a_window_view(backend):
    """``x[t:T]`` read at t = 0 is ``x[0:T]``; at ``T - 1`` it is the last row only."""
    steps = 4
    ctx, t, T, x = time_program()
    window = x[t:T]
    whole, last = window[0], window[T - 1]
    assert whole.domain == () and whole.shape == (T, 2) and last.shape == (1, 2)
    outs = collect(whole * 1.0), collect(last * 1.0)
    ctx.__exit__(None, None, None)
    run(ctx, {T: steps}, backend)
    assert_values(outs[0], {(): X(steps)})
    assert_values(outs[1], {(): X(steps)[-1:]})


def test_numpy_integers_index_like_ints(backend):
    steps = 5
    ctx, _t, T, x = time_program()
    picked = x[np.int64(3)].spatial[np.int64(1)]
    out = run_time(ctx, T, backend, steps, picked * 1.0)
    assert_values(out, {(): value_at(3)[1]})
