"""A window over a block-stored producer (a placeholder included) is one slice of its buffer: the Python work
per step does not grow with the window's length, and the values are the reference interpreter's."""

from __future__ import annotations

import numpy as np

import timerl as trl
import timerl.runtime.access as access
from tests.conftest import collect, run

STEPS = 40


def replay_program(capacity: int):
    """A replay buffer: the last ``capacity`` steps of a placeholder recurrence, sampled with index_select."""
    ctx = trl.Context("t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    with ctx:
        x = trl.placeholder((3,), domain=(t,))
        x[0] = trl.zeros((3,))
        x[t + 1] = x[t] * 0.5 + trl.rand((3,), domain=(t,))
        first = trl.max(0, t - capacity + 1)
        stored = trl.min(t + 1, capacity).astype("float32")
        sample = (trl.rand((4,), domain=(t,)) * stored).astype("int64")
        picked = x[first:t + 1].index_select(0, sample)
        total = x[first:t + 1].sum(0)
        stores = [collect(picked), collect(total)]
    return ctx, {T: STEPS}, stores


def counted_run(capacity: int, backend: str) -> tuple[list[dict], int]:
    calls = 0
    original = access.EdgeReader.points

    def points(self, point):
        nonlocal calls
        listed = original(self, point)
        calls += len(listed[0])  # the points a read lists, one Python tuple each
        return listed

    access.EdgeReader.points = points
    try:
        ctx, bounds, _ = replay_program(capacity)
        return run(ctx, bounds, backend), calls
    finally:
        access.EdgeReader.points = original


def test_window_over_a_placeholder_is_a_slice():
    short, short_calls = counted_run(4, "torch")
    long, long_calls = counted_run(30, "torch")
    assert short_calls == long_calls  # no per-point listing of the window, whatever its length
    for capacity, got in ((4, short), (30, long)):
        ctx, bounds, _ = replay_program(capacity)
        want = run(ctx, bounds, "reference")
        for store, expected in zip(got, want):
            assert store.keys() == expected.keys()
            for key in expected:
                np.testing.assert_allclose(store[key], expected[key], rtol=1e-5, atol=1e-6)
