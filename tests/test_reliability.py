"""Issue 11: no silent wrong answers and no internal tracebacks. Each test pins one reported failure: it
failed before the fix and checks the behaviour on every backend, against NumPy or the reference."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import timerl as trl
from conftest import assert_values, collect, run

pytest_plugins = ["pytester"]


def next_line() -> str:
    """``file:line`` of the caller's next line: where the error under test must point."""
    return f"test_reliability.py:{sys._getframe(1).f_lineno + 1}"


def _rows(p: dict) -> np.ndarray:
    return np.arange(6.0, dtype=np.float32).reshape(2, 3) + p["t"]


# ---- 1. wrong results ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["gather", "index_select", "one_hot", "negative"])
def test_out_of_range_data_index_is_the_same_error_everywhere(backend, op):
    ctx = trl.Context("t")
    (T,) = ctx.bounds
    index_values = {"gather": [[0, 3]], "index_select": [1, 4], "one_hot": [0, 5], "negative": [-1, 0]}[op]
    with ctx:
        x = trl.source(lambda p: np.arange(6.0).reshape(2, 3), shape=(2, 3), domain=ctx.dims)
        index = trl.tensor(np.array(index_values))
        where = next_line()
        y = x.gather(1, index) if op == "gather" else index.one_hot(3) if op == "one_hot" else x.index_select(1, index)
        collect(y)
    with pytest.raises(trl.IndexOutOfRangeError, match="out of range") as info:
        run(ctx, {T: 2}, backend)
    assert where in str(info.value)


def test_in_range_gather_still_agrees_with_numpy(backend):
    ctx = trl.Context("t")
    (T,) = ctx.bounds
    with ctx:
        x = trl.source(_rows, shape=(2, 3), domain=ctx.dims)
        picked = collect(x.gather(1, trl.tensor(np.array([[2, 0], [1, 1]]))))
        selected = collect(x.index_select(1, trl.tensor(np.array([2, 0, 2]))))
    run(ctx, {T: 3}, backend)
    rows = {(k,): _rows({"t": k}) for k in range(3)}
    assert_values(picked, {p: np.take_along_axis(v, np.array([[2, 0], [1, 1]]), 1) for p, v in rows.items()})
    assert_values(selected, {p: v[:, [2, 0, 2]] for p, v in rows.items()})


def test_symbolic_equality_has_no_truth_value():
    ctx = trl.Context("i t")
    i, t = ctx.dims
    for cond in (t == 0, t != 0, i == t, t >= 0):
        with pytest.raises(trl.TimeRLError, match="ctx.when") as info:
            where = next_line()
            bool(cond)
        assert where in str(info.value)
    assert bool(t == t) and not bool(t != t)  # noqa: PLR0124  (decided: the difference folds to 0)


def test_a_sink_cannot_change_what_other_ops_read(backend):
    """The first sink writes into its value (and swallows any refusal); the second reads the same tensor."""
    ctx = trl.Context("t")
    (T,) = ctx.bounds

    def vandal(point, value):
        for attempt in (lambda: value.__setitem__(..., 1e6), lambda: np.asarray(value).__setitem__(..., 1e6)):
            try:
                attempt()
            except Exception:  # noqa: BLE001  (read-only arrays refuse; clones accept harmlessly)
                pass

    with ctx:
        x = trl.source(lambda p: np.full(3, float(p["t"]), np.float32), shape=(3,), domain=ctx.dims)
        x.sink(vandal)
        after = collect(x * 2.0)
        seen = collect(x)
    run(ctx, {T: 3}, backend)
    assert_values(after, {(k,): np.full(3, 2.0 * k) for k in range(3)})
    assert_values(seen, {(k,): np.full(3, float(k)) for k in range(3)})


# ---- 2. internal exceptions -----------------------------------------------------------------------------------


def test_dims_of_the_same_name_from_two_contexts_are_told_apart():
    ctx, other = trl.Context("t"), trl.Context("t")
    (t,), (t_other,) = ctx.dims, other.dims
    with ctx:
        x = trl.source(lambda p: 1.0, domain=(t,))
        where = next_line()
        with pytest.raises(trl.DomainError, match="another context") as info:
            trl.zeros((2,), domain=(t_other,))
        with pytest.raises(trl.DomainError, match="another context"):
            x[t_other]
        with pytest.raises(trl.DomainError, match="another context"):
            ctx.when(t_other < 2)
    assert f"test_reliability.py:{int(where.split(':')[1]) + 1}" in str(info.value)
    with other:
        y = trl.source(lambda p: 1.0, domain=(t_other,))
    with pytest.raises(trl.TimeRLError, match="different contexts"):
        x + y


