"""The inputs of a batched statement (`timerl.runtime.batch`), read from the pool for all its points at once: a
point read as one stacked array (or one shared value), a range read as a padded window with the mask of the
positions that exist, and a gradient accumulation as the sum of the contributions that exist."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from timerl.pdg.graph import Node

Points = Sequence[tuple[int, ...]]


class NotBatchable(Exception):
    """A batch this code path declines at run time: the statement runs point by point instead."""


def gathered(pool: Any, reader: Any, points: Points, backend: Any) -> tuple[Any, bool]:
    """One input at every point: (a single value where every point reads the same one, False), else
    (the values stacked, True)."""
    edge = reader.edge
    read = reader.coordinates if reader.has_ranges else reader.point_read
    keys = [(edge.producer, tuple(read(p))) for p in points]
    if all(k == keys[0] for k in keys):
        return pool.load(keys[0])[edge.output], False
    batch = getattr(pool, "batch", None)
    stacked = None if batch is None else batch(keys, edge.output)
    if stacked is not None:
        return stacked, True
    return backend.stack([pool.load(k)[edge.output] for k in keys]), True


def padded_window(pool: Any, reader: Any, points: Points, backend: Any) -> tuple[Any, Any]:
    """A range read at every point, padded at the end to the longest: (N, L, ...) values and an (N, L)
    mask of the positions that exist. The producer's points that the windows cover are loaded once each
    (they form one run along the range's dimension) and gathered by index."""
    edge = reader.edge
    coordinates = [reader.coordinates(p) for p in points]
    axis = next(k for k, c in enumerate(coordinates[0]) if isinstance(c, range))
    outer = [c[:axis] + c[axis + 1:] for c in coordinates]
    if any(o != outer[0] for o in outer):
        raise NotBatchable("windows over different rows of the producer")
    starts = np.array([c[axis].start for c in coordinates], dtype=np.int64)
    lengths = np.array([len(c[axis]) for c in coordinates], dtype=np.int64)
    longest = int(lengths.max())
    if longest == 0:
        raise NotBatchable("empty windows")
    low = int(starts[lengths > 0].min())
    high = int((starts + lengths)[lengths > 0].max())
    before, after = tuple(outer[0][:axis]), tuple(outer[0][axis:])
    store = pool.blocks.get(edge.producer)
    stacked = None
    if store is not None and store.axis == axis:  # the covered run is one slice of the block's buffer
        try:
            stacked = store.slice(before + after, low, high, edge.output)
        except KeyError:
            stacked = None
    if stacked is None:
        keys = [(edge.producer, before + (k,) + after) for k in range(low, high)]
        batch = getattr(pool, "batch", None)
        stacked = None if batch is None else batch(keys, edge.output)
        if stacked is None:
            stacked = backend.stack([pool.load(key)[edge.output] for key in keys])
    offsets = np.arange(longest, dtype=np.int64)
    valid = offsets[None, :] < lengths[:, None]
    index = np.where(valid, starts[:, None] - low + offsets[None, :], 0)
    return stacked[backend.from_numpy(index)], backend.from_numpy(valid)


def accumulated(pool: Any, node: Node, readers: Sequence[Any], points: Points, backend: Any) -> Any:
    """Gradient accumulation over point reads: per point, the sum of the contributions that exist."""
    shape, dtype = tuple(node.attrs["shape"]), node.attrs["dtype"]
    whole = _accumulated_stacks(pool, node, readers, points, backend)
    if whole is not None:
        return whole
    zero = backend.zeros(shape, dtype)
    totals = []
    for point in points:
        total = None
        for reader in readers:
            for q in reader.points(point)[0]:
                key = (reader.edge.producer, q)
                if pool.has(key):
                    value = pool.load(key)[reader.edge.output]
                    total = value if total is None else total + value
        totals.append(zero if total is None else total)
    return backend.cast(backend.stack(totals), dtype)  # one cast (on jax a host sum is not moved per point)


def _accumulated_stacks(pool: Any, node: Node, readers: Sequence[Any], points: Points, backend: Any) -> Any:
    """The accumulation when every contribution exists at every point and each reader's contributions
    are one stack's rows in order: a sum of batched arrays (None otherwise)."""
    batch = getattr(pool, "batch", None)
    if batch is None:
        return None
    total = None
    for reader in readers:
        if reader.has_ranges:
            return None
        keys = [(reader.edge.producer, reader.point_read(p)) for p in points]
        stacked = batch(keys, reader.edge.output)
        if stacked is None:
            return None
        total = stacked if total is None else total + stacked
    if total is None:
        return None
    return backend.cast(total, node.attrs["dtype"])
