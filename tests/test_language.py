"""The SPEC's examples, domains of 1-3 dimensions, domain union, `ctx.when`, random draws, long recurrences."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_values, collect, points, run

import timerl as trl
from benchmarks import long_recurrence


def test_spec_first_example(backend):
    ctx = trl.Context(dims="b i t")
    _b, _i, t = ctx.dims
    _B, _I, T = ctx.bounds
    with ctx:
        r = trl.source(lambda p: float(p["t"]), shape=(), dtype="float32", domain=(t,))
        g = r[t:T].sum()
        out = collect(g)
    assert g.domain == (t,) and g.shape == () and g.dtype == "float32"
    run(ctx, {T: 10}, backend)
    assert_values(out, {(k,): float(sum(range(k, 10))) for k in range(10)})


def test_spec_piecewise_example(backend):
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        start = trl.source(lambda p: np.full(4, p["i"] + 1.0), shape=(4,), domain=(i,))
        noise = trl.rand((4,), domain=(i, t))
        o = trl.placeholder(shape=(4,), dtype="float32", domain=(i, t))
        o[i, 0] = start
        o[i, t + 1] = o[i, t] * 0.5 + noise
        noise_out, o_out = collect(noise), collect(o)
    run(ctx, {I: 3, T: 6}, backend)
    # noise is read at t = 0..T-2 only (by the branch at t + 1); the sink on noise reads every t
    expected = {}
    for k in range(3):
        value = np.full(4, k + 1.0, dtype=np.float32)
        for step in range(6):
            expected[(k, step)] = value
            value = value * np.float32(0.5) + noise_out[(k, step)]
    assert_values(o_out, expected)
    assert all(0.0 <= v.min() and v.max() < 1.0 for v in noise_out.values())


def test_spec_when_example(backend):
    ctx = trl.Context(dims="i")
    (i,) = ctx.dims
    (I,) = ctx.bounds
    calls = []
    with ctx:
        w = trl.placeholder((), "float32", domain=(i,))
        w[0] = 1.0
        w[i + 1] = w[i] + 1.0
        with ctx.when((i + 1) % 10 == 0):
            w.sink(lambda p, v: calls.append((p["i"], float(np.asarray(v)))))
    run(ctx, {I: 35}, backend)
    assert sorted(calls) == [(9, 10.0), (19, 20.0), (29, 30.0)]


def test_when_conditions_combine(backend):
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        x = trl.source(lambda p: p["i"] * 10.0 + p["t"], domain=(i, t))
        with ctx.when((t >= 2) & ~(i == 1)):
            out = collect(x * 1.0)
    run(ctx, {I: 3, T: 4}, backend)
    assert_values(out, {(a, c): a * 10.0 + c for a, c in points(3, 4) if c >= 2 and a != 1})


def test_plain_tensors_without_domain(backend):
    ctx = trl.Context(dims="t")
    with ctx:
        x = trl.tensor([1.0, 2.0, 3.0])
        y = (x * 2.0 + trl.ones((3,))).sum()
        z = trl.arange(4) + trl.full((4,), 2, dtype="int64")
        y_out, z_out = collect(y), collect(z)
    assert x.domain == () and y.domain == ()
    run(ctx, {}, backend)
    assert_values(y_out, {(): 15.0})
    assert_values(z_out, {(): np.arange(4) + 2})
    assert z_out[()].dtype == np.int64


def test_three_dimensional_domain(backend):
    ctx = trl.Context(dims="b i t")
    b, i, t = ctx.dims
    B, I, T = ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.array([p["b"], p["i"], p["t"]], dtype=np.float32), shape=(3,),
                       domain=(b, i, t))
        y = x[b, i, T - 1 - t] * 2.0 + x[0, 0, 0]
        out = collect(y)
    assert y.domain == (b, i, t)
    run(ctx, {B: 2, I: 3, T: 4}, backend)
    assert_values(out, {(p, q, s): np.array([p, q, 3 - s]) * 2.0 for p, q, s in points(2, 3, 4)})


def test_domain_union_follows_context_order(backend):
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        a = trl.source(lambda p: float(p["t"]), domain=(t,))
        c = trl.source(lambda p: 100.0 * p["i"], domain=(i,))
        total = a + c
        scaled = c * trl.tensor([1.0, -1.0])
        out, scaled_out = collect(total), collect(scaled)
    assert total.domain == (i, t)
    assert scaled.domain == (i,) and scaled.shape == (2,)
    run(ctx, {I: 3, T: 4}, backend)
    assert_values(out, {(k, s): 100.0 * k + s for k, s in points(3, 4)})
    assert_values(scaled_out, {(k,): [100.0 * k, -100.0 * k] for k in range(3)})


def test_unused_bounds_need_no_value(backend):
    ctx = trl.Context(dims="i t")
    _i, t = ctx.dims
    _I, T = ctx.bounds
    with ctx:
        out = collect(trl.source(lambda p: float(p["t"]), domain=(t,)))
    run(ctx, {T: 3}, backend)
    assert_values(out, {(k,): float(k) for k in range(3)})


def test_source_receives_point_dict(backend):
    seen = []
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    I, T = ctx.bounds

    def fn(point):
        seen.append(dict(point))
        return [point["i"], point["t"]]

    with ctx:
        x = trl.source(fn, shape=(2,), dtype="int64", domain=(i, t))
        out = collect(x)
    run(ctx, {I: 2, T: 2}, backend)
    assert sorted(tuple(p.items()) for p in seen) == sorted(
        ((("i", a), ("t", c)) for a, c in points(2, 2)))
    assert_values(out, {(a, c): [a, c] for a, c in points(2, 2)})


# ---- random draws ---------------------------------------------------------------------------------------


def _random_program(seed: int, backend: str):
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        u = trl.rand((5,), domain=(i, t))
        n = trl.randn((3,), dtype="float64", domain=(t,))
        u_out, n_out = collect(u), collect(n)
    run(ctx, {I: 2, T: 6}, backend, seed=seed)
    return u_out, n_out


def test_rand_is_deterministic_per_seed(backend):
    first, first_normal = _random_program(0, backend)
    again, again_normal = _random_program(0, backend)
    other, _ = _random_program(1, backend)
    for key in first:
        np.testing.assert_array_equal(first[key], again[key])
        assert not np.array_equal(first[key], other[key])
    for key in first_normal:
        np.testing.assert_array_equal(first_normal[key], again_normal[key])
        assert first_normal[key].dtype == np.float64


def test_rand_points_are_independent_and_uniform(backend):
    uniform, normal = _random_program(3, backend)
    values = np.stack([uniform[k] for k in sorted(uniform)])
    assert values.dtype == np.float32
    assert values.min() >= 0.0 and values.max() < 1.0
    assert len({v.tobytes() for v in values}) == len(values), "two points drew the same values"
    assert len({uniform[k].tobytes() for k in uniform}) == 12
    assert len({v.tobytes() for v in normal.values()}) == 6
    big = np.concatenate([v.ravel() for v in values])
    assert 0.25 < big.mean() < 0.75


def test_rand_agrees_with_reference(backend):
    if backend == "reference":
        pytest.skip("compares a compiled backend against the reference")
    compiled, reference = _random_program(5, backend)[0], _random_program(5, "reference")[0]
    assert_values(compiled, reference)


# ---- long recurrences -----------------------------------------------------------------------------------


def test_recurrence_over_100k_steps_reference():
    """The benchmark's program (`benchmarks/long_recurrence.py`, which times it): its last sum by hand."""
    values: dict = {}
    exe = long_recurrence.build(values).compile({"T": 100_000}, backend="reference")
    exe.execute()
    assert values == {"last": float(sum(k % 3 for k in range(100_000)))}


