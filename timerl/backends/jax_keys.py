"""Compiled jax functions shared by structure (no jax import here: the lowering uses it too).

`jax.jit` caches compilations per function object and input shapes. Two kernels built separately for ops
with equal attributes (the same ``pow`` in each parameter's Adam update, the same op in two executables of
one program) are different objects, so each would compile again. Keyed by what they compute instead, one
jitted function serves all of them, and jax compiles it once per input shapes.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

_LIMIT = 2048
_shared: dict[Any, Callable] = {}  # structure -> its jitted function, for every executable in the process
stats = {"hits": 0, "misses": 0}


class Unhashable(Exception):
    """An attribute that cannot be compared by value: the kernel is jitted on its own."""


def freeze(value: Any) -> Any:
    """A hashable value, equal for equal attributes and types: floats by their repr (0.0 and -0.0 stay apart),
    ints, floats and bools apart (``x ** 2`` and ``x ** 2.0`` are different kernels)."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(freeze(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, freeze(v)) for k, v in sorted(value.items())))
    if isinstance(value, slice):
        return ("slice", freeze(value.start), freeze(value.stop), freeze(value.step))
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (float, np.floating)):
        return (type(value).__name__, repr(value))
    if value is None or isinstance(value, (bool, int, str, np.integer, np.bool_, np.dtype)):
        return (type(value).__name__, value)
    raise Unhashable  # e.g. symbolic expressions, whose == builds a condition


def kernel_key(kernel: Any) -> Any:
    """The structure of a bound registry kernel (its ``signature``: op, attributes, result dtype), or None."""
    signature = getattr(kernel, "signature", None)
    if signature is None:
        return None
    try:
        return freeze(signature)
    except Unhashable:
        return None


def shared(key: Any, build: Callable[[], Callable], jit: Callable[[Callable], Callable]) -> Callable:
    """The jitted function of a structure, built and jitted the first time it is asked for (``key`` None:
    jitted on its own)."""
    if key is None:
        stats["misses"] += 1
        return jit(build())
    function = _shared.get(key)
    if function is None:
        stats["misses"] += 1
        if len(_shared) >= _LIMIT:
            _shared.pop(next(iter(_shared)))
        function = _shared[key] = jit(build())
    else:
        stats["hits"] += 1
    return function
