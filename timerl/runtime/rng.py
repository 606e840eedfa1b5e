"""Per-point random draws, identical on every backend: each point's draw is a function of (seed, node, point),
so it never depends on the order points are evaluated in.

The draw is counter-based: element ``k`` of the draw at a point is the SplitMix64 finaliser of
``key(seed, node, point) + k * golden``, a bijective 64-bit mix that passes the usual statistical batteries
when fed a counter (it is how SplitMix64 itself generates). Building a NumPy `Generator` per point cost
~0.1-0.5 ms, more than the policy network of a small RL step; this costs a few microseconds.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


_U_GOLDEN, _U_MIX1, _U_MIX2 = np.uint64(_GOLDEN), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_U30, _U27, _U31 = np.uint64(30), np.uint64(27), np.uint64(31)
_STEPS = np.arange(1, 4097, dtype=np.uint64) * _U_GOLDEN


def _mix(value: int) -> int:
    value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9 & _MASK
    value = (value ^ (value >> 27)) * 0x94D049BB133111EB & _MASK
    return value ^ (value >> 31)


def _key(seed: int, node_id: int, point: Sequence[int]) -> int:
    key = _mix((seed * _GOLDEN + 0x632BE59BD9B4E019) & _MASK)
    for coordinate in (node_id, *point):
        key = _mix((key ^ (int(coordinate) & _MASK)) * _GOLDEN & _MASK)
    return key


def _keys(seed: int, node_id: int, points: Sequence[Sequence[int]]) -> np.ndarray:
    """`_key` at every point, as a uint64 array: for many points one array computation per coordinate (the
    same mix, wrapping modulo 2**64) instead of four Python big-integer mixes per point."""
    if len(points) < 8:
        return np.array([_key(seed, node_id, point) for point in points], dtype=np.uint64)
    keys = np.full(len(points), _key(seed, node_id, ()), dtype=np.uint64)
    for column in np.asarray(points, dtype=np.int64).reshape(len(points), -1).T.astype(np.uint64):
        keys = _mix_many((keys ^ column) * _U_GOLDEN)
    return keys


def _mix_many(x: np.ndarray) -> np.ndarray:
    """`_mix` of every element of a uint64 array."""
    x = (x ^ (x >> _U30)) * _U_MIX1
    x = (x ^ (x >> _U27)) * _U_MIX2
    return x ^ (x >> _U31)


def _uniform(bits: np.ndarray, single: bool) -> np.ndarray:
    """Uniform in [0, 1) with the resolution of the target type (24 or 53 bits), so rounding never gives 1."""
    if single:
        return (bits >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)
    return (bits >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)


def draw(seed: int, node_id: int, point: Sequence[int], shape: Sequence[int], dtype: str, normal: bool) -> np.ndarray:
    return draw_many(seed, node_id, (point,), shape, dtype, normal)[0]


def draw_many(seed: int, node_id: int, points: Sequence[Sequence[int]], shape: Sequence[int], dtype: str,
              normal: bool) -> np.ndarray:
    """The draws at every point, stacked along a new leading axis (one array computation for all of them); the
    uniform or (``normal``) Box-Muller normal values of each point depend only on (seed, node, point)."""
    count = math.prod(shape)
    single = dtype == "float32"
    keys = _keys(seed, node_id, points)[:, None]
    if not normal:
        values = _uniform(_bits(keys, count), single)
    else:  # Box-Muller on 53-bit uniforms; 1 - u keeps the logarithm finite
        bits = _bits(keys, 2 * count)
        first, second = _uniform(bits[:, :count], False), _uniform(bits[:, count:], False)
        values = np.sqrt(-2.0 * np.log1p(-first)) * np.cos(2.0 * np.pi * second)
    return values.reshape((len(points), *shape)).astype(dtype, copy=False)


def _bits(keys: np.ndarray, count: int) -> np.ndarray:
    # array arithmetic on uint64 wraps modulo 2**64 silently, which is what the mix wants
    x = _STEPS[:count] if count <= _STEPS.size else np.arange(1, count + 1, dtype=np.uint64) * _U_GOLDEN
    return _mix_many(x[None, :] + keys)