def test_creation_functions(backend):
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        made = {
            "tensor": trl.tensor([[1, 2], [3, 4]], dtype="float64", domain=(t,)),
            "zeros": trl.zeros((2,), dtype="int64", domain=(i,)),
            "ones": trl.ones((3,), dtype="bool"),
            "full": trl.full((2, 1), 7.5, domain=(i, t)),
            "arange": trl.arange(4),
        }
        outs = {name: collect(x) for name, x in made.items()}
        weights = trl.zeros((2,), requires_grad=True)
    assert weights.requires_grad and not made["zeros"].requires_grad
    assert made["tensor"].domain == (t,) and made["full"].domain == (i, t) and made["ones"].domain == ()
    run(ctx, {I: 2, T: 3}, backend)
    assert_values(outs["tensor"], {(c,): [[1.0, 2.0], [3.0, 4.0]] for c in range(3)})
    assert_values(outs["zeros"], {(a,): [0, 0] for a in range(2)})
    assert_values(outs["ones"], {(): [True, True, True]})
    assert_values(outs["full"], {p: [[7.5], [7.5]] for p in points(2, 3)})
    assert_values(outs["arange"], {(): [0, 1, 2, 3]})
    expected = {"tensor": np.float64, "zeros": np.int64, "ones": np.bool_, "full": np.float32, "arange": np.int64}
    for name, dtype in expected.items():
        assert all(v.dtype == dtype for v in outs[name].values()), name


@pytest.mark.parametrize("optimize", [True, False])
def test_compile_options_and_stats(backend, optimize):
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    with ctx:
        r = trl.source(lambda p: float(p["t"]), domain=(t,))
        out = collect(r[t:T].discounted_sum(0.5) + r[0:t + 1].sum())
    exe = ctx.compile(bounds={T: 6}, backend=backend, optimize=optimize, seed=3, device_memory=None, swap=False)
    exe.execute()
    expected = {(k,): sum(0.5 ** (j - k) * j for j in range(k, 6)) + sum(range(k + 1)) for k in range(6)}
    assert_values(out, expected)
    for key in ("peak_device_bytes", "peak_host_bytes", "bytes_offloaded", "bytes_fetched", "compile_seconds",
                "execute_seconds"):
        assert key in exe.stats and exe.stats[key] >= 0, key
    assert str(exe.schedule)
