"""Every error class of the SPEC, each naming the file and line of the user's code that caused it."""

from __future__ import annotations

import contextlib
import os
import sys

import numpy as np
import pytest
from conftest import collect, run

import timerl as trl

FILE = os.path.basename(__file__)


def next_line() -> int:
    """The line number of the caller's next line: the statement whose error we expect."""
    return sys._getframe(1).f_lineno + 1


def line_of(function) -> int:
    return function.__code__.co_firstlineno


@contextlib.contextmanager
def raises(error: type, line: int | None = None, *fragments: str):
    """Expect ``error`` with a message naming ``line`` (default: the line just below the ``with``)."""
    if line is None:
        line = sys._getframe(2).f_lineno + 1
    with pytest.raises(error) as info:
        yield info
    message = str(info.value)
    assert isinstance(info.value, trl.TimeRLError)
    assert f"{FILE}:{line}" in message, f"message does not name {FILE}:{line}: {message}"
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def time_context():
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    return ctx, t, T


def test_error_classes_are_timerl_errors():
    for error in (trl.ShapeError, trl.DomainError, trl.ScheduleError, trl.DeviceOutOfMemoryError):
        assert issubclass(error, trl.TimeRLError)


# ---- ShapeError -----------------------------------------------------------------------------------------


def test_shape_error_on_broadcast():
    ctx, t, _T = time_context()
    with ctx:
        x, y = trl.zeros((3,), domain=(t,)), trl.ones((4,))
        with raises(trl.ShapeError, None, "(3,)", "(4,)"):
            x + y


SHAPE_MISTAKES = {
    "matmul": lambda x: x @ trl.ones((4, 5)),
    "reshape": lambda x: x.reshape((4, 2)),
    "cat_rank": lambda x: trl.cat([x, trl.ones((2,))]),
    "stack_shapes": lambda x: trl.stack([x, trl.ones((3, 2))]),
    "sum_dim": lambda x: x.sum(dim=5),
    "softmax_dim": lambda x: x.softmax(dim=-3),
    "permute": lambda x: x.permute(0, 0),
    "expand": lambda x: x.expand(4, 4),
    "gather_rank": lambda x: x.gather(1, trl.zeros((2,), dtype="int64")),
    "index_select_rank": lambda x: x.index_select(0, trl.zeros((2, 2), dtype="int64")),
    "spatial_too_many": lambda x: x.spatial[0, 0, 0],
    "spatial_out_of_range": lambda x: x.spatial[:, 3],
    "discounted_scalar": lambda x: x.sum().discounted_sum(0.9),
    "where": lambda x: trl.where(x > 0, x, trl.ones((5,))),
}


CREATION_MISTAKES = {
    "ragged": lambda x: trl.tensor([[1.0, 2.0], [3.0]]),
    "string_value": lambda x: trl.tensor("abc"),
    "unknown_dtype": lambda x: trl.zeros((2,), dtype="float99"),
    "astype_unknown": lambda x: x.astype("float99"),
    "placeholder_dtype": lambda x: trl.placeholder((2,), "floaty"),
    "negative_shape": lambda x: trl.zeros((2, -1)),
    "shape_not_ints": lambda x: trl.rand("ab"),
    "empty_cat": lambda x: trl.cat([]),
    "empty_stack": lambda x: trl.stack([]),
    "float_dim": lambda x: x.sum(dim=1.5),
    "unsqueeze_dim": lambda x: x.unsqueeze(4),
    "float_gather_index": lambda x: x.gather(1, trl.zeros((2, 3))),
    "float_index_select": lambda x: x.index_select(0, trl.zeros((2,))),
    "float_one_hot": lambda x: x.one_hot(3),
    "float_spatial_index": lambda x: x.spatial[1.5],
}


@pytest.mark.parametrize("mistake", sorted(CREATION_MISTAKES))
def test_creation_mistakes_are_shape_errors(mistake):
    ctx, t, _T = time_context()
    with ctx:
        x = trl.zeros((2, 3), domain=(t,))
        with raises(trl.ShapeError, line_of(CREATION_MISTAKES[mistake])):
            CREATION_MISTAKES[mistake](x)


