"""Algebraic simplification (timerl.pdg.algebra): ops that return an input unchanged are read through, values
stay the reference's, and nothing that changes a type, a shape or a point is touched."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl
from conftest import collect, run
from timerl.pdg.algebra import simplify
from timerl.pdg.dce import eliminate_dead_code

VALUES = np.arange(12, dtype=np.float32).reshape(4, 3) - 5.0


def _ops(graph) -> list[str]:
    return sorted(n.op for n in eliminate_dead_code(simplify(graph)).nodes)


@pytest.mark.parametrize("backend", ["reference", "torch", "jax"])
def test_no_op_ops_are_read_through_with_the_same_values(backend):
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: VALUES[p["t"]], (3,), "float32", (t,))
        y = ((x.detach() * 1.0 + 0.0).astype("float32").reshape((3,)) - 0.0) / 1.0
        z = -(-y)
        out = collect(z.tanh())
    ops = _ops(ctx.graph())
    for gone in ("detach", "mul", "add", "astype", "reshape", "sub", "div", "neg"):
        assert gone not in ops, ops
    assert ops.count("tanh") == 1
    run(ctx, {T: 4}, backend)
    for k in range(4):
        np.testing.assert_allclose(out[(k,)], np.tanh(VALUES[k]), rtol=1e-6)


def test_ops_that_change_a_type_a_shape_or_a_point_stay():
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: VALUES[p["t"]], (3,), "float32", (t,))
        wider = collect(x * trl.ones((2, 3)))  # broadcasts to (2, 3)
        cast = collect(x.astype("float64") + 0.0)  # a new type; + 0.0 on it is read through
        earlier = collect(x[trl.max(t - 1, 0)] * 1.0)  # reads another point: kept
    ops = _ops(ctx.graph())
    assert ops.count("mul") == 2 and ops.count("astype") == 1 and "add" not in ops
    run(ctx, {T: 4}, "torch")
    assert wider[(2,)].shape == (2, 3) and cast[(2,)].dtype == np.float64
    np.testing.assert_allclose(earlier[(2,)], VALUES[1])
    np.testing.assert_allclose(earlier[(0,)], VALUES[0])