@pytest.mark.parametrize("case", ["bound", "shifted", "other context", "name", "bare symbol", "repeated", "list"])
def test_domain_argument_is_validated(case):
    ctx, other = trl.Context("i t"), trl.Context("i t")
    i, t = ctx.dims
    domain = {"bound": (ctx.bounds[1],), "shifted": (t + 1,), "other context": (other.dims[0],), "name": "t",
              "bare symbol": t, "repeated": (t, t), "list": ["t"]}[case]
    with ctx:
        for make in (lambda: trl.zeros((2,), domain=domain), lambda: trl.placeholder((2,), domain=domain),
                     lambda: trl.rand((2,), domain=domain), lambda: trl.param(np.zeros(2), domain=domain)):
            with pytest.raises(trl.DomainError, match="domain") as info:
                make()
            assert f"test_reliability.py:{make.__code__.co_firstlineno}" in str(info.value)


def test_domain_in_another_order_follows_the_context():
    ctx = trl.Context("i t")
    i, t = ctx.dims
    with ctx:
        x = trl.source(lambda p: float(10 * p["i"] + p["t"]), domain=(t, i))
        assert x.domain == (i, t)
        seen = collect(x[1])
    run(ctx, {ctx.bounds[0]: 2, ctx.bounds[1]: 3}, "reference")
    assert_values(seen, {(k,): 10.0 + k for k in range(3)})


def test_reshape_takes_pytorch_forms(backend):
    ctx = trl.Context("t")
    (T,) = ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.arange(12.0, dtype=np.float32) + p["t"], shape=(12,), domain=ctx.dims)
        forms = [collect(x.reshape(12)), collect(x.reshape(4, 3)), collect(x.reshape((3, -1))),
                 collect(x.reshape([2, 2, -1])), collect(x.reshape(-1, 6))]
        with pytest.raises(trl.ShapeError, match="into"):
            x.reshape(5, -1)
        with pytest.raises(trl.ShapeError, match="one size can be -1"):
            x.reshape(-1, -1)
        with pytest.raises(trl.ShapeError, match="sizes are ints"):
            x.reshape("12")
    run(ctx, {T: 2}, backend)
    for store, shape in zip(forms, [(12,), (4, 3), (3, 4), (2, 2, 3), (2, 6)]):
        assert_values(store, {(k,): (np.arange(12.0) + k).reshape(shape) for k in range(2)})


@pytest.mark.parametrize("budget", ["1GB", -1, 1.5, True])
def test_device_memory_is_validated_at_compile(budget):
    ctx = trl.Context("t")
    (T,) = ctx.bounds
    with ctx:
        trl.source(lambda p: 1.0, domain=ctx.dims).sink(lambda p, v: None)
    with pytest.raises(trl.TimeRLError, match="device_memory") as info:
        where = next_line()
        ctx.compile(bounds={T: 2}, backend="torch", device_memory=budget)
    assert where in str(info.value)


# ---- 3. unclear or inconsistent ---------------------------------------------------------------------------------


def test_non_affine_index_is_rejected_at_construction_with_the_line():
    ctx = trl.Context("i t")
    i, t = ctx.dims
    with ctx:
        x = trl.source(lambda p: 1.0, domain=ctx.dims)
        for make in (lambda: x[i, t * t], lambda: x[i, 0:t * i], lambda: ctx.when(t * t < 4)):
            with pytest.raises(trl.DomainError, match="affine") as info:
                make()
            assert f"test_reliability.py:{make.__code__.co_firstlineno}" in str(info.value)


def test_reversed_spatial_slices_agree_with_numpy(backend):
    ctx = trl.Context("t")
    (T,) = ctx.bounds
    keys = [(slice(None), slice(None, None, -1)), (slice(None, None, -1),), (Ellipsis, slice(2, 0, -1)),
            (0, slice(None, None, -2)), (None, slice(None, None, -1), 1), (slice(None), slice(0, 3, -1))]
    with ctx:
        x = trl.source(_rows, shape=(2, 3), domain=ctx.dims)
        stores = [collect(x.spatial[key]) for key in keys]
    run(ctx, {T: 2}, backend)
    for store, key in zip(stores, keys):
        assert_values(store, {(k,): _rows({"t": k})[key] for k in range(2)})


def test_where_needs_a_bool_condition_on_every_backend():
    ctx = trl.Context("t")
    with ctx:
        x = trl.source(lambda p: 1.0, domain=ctx.dims)
        with pytest.raises(trl.ShapeError, match="not bool") as info:
            where = next_line()
            trl.where(x, x, 0.0)
        assert where in str(info.value)
        trl.where(x > 0, x, 0.0)
        trl.where((x > 0).astype("int64").astype("bool"), x, 0.0)