@pytest.mark.parametrize("mistake", sorted(SHAPE_MISTAKES))
def test_shape_errors_name_the_line(mistake):
    ctx, t, _T = time_context()
    with ctx:
        x = trl.zeros((2, 3), domain=(t,))
        with raises(trl.ShapeError, line_of(SHAPE_MISTAKES[mistake])):
            SHAPE_MISTAKES[mistake](x)


def test_logical_operators_take_bool_tensors():
    # `|` is logical on RTs: an int32 operand would silently become bool (PyTorch's `|` is bitwise there)
    ctx, t, _T = time_context()
    with ctx:
        edges = trl.tensor(np.array([1, 0, 2], np.int32))
        mask = edges > 0
        with raises(trl.ShapeError, None, "'|'", "int32"):
            edges | mask
        with raises(trl.ShapeError, None, "'&'", "int32"):
            mask & edges
        with raises(trl.ShapeError, None, "'~'", "int32"):
            ~edges
        assert (mask | (edges == 2)).dtype == "bool" and (True & mask).dtype == "bool"


def test_shape_error_assigning_to_placeholder():
    ctx, t, _T = time_context()
    with ctx:
        o = trl.placeholder((3,), "float32", domain=(t,))
        with raises(trl.ShapeError, None, "(2,)", "(3,)"):
            o[t] = trl.zeros((2,))


def test_float_assigned_to_an_int_placeholder_is_an_error():
    """PyTorch's ``x[...] = v`` truncates a float into an int tensor silently; an assignment here names its line."""
    ctx, t, _T = time_context()
    with ctx:
        o = trl.placeholder((3,), "int32", domain=(t,))
        with raises(trl.ShapeError, None, "float32", "int32"):
            o[t] = trl.zeros((3,)) + 0.5


def test_shape_error_from_a_source_at_run_time(backend):
    ctx, t, T = time_context()
    with ctx:
        line = next_line()
        x = trl.source(lambda p: np.zeros(3), shape=(2,), domain=(t,))
        collect(x * 2.0)
    with raises(trl.ShapeError, line, "(3,)", "(2,)"):
        run(ctx, {T: 2}, backend)


def test_tensors_of_two_contexts_cannot_meet():
    first, t, _ = time_context()
    second, s, _ = time_context()
    with first:
        x = trl.zeros((), domain=(t,))
    with second:
        y = trl.zeros((), domain=(s,))
        with raises(trl.ShapeError):
            x + y


# ---- DomainError ------------------------------------------------------------------------------------------


def test_reading_past_the_end_outside_any_branch(backend):
    ctx, t, T = time_context()
    with ctx:
        x = trl.source(lambda p: float(p["t"]), domain=(t,))
        line = next_line()
        y = x[t + 1] * 2.0
        collect(y)
    with raises(trl.DomainError, line):
        run(ctx, {T: 4}, backend)


def test_reading_a_window_past_the_end(backend):
    ctx, t, T = time_context()
    with ctx:
        x = trl.source(lambda p: float(p["t"]), domain=(t,))
        line = next_line()
        y = x[t:t + 3].sum()
        collect(y)
    with raises(trl.DomainError, line):
        run(ctx, {T: 5}, backend)


def test_reading_a_point_no_branch_defines(backend):
    ctx, t, T = time_context()
    with ctx:
        line = next_line()
        o = trl.placeholder((), "float32", domain=(t,))
        o[0] = 1.0
        o[t + 2] = o[t] + 1.0          # t = 1 is never defined
        collect(o * 1.0)
    with raises(trl.DomainError, line):
        run(ctx, {T: 4}, backend)


