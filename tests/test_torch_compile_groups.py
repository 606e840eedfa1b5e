"""torch with ``compile_groups`` (`timerl.runtime.torch_plan`): a group's pure kernels as one function compiled
by TorchInductor, against the reference interpreter; value checks inside the compiled function raise as on the
host. Kept to two small programs: each new group structure costs seconds of C++ compilation."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

import timerl as trl
from timerl.backends.torch_backend import InductorFunction

from conftest import assert_values, collect, run

COMPILED = trl.CompileOptions(compile_groups=True)


def next_line() -> str:
    """``file:line`` of the caller's next line: where an error under test must point."""
    return f"test_torch_compile_groups.py:{sys._getframe(1).f_lineno + 1}"


def recurrence(bad_at: int = -1):
    """A loop-carried state (merge), a host draw, a checked gather whose index goes out of range at
    ``t == bad_at``, integer and boolean elementwise ops, a reduction and a cumulative sum: one group per step."""
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        state = trl.placeholder((4, 6), "float32", domain=(t,))
        state[0] = trl.tensor(np.arange(24, dtype=np.float32).reshape(4, 6) / 7.0)
        noise = trl.rand((4, 6), dtype="float32")
        shift = trl.source(lambda p: np.array(6 if p["t"] == bad_at else 0), shape=(), dtype="int64", domain=(t,))
        index = trl.source(lambda p: (np.arange(8).reshape(4, 2) * (p["t"] + 1)) % 6, shape=(4, 2), dtype="int64",
                           domain=(t,))
        line = next_line()
        picked = state.gather(1, index + shift)
        high = state > picked.mean(1, keepdim=True)
        step = trl.where(high, state * 0.5, state + noise).cumsum(1) / 6.0
        state[t + 1] = step - step.max(1, keepdim=True) * 0.25
        stores = [collect(step), collect(picked.sum(1)), collect(high.astype("int64").sum(1))]
    return ctx, T, stores, line


def test_compiled_groups_agree_with_the_reference():
    ctx, T, stores, _ = recurrence()
    want = [dict(s) for s in run(ctx, {T: 5}, "reference")]
    for store in stores:
        store.clear()
    exe = ctx.compile(bounds={T: 5}, backend="torch", options=COMPILED)
    exe.execute()
    for got, expected in zip(stores, want):
        assert_values(got, expected)
    compiled = [f for name, f in exe.namespace.items() if name.startswith("F") and isinstance(f, InductorFunction)]
    assert compiled and all(not f.failures for f in compiled)
    assert any(entry[0] is not None for f in compiled for entry in f.compiled.values())  # inductor's code ran
    for store in stores:
        store.clear()
    exe.execute()  # a second run calls the compiled code again and gives the same values
    for got, expected in zip(stores, want):
        assert_values(got, expected)


@pytest.mark.parametrize("bad_at", [0, 3])
def test_a_failing_check_inside_the_compiled_group_raises_as_on_the_host(bad_at):
    errors = []
    for backend, options in (("reference", {}), ("torch", {"options": COMPILED})):
        ctx, T, _, line = recurrence(bad_at)
        with pytest.raises(trl.IndexOutOfRangeError) as info:
            ctx.compile(bounds={T: 5}, backend=backend, **options).execute()
        errors.append(str(info.value))
    assert line in errors[1] and f"{{'t': {bad_at}}}" in errors[1] and "out of range" in errors[1]
    assert errors[0].split(": ", 1)[1] == errors[1].split(": ", 1)[1] or line in errors[0]


def test_a_tensor_read_as_two_arguments_is_traced_as_two():
    """At t == 0 the group's two reads, ``state`` at t and ``state[0]``, are the same stored tensor, passed to
    the compiled function twice; later they differ. The compiled code must not have kept the first call's
    identity (it did: make_fx traced both arguments as one placeholder, and every later step read ``state``
    for ``state[0]``; the RT MMapGame with Drop-backup diverged from move 2 this way)."""

    def program():
        ctx = trl.Context(dims="t")
        (t,), (T,) = ctx.dims, ctx.bounds
        with ctx:
            state = trl.placeholder((4, 6), "float32", domain=(t,))
            state[0] = trl.tensor(np.arange(24, dtype=np.float32).reshape(4, 6) / 7.0)
            bump = trl.source(lambda p: np.array(p["t"], dtype=np.float32), shape=(), dtype="float32", domain=(t,))
            step = (state - state[0]) * 0.5 + bump
            state[t + 1] = step - 1.0
            store = collect(step)
        return ctx, T, store

    ctx, T, _ = program()
    want = run(ctx, {T: 4}, "reference")[0]
    ctx, T, store = program()
    exe = ctx.compile(bounds={T: 4}, backend="torch", options=COMPILED)
    exe.execute()
    assert_values(store, want)
    compiled = [f for name, f in exe.namespace.items() if name.startswith("F") and isinstance(f, InductorFunction)]
    assert any(entry[0] is not None for f in compiled for entry in f.compiled.values())  # inductor's code ran


def test_one_tensor_as_two_arguments_then_two_tensors():
    function = InductorFunction(lambda x, y: (x + 2.0 * y,))
    a, b = torch.arange(3.0), torch.ones(3)
    np.testing.assert_array_equal(function(a, a)[0].numpy(), [0.0, 3.0, 6.0])
    np.testing.assert_array_equal(function(a, b)[0].numpy(), [2.0, 3.0, 4.0])  # was [3, 3, 3]: b + 2 b
    np.testing.assert_array_equal(function(b, b)[0].numpy(), [3.0, 3.0, 3.0])
    assert len(function.compiled) == 1 and not function.failures


def test_python_that_reads_values_runs_uncompiled_with_a_warning():
    """Not specialized to the first call's values: both branches stay right."""
    function = InductorFunction(lambda x: (x * 2.0 if bool((x > 0).all()) else x - 1.0,))
    with pytest.warns(RuntimeWarning, match="could not be compiled"):
        first = function(torch.ones(3))
    np.testing.assert_array_equal(first[0].numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(function(-torch.ones(3))[0].numpy(), [-2.0, -2.0, -2.0])
    assert function.failures and all(entry[0] is None for entry in function.compiled.values())


def test_the_switch_is_off_by_default():
    assert not trl.CompileOptions().compile_groups
