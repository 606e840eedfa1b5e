"""Every op of the SPEC, on tensors that vary over a dimension, against NumPy applied point by point."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_values, collect, run

import timerl as trl

STEPS = 3


def data(shape, seed, low=-2.0, high=2.0, dtype="float32"):
    """A deterministic array per point (and per input): NumPy ground truth uses the very same function."""
    def make(t):
        generator = np.random.default_rng(1000 * seed + t)
        if dtype == "int64":
            return generator.integers(0, high, size=shape).astype(np.int64)
        if dtype == "bool":
            return generator.random(shape) < 0.5
        return generator.uniform(low, high, size=shape).astype(dtype)
    return make


def positive(shape, seed):
    return data(shape, seed, 0.1, 3.0)


def check(backend, inputs, build, expected, rtol=1e-5, atol=1e-6):
    """``inputs``: (shape, maker) pairs fed as sources over ``t``; ``build``/``expected`` take one tensor or
    array per input."""
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    makers = [maker for _, maker in inputs]
    with ctx:
        sources = []
        for (shape, maker) in inputs:
            sample = maker(0)
            sources.append(trl.source(lambda p, m=maker: m(p["t"]), shape=shape, dtype=str(sample.dtype),
                                      domain=(t,)))
        result = build(*sources)
        out = collect(result)
    run(ctx, {T: STEPS}, backend)
    want = {(k,): np.asarray(expected(*[m(k) for m in makers])) for k in range(STEPS)}
    assert_values(out, want, rtol=rtol, atol=atol)
    for key, value in want.items():
        assert out[key].dtype == value.dtype, f"dtype {out[key].dtype}, expected {value.dtype}"
    assert tuple(result.shape) == next(iter(want.values())).shape
    return result


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


F32 = np.float32
A, B, C = (3, 4), (4,), (2, 3, 4)

UNARY = {
    "neg": (lambda x: -x, lambda x: -x, data(A, 1)),
    "exp": (lambda x: x.exp(), np.exp, data(A, 1)),
    "log": (lambda x: x.log(), np.log, positive(A, 1)),
    "sqrt": (lambda x: x.sqrt(), np.sqrt, positive(A, 1)),
    "abs": (lambda x: x.abs(), np.abs, data(A, 1)),
    "tanh": (lambda x: x.tanh(), np.tanh, data(A, 1)),
    "sigmoid": (lambda x: x.sigmoid(), sigmoid, data(A, 1)),
    "relu": (lambda x: x.relu(), lambda x: np.maximum(x, 0), data(A, 1)),
    "softmax": (lambda x: x.softmax(dim=-1), lambda x: softmax(x, -1), data(A, 1)),
    "softmax_dim0": (lambda x: x.softmax(dim=0), lambda x: softmax(x, 0), data(A, 1)),
    "log_softmax": (lambda x: x.log_softmax(dim=1), lambda x: np.log(softmax(x, 1)), data(A, 1)),
    "sum": (lambda x: x.sum(), lambda x: x.sum(), data(C, 1)),
    "sum_dim": (lambda x: x.sum(dim=1), lambda x: x.sum(axis=1), data(C, 1)),
    "sum_dims_keep": (lambda x: x.sum(dim=(0, 2), keepdim=True), lambda x: x.sum(axis=(0, 2), keepdims=True),
                      data(C, 1)),
    "mean": (lambda x: x.mean(dim=-1), lambda x: x.mean(axis=-1), data(C, 1)),
    "max": (lambda x: x.max(dim=0), lambda x: x.max(axis=0), data(C, 1)),
    "min": (lambda x: x.min(), lambda x: x.min(), data(C, 1)),
    "argmax": (lambda x: x.argmax(dim=1), lambda x: x.argmax(axis=1), data(A, 1)),
    "argmax_flat": (lambda x: x.argmax(), lambda x: np.int64(x.argmax()), data(A, 1)),
    "cumsum": (lambda x: x.cumsum(dim=1), lambda x: np.cumsum(x, axis=1), data(A, 1)),
    "reshape": (lambda x: x.reshape((4, 3)), lambda x: x.reshape(4, 3), data(A, 1)),
    "reshape_infer": (lambda x: x.reshape((-1,)), lambda x: x.reshape(-1), data(C, 1)),
    "permute": (lambda x: x.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1), data(C, 1)),
    "transpose": (lambda x: x.transpose(0, 2), lambda x: np.swapaxes(x, 0, 2), data(C, 1)),
    "unsqueeze": (lambda x: x.unsqueeze(1), lambda x: x[:, None], data(A, 1)),
    "unsqueeze_last": (lambda x: x.unsqueeze(-1), lambda x: x[..., None], data(A, 1)),
    "squeeze": (lambda x: x.squeeze(1), lambda x: x[:, 0], data((3, 1, 2), 1)),
    "squeeze_all": (lambda x: x.squeeze(), lambda x: x.reshape(3, 2), data((1, 3, 1, 2), 1)),
    "expand": (lambda x: x.expand(2, 3, 4), lambda x: np.broadcast_to(x, (2, 3, 4)), data((3, 1), 1)),
    "expand_keep": (lambda x: x.expand(-1, 4), lambda x: np.broadcast_to(x, (3, 4)), data((3, 1), 1)),
    "clip": (lambda x: x.clip(-0.5, 0.5), lambda x: np.clip(x, -0.5, 0.5), data(A, 1)),
    "clip_low": (lambda x: x.clip(min=0.0), lambda x: np.maximum(x, 0), data(A, 1)),
    "detach": (lambda x: x.detach() * 2.0, lambda x: x * 2, data(A, 1)),
    "astype_int": (lambda x: (x * 3.0).astype("int64"), lambda x: (x * F32(3)).astype(np.int64), data(A, 1)),
    "astype_f64": (lambda x: x.astype("float64"), lambda x: x.astype(np.float64), data(A, 1)),
    "pow": (lambda x: x ** 2.0, lambda x: x ** F32(2), data(A, 1)),
    "rpow": (lambda x: 2.0 ** x, lambda x: F32(2) ** x, data(A, 1)),
    "scalar_ops": (lambda x: (1.0 - x) / 2.0 + 3.0 * x, lambda x: (F32(1) - x) / F32(2) + F32(3) * x, data(A, 1)),
    "one_hot": (lambda x: x.one_hot(5), lambda x: np.eye(5, dtype=np.int64)[x], data((4,), 1, high=5, dtype="int64")),
    "discounted_sum": (lambda x: x.discounted_sum(0.9), lambda x: sum(0.9 ** k * x[k] for k in range(len(x))),
                       data((5, 2), 1)),
    "discounted_cum_sum": (
        lambda x: x.discounted_cum_sum(0.5),
        lambda x: np.stack([sum(0.5 ** (j - k) * x[j] for j in range(k, 5)) for k in range(5)]), data((5,), 1)),
    "spatial_int": (lambda x: x.spatial[1], lambda x: x[1], data(C, 1)),
    "spatial_slices": (lambda x: x.spatial[:, 1:3, None, ::2], lambda x: x[:, 1:3, None, ::2], data(C, 1)),
    "spatial_ellipsis": (lambda x: x.spatial[..., -1], lambda x: x[..., -1], data(C, 1)),
    "spatial_negative": (lambda x: x.spatial[-1, :2], lambda x: x[-1, :2], data(C, 1)),
    "logical": (lambda x: ~(x > 0) | (x > 1) & (x < 1.5), lambda x: ~(x > 0) | (x > 1) & (x < 1.5), data(A, 1)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(backend, name):
    build, expected, maker = UNARY[name]
    check(backend, [(maker(0).shape, maker)], build, expected, rtol=2e-5)


BINARY = {
    "add_broadcast": (lambda x, y: x + y, lambda x, y: x + y, data(A, 1), data(B, 2)),
    "sub_broadcast": (lambda x, y: y - x, lambda x, y: y - x, data((3, 1), 1), data(B, 2)),
    "mul": (lambda x, y: x * y, lambda x, y: x * y, data(A, 1), data(A, 2)),
    "div": (lambda x, y: x / y, lambda x, y: x / y, data(A, 1), positive(B, 2)),
    "maximum_via_where": (lambda x, y: trl.where(x > y, x, y), np.maximum, data(A, 1), data(A, 2)),
    "where_scalar": (lambda x, y: trl.where(x > y, x, 0.0), lambda x, y: np.where(x > y, x, F32(0)),
                     data(A, 1), data(B, 2)),
    "lt": (lambda x, y: x < y, lambda x, y: x < y, data(A, 1), data(A, 2)),
    "le": (lambda x, y: x <= y, lambda x, y: x <= y, data(A, 1), data(B, 2)),
    "gt": (lambda x, y: x > y, lambda x, y: x > y, data(A, 1), data(A, 2)),
    "ge": (lambda x, y: x >= y, lambda x, y: x >= y, data(A, 1), data(A, 2)),
    "eq": (lambda x, y: x == y, lambda x, y: x == y, data((6,), 1, high=3, dtype="int64"),
           data((6,), 2, high=3, dtype="int64")),
    "ne": (lambda x, y: x != y, lambda x, y: x != y, data((6,), 1, high=3, dtype="int64"),
           data((6,), 2, high=3, dtype="int64")),
    "matmul": (lambda x, y: x @ y, lambda x, y: x @ y, data((2, 3), 1), data((3, 4), 2)),
    "matmul_vec": (lambda x, y: x @ y, lambda x, y: x @ y, data((2, 3), 1), data((3,), 2)),
    "vec_matmul": (lambda x, y: x @ y, lambda x, y: x @ y, data((3,), 1), data((3, 4), 2)),
    "dot": (lambda x, y: x @ y, lambda x, y: np.dot(x, y), data((3,), 1), data((3,), 2)),
    "batched_matmul": (lambda x, y: x @ y, lambda x, y: x @ y, data((2, 2, 3), 1), data((3, 4), 2)),
    "cat": (lambda x, y: trl.cat([x, y], dim=0), lambda x, y: np.concatenate([x, y], 0), data(A, 1), data((2, 4), 2)),
    "cat_last": (lambda x, y: trl.cat([x, y], dim=-1), lambda x, y: np.concatenate([x, y], -1), data(A, 1),
                 data((3, 2), 2)),
    "stack": (lambda x, y: trl.stack([x, y], dim=1), lambda x, y: np.stack([x, y], 1), data(A, 1), data(A, 2)),
    "stack_last": (lambda x, y: trl.stack([x, y], dim=-1), lambda x, y: np.stack([x, y], -1), data(A, 1),
                   data(A, 2)),
    "gather": (lambda x, k: x.gather(1, k), lambda x, k: np.take_along_axis(x, k, 1), data(A, 1),
               data((3, 2), 2, high=4, dtype="int64")),
    "index_select": (lambda x, k: x.index_select(1, k), lambda x, k: np.take(x, k, 1), data(A, 1),
                     data((5,), 2, high=4, dtype="int64")),
    "int_float_promotion": (lambda x, k: x + k, lambda x, k: x + k.astype(np.float32), data(A, 1),
                            data(A, 2, high=4, dtype="int64")),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(backend, name):
    build, expected, first, second = BINARY[name]
    check(backend, [(first(0).shape, first), (second(0).shape, second)], build, expected, rtol=2e-5)


def test_where_three_tensors(backend):
    cond, x, y = data(A, 1, dtype="bool"), data(A, 2), data(B, 3)
    check(backend, [(A, cond), (A, x), (B, y)], trl.where, np.where)


def test_ints_stay_ints(backend):
    k = data(A, 1, high=10, dtype="int64")
    check(backend, [(A, k)], lambda x: x * 2 + 1, lambda x: x * 2 + 1)
    check(backend, [(A, k)], lambda x: x.sum(dim=0), lambda x: x.sum(axis=0))


def test_shapes_and_dtypes_are_inferred():
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    with ctx:
        x = trl.zeros((2, 3), domain=(t,))
        assert (x @ trl.ones((3, 5))).shape == (2, 5)
        assert x.sum(dim=1).shape == (2,) and x.mean(dim=(0, 1)).shape == ()
        assert x.argmax(dim=0).dtype == "int64"
        assert (x > 0).dtype == "bool"
        assert x.astype("float64").dtype == "float64"
        assert trl.cat([x, x], dim=1).shape == (2, 6)
        assert trl.stack([x, x]).shape == (2, 2, 3)
        assert x.spatial[:, None].shape == (2, 1, 3)
        assert trl.arange(4).dtype == "int64"
        assert (trl.arange(4) + 1.5).dtype == "float32"


def test_reductions_of_bools_and_ints(backend):
    flags, counts = data(A, 1, dtype="bool"), data(A, 2, high=5, dtype="int64")
    check(backend, [(A, flags)], lambda f: f.sum(), lambda f: np.int64(f.sum()))
    check(backend, [(A, flags)], lambda f: f.sum(dim=0), lambda f: f.sum(axis=0).astype(np.int64))
    check(backend, [(A, flags)], lambda f: f.cumsum(dim=1), lambda f: np.cumsum(f, axis=1).astype(np.int64))
    check(backend, [(A, counts)], lambda k: k.mean(dim=1), lambda k: k.mean(axis=1).astype(np.float32))
    check(backend, [(A, counts)], lambda k: k.max(), lambda k: np.int64(k.max()))
    check(backend, [(A, counts)], lambda k: k / 2, lambda k: (k / 2).astype(np.float32))
