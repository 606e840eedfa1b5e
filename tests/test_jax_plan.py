"""The jax lowering (`timerl.runtime.jax_plan`): random draws inside the jit with `rng.py`'s bits, impure
members moved out of the way of the jitted part, jitted functions shared between groups and executables, and
the backend's row access. Values are always compared with the reference interpreter (exactly)."""

from __future__ import annotations

import logging
import re
import sys

import jax
import numpy as np
import pytest

import timerl as trl
from timerl.backends import jax_keys
from timerl.backends.jax_backend import JaxBackend
from timerl.runtime import jax_rng, rng

from conftest import assert_values, collect, run


@pytest.mark.parametrize("op, dtype, shape", [("rand", "float32", (16, 2)), ("rand", "float64", (5,)),
                                              ("randn", "float32", (7, 3)), ("rand", "float32", ())])
def test_device_draws_have_the_hosts_bits(op, dtype, shape):
    with jax.enable_x64(True):
        draw = jax.jit(jax_rng.drawer(jax.numpy, 20260123, 28, shape, dtype, op == "randn"))
        for point in [(0,), (3, 199), (99, 12345, 7), (2 ** 40, 1)]:
            got = np.asarray(draw(*point))
            want = rng.draw(20260123, 28, point, shape, dtype, op == "randn")
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want, err_msg=f"{op} {dtype} at {point}")


def test_float64_normals_stay_on_the_host():
    # XLA's float64 log1p/cos may differ from NumPy's in the last bit: not exact, so not on the device
    assert not jax_rng.on_device("randn", "float64")
    assert jax_rng.on_device("randn", "float32") and jax_rng.on_device("rand", "float64")


def mixed_group():
    """One group per point: two sources, a uniform draw, elementwise ops, an ``index_select`` (its indices
    checked) in the middle, and sinks."""
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.arange(4, dtype=np.float32) + p["t"], shape=(4,), dtype="float32", domain=(t,))
        u = trl.rand((4,), domain=(t,))
        index = trl.source(lambda p: np.array([p["t"] % 4, 0]), shape=(2,), dtype="int64", domain=(t,))
        y = (x * 0.1 + u).tanh()
        w = (y * 2.0 - 1.0).index_select(0, index).exp() + 1.0
        stores = [collect(u), collect(w)]
    return ctx, T, stores


def test_draws_run_inside_the_jit_and_match_the_reference():
    ctx, T, stores = mixed_group()
    exe = ctx.compile(bounds={T: 6}, backend="jax", seed=3, options=trl.CompileOptions())  # jit_groups: pinned
    exe.execute()
    on_jax = [dict(store) for store in stores]
    reference = run(ctx, {T: 6}, "reference", seed=3)
    for got, want, exact in zip(on_jax, reference, (True, False)):
        assert sorted(got) == sorted(want) and len(want) == 6
        for key in want:
            if exact:  # the draws, bit for bit
                np.testing.assert_array_equal(got[key], want[key])
            else:  # XLA's tanh and exp may differ from NumPy's in the last bit
                np.testing.assert_allclose(got[key], want[key], rtol=1e-6)
    sources = "\n".join(f.source for f in exe.group_functions.values())
    draw = next(n for n in exe.graph.nodes if n.op == "rand")
    assert f"N{draw.id}," not in sources and f"D{draw.id}(" not in sources  # not evaluated on the host
    assert any(f"= F{g}(p0," in f.source for g, f in exe.group_functions.items())  # the point goes in


def test_impure_members_move_before_the_jitted_part():
    """The sources run first, so the draw and the elementwise ops around it form one jitted call."""
    ctx, T, _ = mixed_group()
    exe = ctx.compile(bounds={T: 3}, backend="jax", options=trl.CompileOptions())  # jit_groups: pinned
    group = next(f for f in exe.group_functions.values() if "= F" in f.source)
    lines = group.source.splitlines()
    fused = next(k for k, line in enumerate(lines) if "= F" in line)
    sources = [n.id for n in exe.graph.nodes if n.op == "source"]
    for source in sources:
        evaluated = next(k for k, line in enumerate(lines) if f"evaluate(N{source}," in line)
        assert evaluated < fused
    # the index_select, whose indices are checked inside the jit, is part of it; the host raises after the call
    select = next(n.id for n in exe.graph.nodes if n.op == "index_select")
    assert not any(f"evaluate(N{select}," in line for line in lines)
    assert f"raise_first(V{group.__name__[1:]}, found, point)" in [line.strip() for line in lines[fused + 1:]]


