"""Block stores (paper §7): the points of an op that is read through ranges, kept contiguous along the range's
dimension, so that a range read is a slice of one buffer instead of a stack of many points.

A store keeps one growable buffer per value of the other dimensions ("row"). Writing point ``k`` fills slot
``k - base``; when a row runs out of room it is copied once into a buffer twice as large that starts at its
lowest live point, which also drops the freed prefix (a row written downwards gets its room below its highest
point instead). Slices handed out stay valid: a buffer is only ever written at slots nobody has read yet, and
a full buffer is replaced, not overwritten.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from timerl.pdg.graph import TensorType


class _Row:
    """One row's buffers; ``low``/``high`` bound its live points (kept up to date as points come and go, so
    that whether a range is all live is a constant-time question when the live points are contiguous)."""

    __slots__ = ("buffers", "base", "live", "low", "high")

    def __init__(self, buffers: list[Any], base: int) -> None:
        self.buffers = buffers
        self.base = base
        self.live: set[int] = set()
        self.low, self.high = base, base - 1

    def add(self, k: int) -> None:
        if not self.live:
            self.low = self.high = k
        elif k < self.low:
            self.low = k
        elif k > self.high:
            self.high = k
        self.live.add(k)

    def discard(self, k: int) -> None:
        live = self.live
        live.discard(k)
        if not live:
            return
        while self.low not in live:  # amortized O(1): a window frees its oldest point
            self.low += 1
        while self.high not in live:
            self.high -= 1

    def all_live(self, start: int, stop: int) -> bool:
        if start >= self.low and stop - 1 <= self.high and len(self.live) == self.high - self.low + 1:
            return True
        return all(k in self.live for k in range(start, stop))


class _PointOutputs:
    """The outputs of one point, each sliced from its row's buffer when read: a read wants one output of
    several (an environment step's observation, reward, end and order token), and slicing costs a call each."""

    __slots__ = ("buffers", "slot")

    def __init__(self, buffers: list[Any], slot: int) -> None:
        self.buffers, self.slot = buffers, slot

    def __getitem__(self, output: int) -> Any:
        return self.buffers[output][self.slot]

    def __len__(self) -> int:
        return len(self.buffers)

    def __iter__(self):
        return (buffer[self.slot] for buffer in self.buffers)


class BlockStore:
    def __init__(self, axis: int, types: Sequence[TensorType], backend: Any) -> None:
        self.axis = axis
        self.types = types
        self.backend = backend
        self.rows: dict[tuple[int, ...], _Row] = {}
        # outputs with elements (an order token has none: its buffer rows are empty views, never written)
        self.written = tuple(k for k, t in enumerate(types)
                             if not all(isinstance(d, int) for d in t.shape) or math.prod(t.shape) > 0)
        # the bytes of one point of each output (`block_axes` gives stores only to ops of static shapes)
        self.output_bytes = tuple(math.prod(t.shape) * np.dtype(t.dtype).itemsize for t in types)

    def _split(self, point: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
        return point[:self.axis] + point[self.axis + 1:], point[self.axis]

    def put(self, point: tuple[int, ...], values: tuple[Any, ...]) -> None:
        outer, k = self._split(point)
        row = self.rows.get(outer)
        if row is None:
            row = self.rows[outer] = _Row(self._allocate(8), k)
        if k < row.base or k - row.base >= row.buffers[0].shape[0]:
            self._regrow(row, k)
        for slot in self.written:
            row.buffers[slot] = self.backend.write(row.buffers[slot], k - row.base, values[slot])
        row.add(k)

    def get(self, point: tuple[int, ...]) -> _PointOutputs:
        outer, k = self._split(point)
        row = self.rows[outer]
        if k not in row.live:
            raise KeyError(point)
        return _PointOutputs(row.buffers, k - row.base)

    def has(self, point: tuple[int, ...]) -> bool:
        outer, k = self._split(point)
        row = self.rows.get(outer)
        return row is not None and k in row.live

    def slice(self, outer: tuple[int, ...], start: int, stop: int, output: int) -> Any:
        """Points ``start .. stop-1`` of one row, all live, as one array (a view where the backend allows)."""
        row = self.rows[outer]
        if not row.all_live(start, stop):
            raise KeyError((outer, start, stop))
        return row.buffers[output][start - row.base:stop - row.base]

    def run(self, points: Sequence[tuple[int, ...]], output: int) -> Any:
        """Output ``output`` at ``points`` as one array when they are consecutive along the axis in one row,
        in order (a batched statement reading a step's values at every step): a slice; else None."""
        outer, start = self._split(points[0])
        for k, point in enumerate(points):
            if self._split(point) != (outer, start + k):
                return None
        try:
            return self.slice(outer, start, start + len(points), output)
        except KeyError:
            return None

    def free(self, point: tuple[int, ...]) -> None:
        outer, k = self._split(point)
        row = self.rows.get(outer)
        if row is None:
            return
        row.discard(k)
        if not row.live:
            del self.rows[outer]

    def _allocate(self, capacity: int) -> list[Any]:
        return [self.backend.zeros((capacity,) + tuple(t.shape), t.dtype) for t in self.types]

    def _regrow(self, row: _Row, k: int) -> None:
        low = min(row.live | {k})
        high = max(row.live | {k}) + 1
        capacity = max(8, 2 * (high - low))
        if k < row.base:  # written downwards (a backward recurrence): the room goes below, points are >= 0
            low = max(0, high - capacity)
        fresh = self._allocate(capacity)
        kept = [j for j in row.live]
        for slot, old in enumerate(row.buffers):
            if kept:
                first, last = min(kept), max(kept) + 1
                fresh[slot] = self.backend.write_block(fresh[slot], first - low, old[first - row.base:last - row.base])
        row.buffers = fresh
        row.base = low