@pytest.mark.parametrize("index", ["T", "5", "-1", "T+2-t+t"])
def test_constant_index_out_of_range_at_compile_time(index):
    ctx, t, T = time_context()
    with ctx:
        x = trl.source(lambda p: 0.0, domain=(t,))
        position = {"T": T, "5": 5, "-1": -1, "T+2-t+t": T + 2 - t + t}[index]
        line = next_line()
        y = x[position] + 1.0
        collect(y)
    with raises(trl.DomainError, line):
        ctx.compile(bounds={T: 5}, backend="reference")


def test_fixed_range_out_of_range_at_compile_time():
    ctx, t, T = time_context()
    with ctx:
        x = trl.source(lambda p: 0.0, domain=(t,))
        line = next_line()
        y = x[0:T + 1].sum()
        collect(y)
    with raises(trl.DomainError, line):
        ctx.compile(bounds={T: 5}, backend="reference")


def test_reading_outside_a_when_block(backend):
    ctx, t, T = time_context()
    with ctx:
        x = trl.source(lambda p: float(p["t"]), domain=(t,))
        with ctx.when(t < 2):
            line = next_line()
            early = x * 2.0
        collect(early + 1.0)                  # read at every t: t = 2 is outside `early`'s domain
    with raises(trl.DomainError, line):
        run(ctx, {T: 4}, backend)


def test_overlapping_branches(backend):
    ctx, t, T = time_context()
    with ctx:
        line = next_line()
        o = trl.placeholder((), "float32", domain=(t,))
        o[t] = 1.0
        o[0] = 2.0
        collect(o * 1.0)
    with raises(trl.DomainError, line):
        run(ctx, {T: 3}, backend)


def test_placeholder_never_assigned():
    ctx, t, T = time_context()
    with ctx:
        line = next_line()
        o = trl.placeholder((), "float32", domain=(t,))
        collect(o * 1.0)
    with raises(trl.DomainError, line):
        ctx.compile(bounds={T: 3}, backend="reference")


DOMAIN_MISTAKES = {
    "too_many_indices": lambda x, t, T: x[t, t],
    "step_slice": lambda x, t, T: x[0:T:2],
    "float_index": lambda x, t, T: x[1.5],
    "foreign_symbol": lambda x, t, T: x[trl.Context(dims="s").dims[0]],
}


@pytest.mark.parametrize("mistake", sorted(DOMAIN_MISTAKES))
def test_bad_domain_indices(mistake):
    ctx, t, T = time_context()
    with ctx:
        x = trl.zeros((), domain=(t,))
        with raises(trl.DomainError, line_of(DOMAIN_MISTAKES[mistake])):
            DOMAIN_MISTAKES[mistake](x, t, T)


ASSIGN_MISTAKES = {
    "scaled_index": lambda o, x, t, i: o.__setitem__(2 * t, x),
    "other_dim_index": lambda o, x, t, i: o.__setitem__(i, x),
    "slice": lambda o, x, t, i: o.__setitem__(slice(0, 2), x),
    "rhs_extra_dim": lambda o, x, t, i: o.__setitem__(t, trl.zeros((), domain=(i, t))),
}


@pytest.mark.parametrize("mistake", sorted(ASSIGN_MISTAKES))
def test_bad_assignments(mistake):
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    with ctx:
        o = trl.placeholder((), "float32", domain=(t,))
        x = trl.zeros((), domain=(t,))
        with raises(trl.DomainError, line_of(ASSIGN_MISTAKES[mistake])):
            ASSIGN_MISTAKES[mistake](o, x, t, i)


def test_assigning_to_a_computed_tensor():
    ctx, t, _T = time_context()
    with ctx:
        x = trl.zeros((), domain=(t,)) + 1.0
        with raises(trl.TimeRLError, None, "placeholder"):
            x[t] = 2.0


def test_sink_under_when_over_a_missing_dimension():
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    with ctx:
        x = trl.zeros((), domain=(t,))
        with ctx.when(i == 0), raises(trl.DomainError, None, "i"):
            x.sink(lambda p, v: None)


# ---- ScheduleError ------------------------------------------------------------------------------------------


