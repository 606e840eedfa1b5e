"""`timerl.runtime.rng`'s counter-based draws computed by jax, on the device and inside a jitted group.

The bits are the same as the host's, bit for bit: the SplitMix64 key of (seed, node, point) and the mixed
counter ``key + (k + 1) * golden`` of element ``k``, in uint64 arithmetic (jax wraps modulo 2**64 like NumPy).
The part of the key that is the same at every point (seed and node) is folded on the host when the group is
lowered; only the point's coordinates are traced, so one compiled kernel serves every point.

Uniform draws are exact on any device (a shift, an integer-to-float conversion and a power-of-two scale).
Normal draws use float64 ``log1p``, ``cos`` and ``sqrt``, whose last bit may differ between XLA and the C
library: only float32 normals run here, where rounding to float32 hides such differences (float64 normals keep
the host's NumPy draw).

Needs 64-bit types: the jax backend's `session` enables them for the whole run.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from timerl.ops.special import draws_normal
from timerl.runtime import rng

_GOLDEN = np.uint64(rng._GOLDEN)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def on_device(op: str, dtype: str) -> bool:
    """Whether a draw of this kind gives the host's values exactly when computed by jax."""
    if draws_normal(op):
        return dtype == "float32"
    return dtype in ("float32", "float64")


def _mix(value):
    value = (value ^ (value >> np.uint64(30))) * _MIX1
    value = (value ^ (value >> np.uint64(27))) * _MIX2
    return value ^ (value >> np.uint64(31))


def _point_key(xp, prefix: int, point: Sequence):
    """`rng._key` continued over the point's coordinates from ``prefix``, the key after seed and node."""
    key = xp.asarray(np.uint64(prefix))
    for coordinate in point:
        key = _mix((key ^ xp.asarray(coordinate).astype(np.uint64)) * _GOLDEN)
    return key


def _uniform(bits, single: bool):
    if single:
        return (bits >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)
    return (bits >> np.uint64(11)).astype(np.float64) * np.float64(2.0 ** -53)


def drawer(xp, seed: int, node_id: int, shape: Sequence[int], dtype: str, normal: bool):
    """A function of the point's coordinates, traceable by jax (``xp`` is `jax.numpy`), returning the draw
    `rng.draw` makes there."""
    prefix = rng._key(seed, node_id, ())
    count = math.prod(shape)
    shape = tuple(shape)
    counters = np.arange(1, (2 if normal else 1) * count + 1, dtype=np.uint64) * _GOLDEN

    def draw(*point):
        bits = _mix(xp.asarray(counters) + _point_key(xp, prefix, point))
        if not normal:
            return _uniform(bits, dtype == "float32").reshape(shape).astype(dtype)
        first, second = _uniform(bits[:count], False), _uniform(bits[count:], False)
        values = xp.sqrt(-2.0 * xp.log1p(-first)) * xp.cos(2.0 * np.pi * second)
        return values.reshape(shape).astype(dtype)

    return draw
