"""Semantics at the edges (issue 34, the silent wrong results): each class on every backend, against the
reference interpreter, torch (gather, gradients) or NumPy computed here."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import timerl as trl
from conftest import collect, run


# ---- names and contexts ---------------------------------------------------------------------------------------


def test_a_dimension_named_like_a_bound_runs_everywhere(backend):
    ctx = trl.Context(dims="t T")
    t, big = ctx.dims
    assert len({s.name for s in ctx.dims + ctx.bounds}) == 4
    with ctx:
        x = trl.source(lambda p: float(10 * p["t"] + p["T"]), domain=(t, big))
        rows = collect(x[t, 0:ctx.bounds[1]].sum())
    run(ctx, {ctx.bounds[0]: 2, ctx.bounds[1]: 3}, backend)
    assert rows == {(0,): 3.0, (1,): 33.0}


def test_a_placeholder_refuses_a_tensor_of_another_context():
    other = trl.Context("t")
    with other:
        foreign = trl.zeros(())
    ctx = trl.Context("t")
    with ctx:
        o = trl.placeholder((), "float32", domain=ctx.dims)
        with pytest.raises(trl.TimeRLError, match="another context"):
            o[0] = foreign


def test_a_dimension_compared_with_a_float_is_refused():
    ctx = trl.Context("t")
    (t,) = ctx.dims
    for compare in (lambda: t == 2.0, lambda: t != 2.5, lambda: t < 2.5):
        with pytest.raises(trl.TimeRLError, match="2"):
            compare()
    assert str(t == np.int64(2)) == str(t == 2)


# ---- what the host hands in -------------------------------------------------------------------------------------


def test_a_refilled_source_buffer_does_not_change_stored_values(backend):
    """The source returns one buffer, refilled at every call: every step keeps its own values."""
    ctx = trl.Context("t")
    (t,), (T,) = ctx.dims, ctx.bounds
    buffer = np.zeros(3)

    def refill(point):
        buffer[:] = point["t"]
        return buffer

    with ctx:
        x = trl.source(refill, shape=(3,), dtype="float64", domain=(t,))
        totals = collect(x[0:T].sum(0))
    run(ctx, {T: 4}, backend, optimize=False)
    np.testing.assert_array_equal(totals[()], [6.0, 6.0, 6.0])


def test_a_refilled_udf_buffer_does_not_change_stored_values(backend):
    ctx = trl.Context("t")
    (t,), (T,) = ctx.dims, ctx.bounds
    buffer = np.zeros(2, dtype=np.float32)

    def step(point, value):
        buffer[:] = value + point["t"]
        return (buffer,)

    with ctx:
        x = trl.source(lambda p: np.ones(2, np.float32), shape=(2,), domain=(t,))
        (y,) = trl.rt.functional.apply("udf", x, fn=step, outputs=(trl.rt.functional.TensorType((2,), "float32"),),
                                        as_tuple=True)
        totals = collect(y[0:T].sum(0))
    run(ctx, {T: 3}, backend)
    np.testing.assert_array_equal(totals[()], [6.0, 6.0])


@pytest.mark.parametrize("returned,dtype,match", [(None, "float32", "None"), ("text", "float32", "text"),
                                                  (1e12, "int32", "outside the range of int32"),
                                                  (float("nan"), "int64", "NaN"), (300, "uint8", "outside")])
def test_a_source_value_that_does_not_fit_its_dtype_is_refused(backend, returned, dtype, match):
    ctx = trl.Context("t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        where = f"test_edge_semantics.py:{__import__('sys')._getframe().f_lineno + 1}"
        collect(trl.source(lambda p: returned, dtype=dtype, domain=(t,)) * 1)
    with pytest.raises(trl.TimeRLError, match=match) as info:
        run(ctx, {T: 2}, backend)
    assert where in str(info.value)


# ---- gather, index dtypes, matmul --------------------------------------------------------------------------------


def test_gather_follows_torch_gather_with_a_shorter_index(backend):
    """The index may be shorter than the input on the other axes; values and gradients are torch's."""
    values = np.random.default_rng(0).normal(size=(3, 4))
    index = np.array([[3, 0], [1, 1]])
    ctx = trl.Context("t")
    (T,) = ctx.bounds
    with ctx:
        x = trl.placeholder((3, 4), "float64", domain=ctx.dims, requires_grad=True)
        x[ctx.dims[0]] = trl.source(lambda p: values, (3, 4), "float64", ctx.dims)
        picked = x.gather(1, trl.tensor(index, dtype="int32"))
        (picked * picked).sum().backward()
        gathered, grad = collect(picked), collect(x.grad)
    run(ctx, {T: 1}, backend)
    leaf = torch.tensor(values, requires_grad=True)
    expected = torch.gather(leaf, 1, torch.tensor(index))
    (expected * expected).sum().backward()
    np.testing.assert_allclose(gathered[(0,)], expected.detach().numpy())
    np.testing.assert_allclose(grad[(0,)], leaf.grad.numpy())