def next_line() -> str:
    """``file:line`` of the caller's next line: where an error under test must point."""
    return f"test_jax_plan.py:{sys._getframe(1).f_lineno + 1}"


CHECKED = {"gather": 3, "index_select": 1, "one_hot": 2, "pow": 2}  # op -> the shift that breaks its input


def checked_ops(bad: str = "", bad_at: int = -1):
    """Every op with a check of input values, in one group per point, reading indices shifted by a source: in
    range, except ``bad``'s at ``t == bad_at``."""
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    lines = {}

    def shift(op: str):
        value = lambda p: np.array(CHECKED[op] if op == bad and p["t"] == bad_at else 0)  # noqa: E731
        return trl.source(value, shape=(), dtype="int64", domain=(t,))

    with ctx:
        x = trl.source(lambda p: np.arange(6, dtype=np.float32).reshape(2, 3) * (p["t"] + 1), shape=(2, 3),
                       dtype="float32", domain=(t,))
        lines["gather"] = next_line()
        picked = x.gather(1, trl.tensor(np.array([[2, 0], [1, 1]])) + shift("gather"))
        lines["index_select"] = next_line()
        selected = picked.index_select(1, trl.tensor(np.array([1, 0])) - shift("index_select"))
        lines["one_hot"] = next_line()
        hot = (trl.tensor(np.array([1, 0])) + shift("one_hot")).one_hot(3)
        lines["pow"] = next_line()
        power = hot.sum(0) ** (trl.tensor(np.array([2, 1, 1])) - shift("pow"))
        stores = [collect(selected * 0.5 + 1.0), collect(hot), collect(power)]
    return ctx, T, stores, lines


def test_value_checks_run_inside_the_jit():
    ctx, T, stores, lines = checked_ops()
    exe = ctx.compile(bounds={T: 4}, backend="jax", options=trl.CompileOptions())  # jit_groups: pinned
    exe.execute()
    got = [dict(store) for store in stores]
    for got_values, want_values in zip(got, run(ctx, {T: 4}, "reference")):
        assert_values(got_values, want_values)
    sources = "\n".join(f.source for f in exe.group_functions.values())
    assert all(f"evaluate(N{node.id}," not in sources for node in exe.graph.nodes if node.op in lines)
    assert all(f.source.count(" = F") <= 1 for f in exe.group_functions.values())  # one jitted call per group


@pytest.mark.parametrize("bad, message", [("gather", "index 5 is out of range for a dimension of size 3"),
                                          ("index_select", "index -1 is out of range for a dimension of size 2"),
                                          ("one_hot", "index 3 is out of range for a dimension of size 3"),
                                          ("pow", "negative integer powers")])
def test_a_value_check_failing_inside_the_jit_raises_as_on_the_host(bad, message):
    """The error, its message, the user's line and the point, as the reference and torch raise it before their
    kernel, raised after the jitted call; at the first point and at a later one."""
    for bad_at in (0, 2):
        errors = []
        for backend in ("reference", "torch", "jax"):
            ctx, T, _, lines = checked_ops(bad, bad_at)
            with pytest.raises(trl.TimeRLError) as info:
                ctx.compile(bounds={T: 4}, backend=backend).execute()
            errors.append(info.value)
        kind = trl.ShapeError if bad == "pow" else trl.IndexOutOfRangeError
        assert all(type(e) is kind for e in errors), errors
        assert len({re.sub(r"%\d+", "%", str(e)) for e in errors}) == 1, errors  # the reference numbers nodes apart
        assert lines[bad] in str(errors[0]) and f"{{'t': {bad_at}}}" in str(errors[0]) and message in str(errors[0])


def test_user_calls_keep_their_order():
    calls: list = []
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.float32(p["t"]), shape=(), dtype="float32", domain=(t,))
        (x * 2.0).sink(lambda p, v: calls.append(("first", p["t"])))
        y = trl.source(lambda p: np.float32(1.0), shape=(), dtype="float32", domain=(t,))
        (x + y).sink(lambda p, v: calls.append(("second", p["t"])))
    ctx.compile(bounds={T: 3}, backend="torch").execute()  # the same schedule, members in the program's order
    expected, calls[:] = list(calls), []
    ctx.compile(bounds={T: 3}, backend="jax").execute()
    assert calls == expected and len(calls) == 6


class _CompileCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("Compiling "):
            self.count += 1


