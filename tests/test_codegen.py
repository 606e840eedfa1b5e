"""The loop program generated as Python (timerl.runtime.codegen) against the interpreter's closures it
replaces and against the reference: same values, same memory accounting, every point freed."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl
from conftest import collect
from test_vectorize import STEPS, policy_gradient_program
from timerl.runtime.executor import _Interpreter


def _run(backend: str, generated: bool, options: dict):
    if backend == "jax":  # the interpreter's closures run no scans (those are tested in test_jax_scan_loops.py)
        options = dict(options, scan_loops=False)
    ctx, I, T, grads, losses = policy_gradient_program()
    exe = ctx.compile({I: 1, T: STEPS}, backend=backend, **options)
    if not generated and backend != "reference":
        exe._program = _Interpreter(exe).build(exe.schedule.root, ())
    exe.execute()
    return exe, [dict(g) for g in grads], dict(losses)


@pytest.mark.parametrize("backend", ["torch", "jax"])
@pytest.mark.parametrize("options", [{}, {"vectorize": False}], ids=["vectorized", "pointwise"])
def test_generated_program_matches_interpreter_and_reference(backend, options):
    exe, grads, losses = _run(backend, True, options)
    assert "for c" in exe._program.source and "def program" in exe._program.source
    oracle, oracle_grads, oracle_losses = _run(backend, False, options)
    _, reference_grads, reference_losses = _run("reference", False, {})
    assert exe.stats["peak_device_bytes"] == oracle.stats["peak_device_bytes"]
    assert exe.stats["leaked_points"] == oracle.stats["leaked_points"] == 0
    for got, want in ((losses, oracle_losses), (losses, reference_losses)):
        assert sorted(got) == sorted(want)
        for key, value in want.items():
            np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-6)
    for got_all, want_all in ((grads, oracle_grads), (grads, reference_grads)):
        for got, want in zip(got_all, want_all):
            assert sorted(got) == sorted(want)
            for key, value in want.items():
                np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-5)


def test_budgeted_programs_keep_the_interpreter():
    """With device_memory each statement clears the pool's pins first: no generated program there."""
    ctx, I, T, grads, losses = policy_gradient_program()
    exe = ctx.compile({I: 1, T: STEPS}, backend="torch", device_memory=10**9)
    assert not hasattr(exe._program, "source")
    exe.execute()
    assert exe.stats["leaked_points"] == 0


def _dense_program(bias_dtype: str, read_product: bool):
    """``tanh(x @ w + b)`` per step, optionally with the product also read by a sink."""
    ctx = trl.Context("t")
    (t,), (T,) = ctx.dims, ctx.bounds
    rng = np.random.default_rng(0)
    seen: dict = {}
    with ctx:
        x = trl.source(lambda p: rng.standard_normal((3, 4)).astype(np.float32), shape=(3, 4), dtype="float32",
                       domain=(t,))
        w = trl.tensor(rng.standard_normal((4, 5)).astype(np.float32))
        b = trl.tensor(rng.standard_normal(5).astype(bias_dtype), dtype=bias_dtype)
        product = x @ w
        y = (product + b).tanh()
        y.sink(lambda p, v: seen.__setitem__(("y", p["t"]), np.asarray(v)))
        if read_product:
            product.sink(lambda p, v: seen.__setitem__(("product", p["t"]), np.asarray(v)))
    return ctx, T, seen


@pytest.mark.parametrize("bias_dtype, read_product, folded", [("float32", False, True), ("float32", True, False),
                                                              ("float64", False, False)])
def test_dense_layers_fold_into_one_kernel_where_types_and_readers_allow(bias_dtype, read_product, folded):
    """``x @ w + b`` becomes one fused kernel on torch only where nothing else reads the product and no type
    promotion is involved; values and types equal the reference's either way."""
    results = {}
    for backend in ("torch", "reference"):
        ctx, T, seen = _dense_program(bias_dtype, read_product)
        exe = ctx.compile({T: 4}, backend=backend, seed=3, options=trl.CompileOptions())  # matmul_add: pinned
        exe.execute()
        results[backend] = seen
        if backend == "torch":
            sources = "\n".join(f.source for f in exe.group_functions.values() if hasattr(f, "source"))
            matmul = next(n.id for n in exe.graph.nodes if n.op == "matmul")
            assert (f"m = {matmul}\n" not in sources + "\n") == folded  # folded: computed by the add's kernel
    assert results["torch"].keys() == results["reference"].keys()
    for key, want in results["reference"].items():
        got = results["torch"][key]
        assert got.dtype == want.dtype, key
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _noise_program(T_value: int):
    """Gumbel noise per step, summed into a running recurrence so that the step loop stays sequential."""
    ctx = trl.Context("i t")
    (i, t), (I, T) = ctx.dims, ctx.bounds
    seen: dict = {}
    with ctx:
        u = trl.rand((3, 2), domain=(i, t))
        gumbel = -(-(u.clip(1e-20, float("inf"))).log()).log()
        z = trl.randn((2,), domain=(i, t)) * 0.5
        acc = trl.placeholder((3, 2), domain=(i, t))
        acc[i, 0] = gumbel[i, 0]
        acc[i, t + 1] = (acc[i, t] * 0.5 + gumbel[i, t + 1] + z[i, t + 1]).tanh()
        acc.sink(lambda p, v: seen.__setitem__((p["i"], p["t"]), np.asarray(v)))
    return ctx, {I: 2, T: T_value}, seen


