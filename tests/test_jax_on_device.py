"""jax off the CPU runs no op on NumPy (issue 8, "Done when"). On the CPU the jax backend evaluates windows of
changing length with NumPy (zero-copy there) and keeps host arrays as NumPy arrays; on an accelerator both
would be host round trips, so there it keeps every value a jax array. No accelerator is needed to test that
path: the backend is built as it is on one (``host_for_dynamic_shapes`` None, stacks on the device), and every
value the pool stores is checked to be a jax array while the results match the reference interpreter's."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from conftest import assert_values, collect, run

import timerl as trl
from timerl.backends.jax_backend import JaxBackend
from timerl.runtime import evaluate
from timerl.runtime.memory import MemoryPool
from timerl.runtime.stacks import StackedPool


@pytest.fixture
def stored_types(monkeypatch) -> list[type]:
    """The jax backend as on an accelerator; returns the types of every value the pool stores."""
    original = JaxBackend.__init__

    def as_on_a_device(self) -> None:
        original(self)
        self.host_for_dynamic_shapes = None
        self._stack_on_host = False

    def refuse(*args, **kwargs):
        raise AssertionError("an op ran on NumPy")

    seen: list[type] = []
    store, store_stack = MemoryPool.store, StackedPool.store_stack

    def spy_store(self, key, values, size):
        seen.extend(type(v) for v in values if v is not None)
        return store(self, key, values, size)

    def spy_store_stack(self, node_id, points, values, size, same=False):
        seen.extend(type(v) for v in values if v is not None)
        return store_stack(self, node_id, points, values, size, same)

    monkeypatch.setattr(JaxBackend, "__init__", as_on_a_device)
    monkeypatch.setattr(evaluate, "_on_host", refuse)
    monkeypatch.setattr(MemoryPool, "store", spy_store)
    monkeypatch.setattr(StackedPool, "store_stack", spy_store_stack)
    return seen


def _windows_program():
    """Windows whose length changes from point to point (``T - t``, ``t + 1``, ``min(t + 3, T) - t``), their
    reductions, and an elementwise op on a window before its reduction."""
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        r = trl.source(lambda p: np.arange(3, dtype=np.float32) + p["t"] + 10.0 * p["i"], shape=(3,),
                       domain=(i, t))
        outs = [collect(r[i, t:T].discounted_sum(0.5)), collect(r[i, 0:t + 1].sum(0)),
                collect((r[i, t:trl.min(t + 3, T)] * 2.0).tanh().sum(0))]
    return ctx, (I, T), outs


@pytest.mark.parametrize("vectorize", [True, False])
def test_windows_stay_jax_arrays(stored_types, vectorize):
    ctx, (I, T), outs = _windows_program()
    run(ctx, {I: 2, T: 7}, "reference")
    expected = [dict(store) for store in outs]
    run(ctx, {I: 2, T: 7}, "jax", vectorize=vectorize)
    for store, want in zip(outs, expected):
        assert_values(store, want)
    assert stored_types, "the spy saw no stored value"
    assert all(issubclass(kind, jax.Array) for kind in stored_types), sorted({k.__name__ for k in stored_types})


def test_reinforce_gradients_stay_jax_arrays(stored_types):
    """A small REINFORCE step with gradients through a window (the learning phase reads ``r[i, t:T]``)."""
    from algorithms.reinforce import train

    reference = train("CartPole-v1", iterations=2, num_envs=2, steps=6, backend="reference", seed=1)
    on_device = train("CartPole-v1", iterations=2, num_envs=2, steps=6, backend="jax", seed=1)
    for got, want in zip(on_device, reference):
        assert got["mean_length"] == pytest.approx(want["mean_length"])
        assert got["mean_return"] == pytest.approx(want["mean_return"])
    assert stored_types and all(issubclass(kind, jax.Array) for kind in stored_types), \
        sorted({k.__name__ for k in stored_types})
