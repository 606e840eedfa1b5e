"""Common subexpression elimination (timerl.pdg.cse): repeats become one op, values stay the reference's, and
ops whose identity matters (draws, sources, sinks, UDFs, merges) are never merged."""

from __future__ import annotations

import numpy as np

import timerl as trl
from conftest import collect, run
from timerl.pdg.cse import eliminate_common_subexpressions
from timerl.pdg.dce import eliminate_dead_code


def _live_ops(graph):
    return sorted(n.op for n in eliminate_dead_code(eliminate_common_subexpressions(graph)).nodes)


def test_repeated_expressions_become_one_op_with_the_same_values():
    values = np.arange(12, dtype=np.float32).reshape(4, 3)
    outs = {}
    for backend in ("reference", "torch", "jax"):
        ctx = trl.Context(dims="t")
        (t,), (T,) = ctx.dims, ctx.bounds
        with ctx:
            x = trl.source(lambda p: values[p["t"]], (3,), "float32", (t,))
            a = (x * 2.0 + 1.0).tanh()
            b = (x * 2.0 + 1.0).tanh()  # the same expression, written again
            outs[backend] = (collect(a), collect(b), collect(a - b))
        graph = ctx.graph()
        before = sorted(n.op for n in eliminate_dead_code(graph).nodes)
        after = _live_ops(graph)
        assert before.count("tanh") == 2 and after.count("tanh") == 1
        assert after.count("source") == 1 and after.count("sink") == 3
        run(ctx, {T: 4}, backend)
    for backend in ("torch", "jax"):
        for got, want in zip(outs[backend], outs["reference"]):
            assert sorted(got) == sorted(want)
            for key, value in want.items():
                np.testing.assert_allclose(got[key], value, rtol=1e-6)
    np.testing.assert_allclose(outs["reference"][0][(2,)], np.tanh(values[2] * 2 + 1), rtol=1e-6)


def test_draws_sources_and_sinks_are_never_merged():
    calls = []
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        u1 = trl.rand((2,), domain=(t,))
        u2 = trl.rand((2,), domain=(t,))
        s1 = trl.source(lambda p: calls.append(("s1", p["t"])) or 1.0, domain=(t,))
        s2 = trl.source(lambda p: calls.append(("s2", p["t"])) or 1.0, domain=(t,))
        first, second = collect(u1 * 1.0), collect(u2 * 1.0)
        total = collect(s1 + s2)
    ops = _live_ops(ctx.graph())
    assert ops.count("rand") == 2 and ops.count("source") == 2 and ops.count("sink") == 3
    run(ctx, {T: 3}, "torch")
    assert all(not np.array_equal(first[k], second[k]) for k in first)  # two streams, two draws
    assert sorted(calls) == sorted([("s1", k) for k in range(3)] + [("s2", k) for k in range(3)])
    assert all(v == 2.0 for v in total.values())


def test_constants_merge_by_value_and_reads_must_match():
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: float(p["t"]), domain=(t,))
        y = trl.placeholder((), domain=(t,))
        y[0] = x[0]
        y[t + 1] = y[t] + x[t + 1]
        same = collect(x * trl.tensor([3.0]) + x * trl.tensor([3.0]))  # two equal constants, two equal products
        shifted = collect(y[t] * 3.0 + y[t] * 4.0)  # same reads, different constants: not merged
    ops = _live_ops(ctx.graph())
    assert ops.count("mul") == 3  # x*3 once, y*3 and y*4
    run(ctx, {T: 4}, "torch")
    assert [float(same[(k,)][0]) for k in range(4)] == [6.0 * k for k in range(4)]
    assert [float(shifted[(k,)]) for k in range(4)] == [7.0 * sum(range(k + 1)) for k in range(4)]
