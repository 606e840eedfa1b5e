"""Stacked points: a vectorized statement's results kept as the one batched array it computed.

A loop run statement-major (`timerl.runtime.batch`) computes an op at all of the loop's points in one call,
an array whose leading axis is the point. Splitting it into one stored array per point, only for the next
batched statement to stack them again, costs more than the arithmetic on CPU-sized programs. A `Stack` keeps
the batched array; the pool maps each point's key to (stack, row), so a read at one point is a row view, a
batched read of the same points in the same order is the array itself, and each point is still accounted
and freed on its own (its bytes are those of one row).

Used only without a device budget (no swapping), which is also the only case in which loops are vectorized.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from timerl.runtime.memory import Key, MemoryPool


class Stack:
    """The outputs of one op at ``points``, batched along axis 0 (``same``: one value shared by every point)."""

    __slots__ = ("values", "points", "same")

    def __init__(self, values: tuple[Any, ...], points: Sequence[tuple[int, ...]], same: bool) -> None:
        self.values = values
        self.points = points
        self.same = same

    def row(self, k: int, take: Any) -> tuple[Any, ...] | _RowOutputs:
        return self.values if self.same else _RowOutputs(self.values, k, take)


class _RowOutputs:
    """The outputs of one point of a stack, each taken from its batched array when read: a read wants one
    output of several, and taking a row is a dispatch each on jax (a scanned rollout step has ten outputs)."""

    __slots__ = ("values", "k", "take")

    def __init__(self, values: tuple[Any, ...], k: int, take: Any) -> None:
        self.values, self.k, self.take = values, k, take

    def __getitem__(self, output: int) -> Any:
        return self.take(self.values[output], self.k)

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self):
        return (self.take(value, self.k) for value in self.values)


class StackedPool(MemoryPool):
    """The memory pool plus stacked points (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stacked: dict[Key, tuple[Stack, int, int]] = {}  # key -> (stack, row, bytes of the point)

    def store_stack(self, node_id: int, points: Sequence[tuple[int, ...]], values: tuple[Any, ...], size: int,
                    same: bool = False) -> None:
        """Keep ``values`` (batched along axis 0 unless ``same``) as the outputs of ``node_id`` at ``points``;
        ``size``: the bytes of one point."""
        stack = Stack(values, points, same)
        stacked = self.stacked
        for k, point in enumerate(points):
            stacked[(node_id, point)] = (stack, k, size)
        self.device_bytes += size * len(points)
        if self.device_bytes > self.peak_device_bytes:
            self.peak_device_bytes = self.device_bytes
        self.timeline.add(self.device_bytes, self.host_bytes)

    def batch(self, keys: Sequence[Key], output: int) -> Any:
        """Output ``output`` at every key as one batched array, when the keys are consecutive rows of one stack
        in order (the common case: one statement reading the previous statement's points, or a window over
        them): the stack's array itself, or one slice of it (a shared value broadcast along a new axis 0); for a
        producer kept in a block store, a slice of its buffer; else None."""
        store = self.blocks.get(keys[0][0])
        if store is not None:
            producer = keys[0][0]
            return None if any(key[0] != producer for key in keys) else store.run([key[1] for key in keys], output)
        first = self.stacked.get(keys[0])
        if first is None:
            return None
        stack, start = first[0], first[1]
        if start + len(keys) > len(stack.points):
            return None
        stacked = self.stacked
        for k, key in enumerate(keys, start):
            entry = stacked.get(key)
            if entry is None or entry[0] is not stack or entry[1] != k:
                return None
        whole = stack.values[output]
        if stack.same:  # one value shared by every point (a constant stored over a loop): its rows repeated
            shape = (len(keys), *whole.shape)
            if isinstance(whole, np.ndarray):  # on the host: ~6 us, where jax's eager broadcast costs ~90 us
                return self.backend.from_numpy(np.ascontiguousarray(np.broadcast_to(whole, shape)))
            return self.backend.xp.broadcast_to(whole, shape)
        return whole if len(keys) == len(stack.points) else whole[start:start + len(keys)]

    def load(self, key: Key) -> tuple[Any, ...]:
        stored = self.device.get(key)  # the common case first: a point stored on its own (no swapping here)
        if stored is not None and not self.swap:
            return stored[0]
        entry = self.stacked.get(key)
        if entry is None:
            return MemoryPool.load(self, key)
        return entry[0].row(entry[1], self.backend.row)

    def get(self, key: Key, describe: Any, pinned: set[Key]) -> tuple[Any, ...]:
        entry = self.stacked.get(key)
        if entry is None:
            return MemoryPool.get(self, key, describe, pinned)
        return entry[0].row(entry[1], self.backend.row)

    def has(self, key: Key) -> bool:
        return key in self.stacked or MemoryPool.has(self, key)

    def free_many(self, keys: list[Key]) -> None:
        """`free` at every key, with one entry in the timeline (a batched statement's points are rows of stacks:
        each leaves the pool with one dictionary operation)."""
        stacked, device, freed = self.stacked, self.device, 0
        plain = not (self.blocks or self.arriving or self.host)  # else a point may be elsewhere (`MemoryPool._drop`)
        for key in keys:
            entry = stacked.pop(key, None)
            if entry is not None:
                freed += entry[2]
            elif not plain:
                MemoryPool._drop(self, key)
            else:
                entry = device.pop(key, None)
                if entry is not None:
                    freed += entry[1]
        self.device_bytes -= freed
        self.timeline.add(self.device_bytes, self.host_bytes)

    def free_outputs_many(self, keys: list[Key], outputs: tuple[int, ...], count: int) -> None:
        if len(outputs) >= count and not any(key in self.freed_outputs for key in keys):
            self.free_many(keys)  # every output at once: the points go
        else:
            MemoryPool.free_outputs_many(self, keys, outputs, count)

    def _drop(self, key: Key) -> None:
        entry = self.stacked.pop(key, None)
        if entry is None:
            MemoryPool._drop(self, key)
        else:
            self.device_bytes -= entry[2]

    def _release(self, key: Key, outputs: tuple[int, ...]) -> None:
        entry = self.stacked.get(key)
        if entry is None:
            MemoryPool._release(self, key, outputs)
            return
        stack = entry[0]  # a row's bytes from the batched arrays' (slicing a row would cost a dispatch on jax)
        rows = 1 if stack.same else len(stack.points)
        released = sum(self.backend.nbytes(stack.values[k]) // rows for k in outputs)
        self.stacked[key] = (entry[0], entry[1], entry[2] - released)
        self.device_bytes -= released

    def live_points(self) -> int:
        return MemoryPool.live_points(self) + len(self.stacked)