def test_gather_refuses_an_index_longer_than_the_input():
    ctx = trl.Context("t")
    with ctx:
        with pytest.raises(trl.ShapeError, match="longer"):
            trl.zeros((2, 4)).gather(1, trl.tensor(np.zeros((3, 1), dtype=np.int64)))


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int8"])
def test_narrow_integer_indices_work_everywhere(backend, dtype):
    ctx = trl.Context("t")
    (T,) = ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.arange(8.0).reshape(2, 4), (2, 4), "float32", ctx.dims)
        index = trl.tensor(np.array([[3, 1], [0, 2]]), dtype=dtype)
        stores = [collect(x.gather(1, index)), collect(x.index_select(1, index.reshape(4))),
                  collect(index.one_hot(4).sum(0))]
    run(ctx, {T: 1}, backend)
    np.testing.assert_array_equal(stores[0][(0,)], [[3, 1], [4, 6]])
    np.testing.assert_array_equal(stores[1][(0,)], [[3, 1, 0, 2], [7, 5, 4, 6]])
    np.testing.assert_array_equal(stores[2][()], [[1, 0, 0, 1], [0, 1, 1, 0]])


def test_bool_matmul_is_refused_while_the_program_is_written():
    ctx = trl.Context("t")
    with ctx:
        flags = trl.tensor(np.eye(2, dtype=bool))
        with pytest.raises(trl.ShapeError, match="bool"):
            flags @ flags
        assert (flags.astype("int64") @ flags.astype("int64")).dtype == "int64"


# ---- %, //, abs and powers, with gradients against torch -----------------------------------------------------------


def test_remainder_floor_divide_abs_and_powers_match_torch(backend):
    base = np.array([-2.5, 0.0, 1.5, 3.0, -0.0])
    ctx = trl.Context("t")
    (T,) = ctx.bounds
    with ctx:
        x = trl.placeholder((5,), "float64", domain=ctx.dims, requires_grad=True)
        x[ctx.dims[0]] = trl.source(lambda p: base, (5,), "float64", ctx.dims)
        results = [x % 2.0, x // 2.0, abs(x), x ** 0, x ** 2, x.abs() * (x // 1.0), 2.0 ** x]
        objective = sum((r * (k + 1)).sum() for k, r in enumerate(results))
        objective.backward()
        stores, grad = [collect(r) for r in results], collect(x.grad)
        integers = trl.tensor(np.array([7, -7, 5]))
        int_stores = [collect(integers % 3), collect(integers // -2), collect(abs(integers))]
    run(ctx, {T: 1}, backend)
    leaf = torch.tensor(base, requires_grad=True)
    floor = leaf.detach()  # torch defines no derivative of //; ours is its value almost everywhere, zero
    expected = [leaf % 2.0, floor // 2.0, abs(leaf), leaf ** 0, leaf ** 2, leaf.abs() * (floor // 1.0), 2.0 ** leaf]
    sum((r * (k + 1)).sum() for k, r in enumerate(expected)).backward()
    for store, want in zip(stores, expected):
        np.testing.assert_allclose(store[(0,)], want.detach().numpy())
    np.testing.assert_allclose(grad[(0,)], leaf.grad.numpy())
    ints = torch.tensor([7, -7, 5])
    for store, want in zip(int_stores, [ints % 3, ints // -2, abs(ints)]):
        np.testing.assert_array_equal(store[()], want.numpy())


def test_integer_division_by_zero_is_an_error_everywhere(backend):
    ctx = trl.Context("t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        divisor = trl.source(lambda p: p["t"], dtype="int64", domain=(t,))
        collect(trl.tensor(np.array([7, 8])) // divisor)
    with pytest.raises(trl.TimeRLError, match="division by zero"):
        run(ctx, {T: 2}, backend)


# ---- a placeholder point nothing reads ---------------------------------------------------------------------------


def test_a_failing_placeholder_point_nothing_reads_fails_everywhere(backend):
    """Compiled backends compute a placeholder whole; the reference does too, not only the points read."""
    ctx = trl.Context("t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: float(p["t"]), domain=(t,))
        o = trl.placeholder((), "float32", domain=(t,))
        o[t] = x[t + 1]  # o[T - 1] reads x[T]
        collect(o[0] + 1)
    with pytest.raises(trl.DomainError):
        run(ctx, {T: 3}, backend)
