"""Shared fixtures: every language test runs on each backend, against ground truth computed in the test.

``collect(x)`` registers a sink on ``x`` and returns the dict it fills (point tuple, in the order of
``x.domain`` -> NumPy array); ``run(ctx, bounds, backend, **options)`` compiles and executes the program
and returns the dicts of every ``collect`` made in ``ctx``, in order.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import pytest

import timerl.runtime.reference  # noqa: F401  (raises the recursion limit before hypothesis records it)

# One torch thread: the tests' tensors are small, and a thread pool on 2 shared cores only adds spinning.
import torch  # noqa: E402

torch.set_num_threads(1)

BACKENDS = ("reference", "torch", "jax")


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    # no skip when a backend fails to import: a broken backend must fail its tests, never hide them
    return request.param


@pytest.fixture(params=BACKENDS[1:])
def compiled_backend(request) -> str:
    """The compiled backends only, for tests too slow to repeat everything on all three."""
    return request.param


_STORES: weakref.WeakKeyDictionary[Any, list[dict]] = weakref.WeakKeyDictionary()


def collect(x) -> dict[tuple[int, ...], np.ndarray]:
    """Sink ``x`` into a dict keyed by point tuple (domain order); values are copied NumPy arrays."""
    store: dict[tuple[int, ...], np.ndarray] = {}

    def keep(point: dict, value: Any) -> None:
        key = tuple(point.values())
        assert key not in store, f"sink called twice at {point}"
        store[key] = np.array(np.asarray(value))

    x.sink(keep)
    _STORES.setdefault(x.ctx, []).append(store)
    return store


def run(ctx, bounds: dict, backend: str, **options: Any) -> list[dict]:
    """Compile ``ctx`` for ``backend`` and execute it; returns the ``collect`` dicts of ``ctx``, filled."""
    stores = _STORES.get(ctx, [])
    for store in stores:
        store.clear()
    exe = ctx.compile(bounds=bounds, backend=backend, **options)
    exe.execute()
    return stores


def points(*sizes: int):
    """Every point of the box ``0 <= p_k < sizes[k]``, row-major."""
    return [tuple(int(c) for c in p) for p in np.ndindex(*sizes)]


def assert_values(store: dict, expected: dict, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """``store`` has exactly the points of ``expected`` and agrees with it at each."""
    assert sorted(store) == sorted(expected), (
        f"points differ: missing {sorted(set(expected) - set(store))[:5]}, "
        f"extra {sorted(set(store) - set(expected))[:5]}")
    for key, want in expected.items():
        got = store[key]
        want = np.asarray(want)
        assert got.shape == want.shape, f"at {key}: shape {got.shape}, expected {want.shape}"
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"at point {key}")
