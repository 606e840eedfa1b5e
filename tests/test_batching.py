"""Batch rules (timerl.ops.batching) against the op's own kernel applied point by point and stacked."""

from __future__ import annotations

import numpy as np
import pytest

from timerl.backends.base import get_backend
from timerl.ops.batching import batch_rule
from timerl.runtime.evaluate import op_kernel

N = 5
R = np.random.default_rng(0)

# (op, attrs, per-point input shapes, batched axes)
CASES = [
    ("add", {}, [(3, 4), (4,)], (0, None)),
    ("add", {}, [(4,), (3, 4)], (0, None)),  # the batched operand is the narrower one
    ("mul", {}, [(4,), (3, 4)], (0, 0)),
    ("sub", {}, [(), (3,)], (None, 0)),
    ("tanh", {}, [(2, 3)], (0,)),
    ("where", {}, [(3,), (2, 3), ()], (0, None, 0)),
    ("matmul", {}, [(3, 4), (4, 2)], (0, None)),
    ("matmul", {}, [(3, 4), (4, 2)], (None, 0)),
    ("matmul", {}, [(3, 4), (2, 4, 5)], (0, 0)),
    ("sum", {"dims": (0,), "keepdim": True}, [(3, 4)], (0,)),
    ("mean", {"dims": (0, 1), "keepdim": False}, [(3, 4)], (0,)),
    ("max", {"dims": (1,), "keepdim": False}, [(3, 4)], (0,)),
    ("argmax", {"dims": (1,), "keepdim": False}, [(3, 4)], (0,)),
    ("cumsum", {"dim": 0}, [(3, 4)], (0,)),
    ("log_softmax", {"dim": 1}, [(3, 4)], (0,)),
    ("softmax", {"dim": 0}, [(3, 4)], (0,)),
    ("reshape", {"shape": (12,)}, [(3, 4)], (0,)),
    ("expand", {"shape": (2, 3, 4)}, [(4,)], (0,)),
    ("expand", {"shape": (3, 4)}, [(3, 1)], (0,)),
    ("permute", {"perm": (1, 0)}, [(3, 4)], (0,)),
    ("flip", {"dim": 1}, [(3, 4)], (0,)),
    ("discounted_sum", {"gamma": 0.9}, [(6, 3)], (0,)),
    ("spatial_index", {"key": (slice(None), 0)}, [(3, 4)], (0,)),
    ("spatial_index", {"key": (Ellipsis, slice(1, 3), None)}, [(2, 3, 4)], (0,)),
    ("spatial_scatter", {"key": (slice(None), 0), "shape": (3, 4)}, [(3,)], (0,)),
    ("spatial_scatter", {"key": 1, "shape": (2, 3)}, [(3,)], (0,)),
    # gather / scatter_add (a log-probability's read of the taken action and its gradient): index and values
    # share every axis but ``dim``
    ("gather", {"dim": 1}, [(4, 3), (4, 1)], (0, 0)),
    ("gather", {"dim": -1}, [(4, 3), (4, 2)], (None, 0)),
    ("gather", {"dim": 0}, [(3, 2), (2, 2)], (0, None)),
    ("scatter_add", {"dim": 1, "size": 3}, [(4, 1), (4, 1)], (0, 0)),
    ("scatter_add", {"dim": 1, "size": 3}, [(4, 2), (4, 2)], (0, None)),
    ("scatter_add", {"dim": 0, "size": 3}, [(2, 4), (2, 4)], (None, 0)),
]

INDEX_SLOTS = {"gather": (1, "dim"), "scatter_add": (1, "size")}  # op -> (index input, what bounds it)


def _value(shape, op, slot, attrs, shapes):
    if op == "where" and slot == 0:
        return R.random(shape) > 0.5
    if op in INDEX_SLOTS and slot == INDEX_SLOTS[op][0]:
        size = attrs["size"] if op == "scatter_add" else shapes[0][attrs["dim"]]
        return R.integers(0, size, shape).astype(np.int64)
    return R.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("backend_name", ["reference", "torch", "jax"])
@pytest.mark.parametrize("op, attrs, shapes, axes", CASES, ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_batch_rule_equals_the_kernel_at_every_point(backend_name, op, attrs, shapes, axes):
    backend = get_backend(backend_name)
    dtype = "int64" if op == "argmax" else "float32"
    kernel = op_kernel(op, attrs, dtype, backend)
    values = [_value((N, *s) if a == 0 else s, op, k, attrs, shapes) for k, (s, a) in enumerate(zip(shapes, axes))]
    arrays = [backend.from_numpy(v) for v in values]
    rule = batch_rule(op, attrs, [len(s) for s in shapes], axes, backend.xp, kernel,
                      lambda changed: op_kernel(op, changed, dtype, backend))
    assert rule is not None
    got = backend.to_numpy(rule(*arrays))
    want = np.stack([backend.to_numpy(kernel(*[a[n] if ax == 0 else a for a, ax in zip(arrays, axes)]))
                     for n in range(N)])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_ops_without_a_rule_are_left_to_vmap():
    backend = get_backend("reference")
    kernel = op_kernel("discounted_cum_sum", {"gamma": 0.9, "reverse": True}, "float32", backend)
    assert batch_rule("discounted_cum_sum", {"gamma": 0.9, "reverse": True}, [2], (0,), backend.xp, kernel,
                      lambda changed: kernel) is None
    # a reduction whose batched operand is not the first: no axis to move
    assert batch_rule("sum", {"dims": (0,), "keepdim": False}, [2], (None,), backend.xp, kernel,
                      lambda changed: kernel) is None