@pytest.mark.parametrize("steps", [5, 70])
def test_draws_computed_ahead_in_runs_equal_the_draws_point_by_point(steps):
    """Draws and the noise computed from them come ahead of time, a run of points at once (on torch without a
    budget): the same values as the reference, which draws point by point, and their bytes are given back;
    each point takes only the values read beyond the chain."""
    results = {}
    for backend in ("torch", "reference"):
        ctx, bounds, seen = _noise_program(steps)
        exe = ctx.compile(bounds, backend=backend, seed=11, options=trl.CompileOptions())  # prefetch: pinned
        exe.execute()
        results[backend] = seen
        if backend == "torch":
            assert len(exe.prefetchers) == 2 and all(p.held == 0 for p in exe.prefetchers)
            # each hands out only the value read beyond its chain (the Gumbel noise, not its four intermediates)
            assert [len(p.kept) for p in exe.prefetchers] == [1, 1]
            assert max(len(p.steps) for p in exe.prefetchers) == 5
            assert exe.stats["leaked_points"] == 0
    assert results["torch"].keys() == results["reference"].keys()
    for key, want in results["reference"].items():
        np.testing.assert_allclose(results["torch"][key], want, rtol=1e-5, atol=1e-6)


def test_draw_keys_of_many_points_are_the_keys_point_by_point():
    """`rng.draw_many` keys a run of points with array arithmetic (uint64, wrapping): the same keys, and so the
    same draws, as the per-point Python mix, for points of every rank, negative and large coordinates included."""
    from timerl.runtime import rng

    generator = np.random.default_rng(0)
    for rank in (0, 1, 2, 3):
        points = [tuple(int(c) for c in generator.integers(-2 ** 40, 2 ** 40, rank)) for _ in range(40)]
        points += [(-1,) * rank, (0,) * rank]
        want = np.array([rng._key(7, 28, point) for point in points], dtype=np.uint64)
        np.testing.assert_array_equal(rng._keys(7, 28, points), want)
        for normal in (False, True):
            np.testing.assert_array_equal(rng.draw_many(7, 28, points, (3,), "float32", normal),
                                          np.stack([rng.draw(7, 28, point, (3,), "float32", normal)
                                                    for point in points]))


@pytest.mark.parametrize("keep_middle", [False, True])
def test_ops_write_into_the_buffer_of_an_input_that_dies_there(keep_middle):
    """Donation (paper §6.2), torch: ``exp`` writes into the product it reads last, ``tanh`` into that, unless
    the value is also stored (then it must survive); values equal the reference's, donations are counted."""
    values = np.random.default_rng(5).standard_normal((4, 3)).astype(np.float32)
    results = {}
    for backend in ("torch", "reference"):
        ctx = trl.Context("t")
        (t,), (T,) = ctx.dims, ctx.bounds
        with ctx:
            x = trl.source(lambda p: values[p["t"]], (3,), "float32", (t,))
            middle = (x * 0.5).exp()
            final = collect(middle.tanh())
            kept = collect(middle) if keep_middle else None
        exe = ctx.compile({T: 4}, backend=backend, options=trl.CompileOptions())  # donation on: pinned
        exe.execute()
        results[backend] = (dict(final), None if kept is None else dict(kept))
        if backend == "torch":
            sources = "\n".join(f.source for f in exe.group_functions.values() if hasattr(f, "source"))
            donated = sources.count(", out=")
            assert donated == (1 if keep_middle else 2), sources
            assert exe.stats["donated_bytes"] == donated * 3 * 4 * 4  # float32[3] per op, 4 steps
    for key, want in results["reference"][0].items():
        np.testing.assert_allclose(results["torch"][0][key], want, rtol=1e-6)
        np.testing.assert_allclose(want, np.tanh(np.exp(values[key[0]] * 0.5)), rtol=1e-6)
    if keep_middle:
        for key, want in results["reference"][1].items():
            np.testing.assert_allclose(results["torch"][1][key], want, rtol=1e-6)


def test_a_run_of_frees_and_a_fused_calls_stores_are_one_pool_call_each():
    """A run of consecutive deallocations is one `free_many` call, and the stores after a jitted call are one
    `store_many` call (values and the pool's accounting against the interpreter: the test above)."""
    exe, _, _ = _run("jax", True, {"vectorize": False})
    lines = exe._program.source.splitlines()
    assert any("free_many([" in line for line in lines)
    assert not any(line.strip().startswith(("free((", "free_outputs((", "_p =")) for line in lines), lines
    for line, after in zip(lines, lines[1:]):  # two calls in a row at one depth would be one run
        assert not ("free_many(" in line and "free_many(" in after
                    and len(line) - len(line.lstrip()) == len(after) - len(after.lstrip())), exe._program.source
    groups = [f.source for f in exe.group_functions.values()]
    assert any("store_many(point, (" in source for source in groups)
    for source in groups:
        body = [line.strip() for line in source.splitlines()]
        assert not any(line.startswith("store(") and after.startswith("store(")
                       for line, after in zip(body, body[1:])), source