def policy_program():
    """A per-step policy: three layers and a Gumbel-max sample, as REINFORCE's acting group."""
    ctx = trl.Context(dims="i t")
    (i, t), (I, T) = ctx.dims, ctx.bounds
    with ctx:
        obs = trl.source(lambda p: np.full((8, 4), 0.1 * p["t"], np.float32), shape=(8, 4), dtype="float32",
                         domain=(i, t))
        net = trl.nn.MLP([4, 16, 16, 2], activation="tanh", domain=(i,))
        action = trl.distributions.Categorical(logits=net(obs)).sample()
        store = collect(action)
    return ctx, {I: 1, T: 40}, store


def test_a_program_compiled_twice_compiles_nothing_new():
    counter = _CompileCounter()
    loggers = [logging.getLogger(name) for name in ("jax._src.interpreters.pxla", "jax._src.dispatch")]
    previous = jax.config.jax_log_compiles
    jax.config.update("jax_log_compiles", True)
    for logger in loggers:
        logger.addHandler(counter)
    try:
        ctx, bounds, store = policy_program()
        pinned = trl.CompileOptions()  # the shared jits of jit_groups (off: a second executable compiles again)
        run(ctx, bounds, "jax", seed=1, options=pinned)
        first, counter.count = counter.count, 0
        hits = jax_keys.stats["hits"]
        run(ctx, bounds, "jax", seed=1, options=pinned)
        second = counter.count
    finally:
        jax.config.update("jax_log_compiles", previous)
        for logger in loggers:
            logger.removeHandler(counter)
    assert first > 0
    assert second == 0, f"the second executable compiled {second} computations"
    assert jax_keys.stats["hits"] > hits
    jax_values = dict(store)
    run(ctx, bounds, "reference", seed=1)
    assert len(store) == 40
    for key, want in store.items():
        np.testing.assert_array_equal(jax_values[key], want)


def test_a_seed_is_part_of_a_draws_structure():
    ctx, bounds, store = policy_program()
    samples = {}
    for seed in (1, 2):
        run(ctx, bounds, "jax", seed=seed)
        samples[seed] = np.stack([store[k] for k in sorted(store)])
        run(ctx, bounds, "reference", seed=seed)
        np.testing.assert_array_equal(samples[seed], np.stack([store[k] for k in sorted(store)]))
    assert not np.array_equal(samples[1], samples[2])


def test_structure_keys():
    assert jax_keys.freeze(0.0) != jax_keys.freeze(-0.0)
    assert jax_keys.freeze(1) != jax_keys.freeze(1.0) != jax_keys.freeze(True)
    assert jax_keys.freeze({"dims": [0, 1]}) == jax_keys.freeze({"dims": [0, 1]})
    assert jax_keys.freeze(np.zeros(3)) != jax_keys.freeze(np.zeros(3, np.float32))


def test_rows_and_unstack_equal_indexing():
    backend = JaxBackend()
    with backend.session():
        value = jax.numpy.asarray(np.arange(24, dtype=np.float64).reshape(4, 3, 2))
        rows = backend.unstack(value)
        assert len(rows) == 4
        for k in range(4):
            np.testing.assert_array_equal(np.asarray(rows[k]), np.asarray(value)[k])
            np.testing.assert_array_equal(np.asarray(backend.row(value, k)), np.asarray(value)[k])
            assert rows[k].dtype == value.dtype


def test_constants_built_into_the_jit_leave_no_lines_on_the_host():
    """A group's constants read only inside its jitted function are constants of that function: the group binds
    no local name to them (and no `del`); values are the reference's."""
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        c = (trl.tensor(np.arange(4, dtype=np.float32)) * 2.0 + 1.0).exp()
        x = trl.source(lambda p: np.full(4, p["t"], np.float32), shape=(4,), dtype="float32", domain=(t,))
        stores = [collect(x + c)]
    exe = ctx.compile(bounds={T: 3}, backend="jax", options=trl.CompileOptions())  # jit_groups: pinned
    exe.execute()
    got = dict(stores[0])
    sources = "\n".join(f.source for f in exe.group_functions.values())
    constants = [n.id for n in exe.graph.nodes if n.op == "const"]
    assert constants and "= F" in sources
    assert not any(re.search(rf"\bC{n}\b|\bv{n}_0\b", sources) for n in constants), sources
    assert_values(got, run(ctx, {T: 3}, "reference")[0], rtol=1e-6)
