"""Reading the functional API's arguments: type checks that name the argument, PyTorch's ``-1`` in a
reshape, and NumPy slices with negative steps turned into forward slices plus flips."""

from __future__ import annotations

from typing import Any

import numpy as np

from timerl.errors import ArgumentError, ShapeError, user_location
from timerl.symbolic import Expr, exact_division
from timerl.rt.view import TensorView as RT


def shape_argument(name: str, shape: Any) -> tuple:
    """A tuple of sizes, static (ints >= 0) or symbolic (``T - t``); a single size is a 1-tuple."""
    if isinstance(shape, (int, np.integer, Expr)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(d, Expr) or isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0
            for d in shape):
        raise ArgumentError(f"{user_location()}: {name} must be a tuple of sizes, got {shape!r}")
    return tuple(int(d) if isinstance(d, np.integer) else d for d in shape)


def inferred_size(x: RT, shape: tuple, written: tuple) -> Any:
    """The size of the -1 in ``shape``: the number of elements over the product of the other sizes."""
    known, total = 1, 1
    for size in shape:
        if not (isinstance(size, int) and size == -1):
            known = known * size
    for size in x.shape:
        total = total * size
    size = exact_division(total, known) if isinstance(known, int) and known > 0 else None
    if size is not None:
        return size
    raise ShapeError(f"{user_location()}: cannot reshape a tensor of shape ({', '.join(map(str, x.shape))}) "
                     f"into {written!r}: {total} elements do not split into parts of {known}")


def forward_slices(shape: tuple, key: tuple) -> tuple[tuple, list[int]]:
    """``key`` with each negative-step slice of a static dimension turned forward, and the result axes that
    must then be flipped to restore NumPy's order."""
    for item in key:
        parts = (item.start, item.stop, item.step) if isinstance(item, slice) else (item,)
        if item is not Ellipsis and not all(part is None or isinstance(part, (int, np.integer, Expr))
                                            and not isinstance(part, (bool, np.bool_)) for part in parts):
            raise ShapeError(f"{user_location()}: x.spatial[...] takes ints, slices of ints, None and ...; got {item!r}")
        if isinstance(item, slice) and isinstance(item.step, (int, np.integer)) and item.step == 0:
            raise ShapeError(f"{user_location()}: x.spatial[...]: a slice step cannot be zero")
    ellipses = [at for at, item in enumerate(key) if item is Ellipsis]
    if len(ellipses) > 1:
        raise ShapeError(f"{user_location()}: x.spatial[...] takes at most one ...")
    consumed = len([item for item in key if item is not None and item is not Ellipsis])
    if ellipses:
        at = ellipses[0]
        key = key[:at] + (slice(None),) * (len(shape) - consumed if len(shape) > consumed else 0) + key[at + 1:]
    forward, flipped, axis, out_axis = [], [], 0, 0
    for item in key:
        step = item.step if isinstance(item, slice) else None
        if isinstance(step, (int, np.integer)) and step < 0 and axis < len(shape) and isinstance(shape[axis], int):
            picked = range(*item.indices(shape[axis]))
            forward.append(slice(picked[-1], picked[0] + 1, -step) if picked else slice(0, 0))
            flipped.append(out_axis)
        else:
            forward.append(item)
        axis += item is not None
        out_axis += item is None or isinstance(item, slice)
    return tuple(forward), flipped


def tensor_argument(name: str, value: Any) -> RT:
    if not isinstance(value, RT):
        raise ArgumentError(f"{user_location()}: {name} must be a recurrent tensor, got {value!r}")
    return value


def tensors_argument(name: str, values: Any) -> list[RT]:
    if isinstance(values, RT) or not isinstance(values, (list, tuple)) or not all(isinstance(v, RT) for v in values):
        raise ArgumentError(f"{user_location()}: {name} must be a list of recurrent tensors, got {values!r}")
    if not values:
        raise ShapeError(f"{user_location()}: {name} is empty: at least one tensor is needed")
    return list(values)