def test_placeholder_reading_itself_at_the_same_point(backend):
    ctx, t, T = time_context()
    with ctx:
        line = next_line()
        o = trl.placeholder((), "float32", domain=(t,))
        o[t] = o[t] + 1.0
        collect(o * 1.0)
    with raises(trl.ScheduleError, line):
        run(ctx, {T: 3}, backend)


def test_two_placeholder_cycle(backend):
    ctx, t, T = time_context()
    with ctx:
        line = next_line()
        a = trl.placeholder((), "float32", domain=(t,))
        b = trl.placeholder((), "float32", domain=(t,))
        a[t] = b[t] * 2.0
        b[t] = a[t] + 1.0
        collect(a * 1.0)
    with raises(trl.ScheduleError, line):
        run(ctx, {T: 3}, backend)


def test_cycle_through_a_shift(backend):
    """x[t+1] needs y[t], which needs x[t+1]."""
    ctx, t, T = time_context()
    with ctx:
        line = next_line()
        x = trl.placeholder((), "float32", domain=(t,))
        y = trl.placeholder((), "float32", domain=(t,))
        x[0] = 0.0
        x[t + 1] = y[t]
        with ctx.when(t < T - 1):
            y[t] = x[t + 1] * 1.0
        collect(x * 1.0)
    with raises(trl.ScheduleError, line):
        run(ctx, {T: 3}, backend)


# ---- DeviceOutOfMemoryError ---------------------------------------------------------------------------------


def test_device_out_of_memory(backend):
    if backend == "reference":
        pytest.skip("the reference interpreter has no device memory; the compiled backends enforce it")
    ctx, t, T = time_context()
    with ctx:
        line = next_line()
        x = trl.source(lambda p: np.zeros(256, np.float32), shape=(256,), domain=(t,))   # 1 KiB a point
        collect(x[0:T].sum(dim=0))
    with raises(trl.DeviceOutOfMemoryError, line):
        run(ctx, {T: 8}, backend, device_memory=1)


# ---- other user mistakes ----------------------------------------------------------------------------------------


def test_when_needs_a_condition():
    ctx, _t, _T = time_context()
    with raises(trl.TimeRLError):
        ctx.when(3)


def test_symbolic_mistakes_name_the_line():
    ctx, t, T = time_context()
    with raises(trl.TimeRLError, None, "ctx.when"):
        bool(t > 0)
    with raises(trl.TimeRLError):
        t % T
    with ctx:
        x = trl.zeros((), domain=(t,))
        with raises(trl.TimeRLError, None, "trl.where"):
            bool(x > 0)


COMPILE_MISTAKES = {
    "missing_bound": ({}, "reference", {}),
    "bad_bound": ({"T": 0}, "reference", {}),
    "unknown_bound": ({"T": 3, "Q": 2}, "reference", {}),
    "unknown_backend": ({"T": 3}, "tensorflow", {}),
    "unknown_option": ({"T": 3}, "reference", {"frobnicate": True}),
}


@pytest.mark.parametrize("mistake", sorted(COMPILE_MISTAKES))
def test_compile_mistakes(mistake):
    bounds, backend, options = COMPILE_MISTAKES[mistake]
    ctx, t, _T = time_context()
    with ctx:
        collect(trl.zeros((), domain=(t,)) + 1.0)
    with raises(trl.TimeRLError):
        ctx.compile(bounds=bounds, backend=backend, **options)


def test_creating_outside_a_context():
    with pytest.raises(trl.TimeRLError, match="context"):
        trl.zeros((2,))


def test_failing_user_source_or_sink_names_the_line_that_created_it(backend):
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        text = trl.source(lambda p: "not a number", domain=(t,))
        text.sink(lambda p, v: None)
    with pytest.raises(trl.TimeRLError, match=r"test_errors.py:\d+.*source function failed"):
        ctx.compile({T: 2}, backend=backend).execute()
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: 1.0, domain=(t,))
        x.sink(lambda value: None)  # forgot the point argument
    with pytest.raises(trl.TimeRLError, match=r"test_errors.py:\d+.*sink function failed.*TypeError"):
        ctx.compile({T: 2}, backend=backend).execute()
