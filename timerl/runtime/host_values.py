"""Values the host hands in (what a source, a UDF or an environment step returns), made the program's own.

A user's function may return the same NumPy buffer refilled at every call, or a view of its own state: what is
stored must be a copy, or a later call changes values the program already holds. And a value must fit its
declared dtype: None, text, NaN or 1e12 for an int32 are refused here, not turned into NaN or INT_MIN."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from timerl.errors import ShapeError
from timerl.ops.dtypes import FLOAT_DTYPES, INT_DTYPES, integer_limits


def owned_array(value: Any, dtype: str, what: Callable[[], str]) -> np.ndarray:
    """``value`` as a fresh NumPy array of ``dtype`` that shares no memory with it; ``what()`` names the
    producer in an error (``"source (%3, created at ppo.py:40): the source function failed at {'t': 2}"``),
    built only when there is one: this runs for every value the host hands in."""
    try:
        given = np.asarray(value)
    except (TypeError, ValueError) as error:
        raise ShapeError(f"{what()}: it returned {_shown(value)}, which is not an array of numbers: {error}") \
            from None
    if given.dtype.kind not in "biuf" and given.dtype.name not in FLOAT_DTYPES:  # ml_dtypes' bfloat16 too
        raise ShapeError(f"{what()}: it returned {_shown(value)}, not numbers of dtype {dtype}")
    if dtype in INT_DTYPES and given.dtype.kind in "fiu" and given.size:
        _check_integer_range(given, dtype, what)
    return np.array(given, dtype=dtype, copy=True)


def _check_integer_range(given: np.ndarray, dtype: str, what: Callable[[], str]) -> None:
    low, high = integer_limits(dtype)
    if given.dtype.kind == "f" and not np.all(np.isfinite(given)):
        raise ShapeError(f"{what()}: it returned {_shown(given)}: NaN or infinity has no {dtype} value")
    smallest, largest = given.min(), given.max()
    if smallest < low or largest > high:
        bad = smallest if smallest < low else largest
        raise ShapeError(f"{what()}: it returned {bad!r}, outside the range of {dtype} ({low} .. {high})")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
