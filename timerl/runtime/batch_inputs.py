"""The inputs of a batched statement (`timerl.runtime.batch`), read from the pool for all its points at once: a
point read as one stacked array (or one shared value), a range read as a padded window with the mask of the
positions that exist, and a gradient accumulation as the sum of the contributions that exist."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from timerl.errors import TimeRLError
from timerl.pdg.graph import Node
from timerl.runtime.window_scans import window_geometry

Points = Sequence[tuple[int, ...]]


class NotBatchable(Exception):
    """A batch this code path declines at run time: the statement runs point by point instead."""


def gathered(pool: Any, reader: Any, points: Points, backend: Any, identity: bool = False) -> tuple[Any, bool]:
    """One input at every point: (a single value where every point reads the same one, False), else
    (the values stacked, True). ``identity`` (planned with the statement: `timerl.pdg.graph.identity_read`):
    each point reads the producer at the same point, so the keys are the points themselves (distinct)."""
    edge = reader.edge
    if identity and len(points) > 1:
        keys = [(edge.producer, p) for p in points]
    else:
        read = reader.coordinates if reader.has_ranges else reader.point_read
        keys = [(edge.producer, tuple(read(p))) for p in points]
        if all(k == keys[0] for k in keys):
            return pool.load(keys[0])[edge.output], False
    batch = getattr(pool, "batch", None)
    stacked = None if batch is None else batch(keys, edge.output)
    if stacked is not None:
        return stacked, True
    return backend.stack([pool.load(k)[edge.output] for k in keys]), True


def selected(pool: Any, node: Node, readers: Sequence[Any], points: Points, backend: Any) -> Any:
    """A merge at every point: the input each point selects (the first whose condition holds), gathered for
    each run of consecutive points that select the same input (a recurrence's boundary and its body: two
    runs), joined in point order."""
    runs: list[tuple[int, list[tuple[int, ...]]]] = []
    for point in points:
        slot = next((k for k, reader in enumerate(readers) if reader.active(point)), None)
        if slot is None:
            raise TimeRLError(f"internal error: no input of {node.label()} is active at {point} (a scheduling bug)")
        if runs and runs[-1][0] == slot:
            runs[-1][1].append(point)
        else:
            runs.append((slot, [point]))
    xp = backend.xp
    parts = []
    for slot, run in runs:
        value, batched = gathered(pool, readers[slot], run, backend)
        parts.append(value if batched else xp.broadcast_to(xp.expand_dims(value, axis=0), (len(run), *value.shape)))
    return parts[0] if len(parts) == 1 else xp.concat(parts, axis=0)


def padded_window(pool: Any, reader: Any, points: Points, backend: Any) -> tuple[Any, Any, Any]:
    """A range read at every point, padded at the end to the longest: the run of the producer's points that
    the windows cover (loaded once each), the (N, L) index of each window's positions in it, and the (N, L)
    mask of the positions that exist. The statement's function gathers the (N, L, ...) windows (on jax inside
    its one compiled call)."""
    try:
        _, _, starts, lengths = window_geometry([reader.coordinates(p) for p in points])
    except ValueError as error:
        raise NotBatchable(str(error)) from None
    longest = int(lengths.max())
    if longest == 0:
        raise NotBatchable("empty windows")
    low = int(starts[lengths > 0].min())
    high = int((starts + lengths)[lengths > 0].max())
    stacked = covered_run(pool, reader, points, low, high, backend)
    offsets = np.arange(longest, dtype=np.int64)
    valid = offsets[None, :] < lengths[:, None]
    index = np.where(valid, starts[:, None] - low + offsets[None, :], 0)
    return stacked, backend.from_numpy(index), backend.from_numpy(valid)


def covered_run(pool: Any, reader: Any, points: Points, low: int, high: int, backend: Any) -> Any:
    """The producer's points ``low .. high - 1`` along the range of a range read (the run that the windows of
    ``points`` cover), stacked along axis 0: one slice of a block or a stack where they are one, else loaded
    one by one."""
    edge = reader.edge
    axis, outer, _, _ = window_geometry([reader.coordinates(points[0])])
    before, after = outer[:axis], outer[axis:]
    store = pool.blocks.get(edge.producer)
    if store is not None and store.axis == axis:  # the covered run is one slice of the block's buffer
        try:
            return store.slice(before + after, low, high, edge.output)
        except KeyError:
            pass
    keys = [(edge.producer, before + (k,) + after) for k in range(low, high)]
    batch = getattr(pool, "batch", None)
    stacked = None if batch is None else batch(keys, edge.output)
    if stacked is None:
        stacked = backend.stack([pool.load(key)[edge.output] for key in keys])
    return stacked


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