def test_messages_name_what_the_user_wrote():
    ctx = trl.Context("t")
    (t,) = ctx.dims
    with ctx:
        x = trl.source(lambda p: np.zeros(3), shape=(3,), domain=ctx.dims)
        with pytest.raises(trl.ShapeError, match=r"x.spatial\[...\].*symbolic index t"):
            x.spatial[t]


def test_argmax_of_a_window_runs(backend):
    """``x[0:T].argmax()`` flattens a (T, 2) window: its size 2*T is known once T is."""
    ctx = trl.Context("t")
    (T,) = ctx.bounds
    values = {k: np.array([[3.0 * k, 1.0], [0.5, 2.0 * k]], np.float32)[k % 2] for k in range(3)}
    with ctx:
        x = trl.source(lambda p: values[p["t"]], shape=(2,), domain=ctx.dims)
        flat = collect(x[0:T].argmax())
        window = collect(x[ctx.dims[0]:T].argmax())
    run(ctx, {T: 3}, backend)
    stacked = np.stack([values[k] for k in range(3)])
    assert_values(flat, {(): np.argmax(stacked)})
    assert_values(window, {(k,): np.argmax(stacked[k:]) for k in range(3)})


# ---- 4. tests that could pass while broken -----------------------------------------------------------------------


def test_a_backend_that_cannot_load_fails_its_tests(pytester):
    """With the compiled backends unimportable, the shared fixtures must fail torch and jax, never skip."""
    from pathlib import Path

    pytester.makeconftest(Path(__file__).with_name("conftest.py").read_text())
    pytester.makepyfile(test_blocked="""
        import sys
        import pytest
        import timerl as trl
        from conftest import collect, run

        @pytest.fixture(autouse=True)
        def no_compiled_backends(monkeypatch):
            monkeypatch.setitem(sys.modules, "timerl.backends.torch_backend", None)
            monkeypatch.setitem(sys.modules, "timerl.backends.jax_backend", None)

        def test_program(backend):
            ctx = trl.Context("t")
            with ctx:
                collect(trl.source(lambda p: 1.0, domain=ctx.dims))
            run(ctx, {ctx.bounds[0]: 2}, backend)
    """)
    outcome = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider")
    outcome.assert_outcomes(passed=1, failed=2)


# ---- found by the fuzzer (tests/test_fuzz.py) ------------------------------------------------------------------


def test_ops_along_a_dimension_of_a_0d_tensor_agree(backend):
    """torch takes dim 0 or -1 of a 0-d tensor (reductions, cumsum, softmax, argmax, squeeze); NumPy did not,
    so torch returned values where the reference raised, and cumsum had shape (1,) on torch only."""
    ctx = trl.Context("t")
    (T,) = ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.float32(0.5 + p["t"]), domain=ctx.dims)
        stores = [collect(y) for y in (x.sum(0), x.max(-1), x.mean(0, keepdim=True), x.cumsum(0), x.softmax(),
                                       x.log_softmax(0), x.argmax(0), x.squeeze(0))]
        for bad in (lambda: x.sum(1), lambda: x.index_select(0, trl.tensor(np.array([0]))), lambda: x.flip(0)):
            with pytest.raises(trl.ShapeError, match="dim"):
                bad()
    run(ctx, {T: 2}, backend)
    value = {(k,): np.float32(0.5 + k) for k in range(2)}
    for store, expected in zip(stores, [value, value, value, value, {p: 1.0 for p in value},
                                        {p: 0.0 for p in value}, {p: 0 for p in value}, value]):
        assert_values(store, expected)


def test_integer_to_a_negative_integer_power_is_refused_everywhere(backend):
    """NumPy raised, torch and jax returned truncated values: now one ShapeError on every backend."""
    ctx = trl.Context("t")
    (T,) = ctx.bounds
    with ctx:
        base = trl.source(lambda p: np.array([2, 3], np.int64), shape=(2,), dtype="int64", domain=ctx.dims)
        exponent = trl.source(lambda p: np.array([1, -p["t"]], np.int64), shape=(2,), dtype="int64",
                              domain=ctx.dims)
        where = next_line()
        powers = collect(base ** exponent)
        floats = collect(base.astype("float64") ** exponent)
    with pytest.raises(trl.ShapeError, match="negative integer powers") as info:
        run(ctx, {T: 2}, backend)
    assert where in str(info.value)
    run(ctx, {T: 1}, backend)
    assert_values(powers, {(0,): np.array([2, 1])})
    assert_values(floats, {(0,): np.array([2.0, 1.0])})
