"""``scatter`` and ``gather_fill`` (timerl/ops/indexed.py) against NumPy loops written here, on every backend:
in range, out of range (dropped writes, filled reads), along either axis, inside a jitted group on jax, and
vectorized over a domain dimension (the batch rule) against the same op at every point."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_values, collect, run

import timerl as trl
from timerl.backends.base import get_backend
from timerl.ops.batching import batch_rule
from timerl.runtime.evaluate import op_kernel
from timerl.rt import functional as F

# rows of distinct indices, some outside [0, 5): -1 and 5 and 9 must be dropped (scatter) or filled (gather_fill)
INDEX = np.array([[0, 3, -1], [4, 5, 1], [2, 9, 0], [-3, 1, 3]], dtype=np.int64)


def scatter_by_hand(x, index, src, dim):
    out = x.copy()
    for position in np.ndindex(index.shape):
        k = index[position]
        if 0 <= k < x.shape[dim]:
            target = list(position)
            target[dim] = k
            out[tuple(target)] = src[position]
    return out


def gather_fill_by_hand(x, index, dim, fill):
    out = np.empty(index.shape, dtype=x.dtype)
    for position in np.ndindex(index.shape):
        k = index[position]
        source = list(position)
        source[dim] = k
        out[position] = x[tuple(source)] if 0 <= k < x.shape[dim] else fill
    return out


@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_scatter_writes_in_range_and_drops_the_rest(backend, dtype):
    x = np.arange(20).reshape(4, 5).astype(dtype)
    src = (100 + np.arange(12)).reshape(4, 3).astype(dtype)
    ctx = trl.Context(dims="t")
    with ctx:
        rows = collect(F.apply("scatter", trl.tensor(x), trl.tensor(INDEX), trl.tensor(src), dim=1))
        # along axis 0 (index 3 x 5 into x 4 x 5), distinct within each column
        columns_index = np.array([[0, 3, -1, 1, 2], [3, 2, 2, 8, 1], [1, 1, 0, 0, 3]], dtype=np.int64)
        columns_src = np.arange(15).reshape(3, 5).astype(dtype) - 50
        columns = collect(F.apply("scatter", trl.tensor(x), trl.tensor(columns_index), trl.tensor(columns_src), dim=0))
    run(ctx, {}, backend)
    assert_values(rows, {(): scatter_by_hand(x, INDEX, src, 1)})
    assert_values(columns, {(): scatter_by_hand(x, columns_index, columns_src, 0)})


def test_gather_fill_reads_in_range_and_fills_the_rest(backend):
    x = np.arange(20).reshape(4, 5).astype(np.int64) * 3
    ctx = trl.Context(dims="t")
    with ctx:
        rows = collect(F.apply("gather_fill", trl.tensor(x), trl.tensor(INDEX), dim=1, fill=-7))
        first = np.array([[0, 3, -1, 1, 2], [5, 0, 2, 3, 4]], dtype=np.int64)
        columns = collect(F.apply("gather_fill", trl.tensor(x), trl.tensor(first), dim=0, fill=11))
    run(ctx, {}, backend)
    assert_values(rows, {(): gather_fill_by_hand(x, INDEX, 1, -7)})
    assert_values(columns, {(): gather_fill_by_hand(x, first, 0, 11)})


def test_a_record_per_step_updated_by_scatter(backend):
    """A recurrence over t writes one position per row per step (the MMapGame's record update); on jax the
    step is one jitted computation with the read and the write inside it."""
    steps, rows, width = 6, 3, 4
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    positions = np.array([[0, 1, 2, 3, -1, 3], [3, 3, 0, 9, 1, 2], [2, 0, 1, 1, 4, 0]], dtype=np.int64).T
    with ctx:
        where = trl.source(lambda p: positions[p["t"]][:, None], shape=(rows, 1), dtype="int64", domain=(t,))
        record = trl.placeholder((rows, width), "int64", domain=(t,))
        record[0] = trl.zeros((rows, width), "int64")
        old = F.apply("gather_fill", record, where, dim=1, fill=-100)
        step = trl.source(lambda p: np.full((rows, 1), (p["t"] + 1) * 10), shape=(rows, 1), dtype="int64", domain=(t,))
        record[t + 1] = F.apply("scatter", record, where, old + step, dim=1)
        store = collect(record)
    run(ctx, {T: steps}, backend)
    want, value = {}, np.zeros((rows, width), dtype=np.int64)
    for step in range(steps):
        want[(step,)] = value.copy()
        for row in range(rows):
            k = positions[step, row]
            if 0 <= k < width:
                value[row, k] += (step + 1) * 10
    assert_values(store, want)


# (op, attrs, per-point input shapes and dtypes, batched axes)
BATCHED = [
    ("scatter", {"dim": 1}, [((3, 5), "float32"), ((3, 2), "int64"), ((3, 2), "float32")], (0, 0, 0)),
    ("scatter", {"dim": 1}, [((3, 5), "float32"), ((3, 2), "int64"), ((3, 2), "float32")], (None, 0, 0)),
    ("scatter", {"dim": 0}, [((5, 3), "float32"), ((2, 3), "int64"), ((2, 3), "float32")], (0, None, 0)),
    ("gather_fill", {"dim": 1, "fill": -1.0}, [((3, 5), "float32"), ((3, 2), "int64")], (0, 0)),
    ("gather_fill", {"dim": 0, "fill": 2.5}, [((5, 3), "float32"), ((2, 3), "int64")], (None, 0)),
]


@pytest.mark.parametrize("backend_name", ["reference", "torch", "jax"])
@pytest.mark.parametrize("op, attrs, inputs, axes", BATCHED, ids=[f"{c[0]}-{k}" for k, c in enumerate(BATCHED)])
def test_batch_rule_equals_the_op_at_every_point(backend_name, op, attrs, inputs, axes):
    points, generator = 4, np.random.default_rng(1)
    backend = get_backend(backend_name)
    kernel = op_kernel(op, attrs, "float32", backend)
    values = []
    for (shape, dtype), axis in zip(inputs, axes):
        shape = (points, *shape) if axis == 0 else shape
        if dtype == "int64":  # distinct per row along the indexed axis, one of them out of range
            size = inputs[0][0][attrs["dim"]]
            values.append(_distinct_indices(generator, shape, attrs["dim"] + (axis == 0), size))
        else:
            values.append(generator.standard_normal(shape).astype(np.float32))
    arrays = [backend.from_numpy(v) for v in values]
    rule = batch_rule(op, attrs, [len(s) for s, _ in inputs], axes, backend.xp, kernel,
                      lambda changed: op_kernel(op, changed, "float32", backend))
    got = backend.to_numpy(rule(*arrays))
    want = np.stack([backend.to_numpy(kernel(*[a[n] if ax == 0 else a for a, ax in zip(arrays, axes)]))
                     for n in range(points)])
    np.testing.assert_array_equal(got, want)


def _distinct_indices(generator, shape, axis, size):
    """Indices in [-1, size] along ``axis``, distinct along it, so that no two writes of a row collide."""
    moved = list(shape)
    count = moved.pop(axis)
    rows = [generator.permutation(np.arange(-1, size + 1))[:count] for _ in range(int(np.prod(moved)))]
    return np.moveaxis(np.array(rows, dtype=np.int64).reshape(*moved, count), -1, axis)
