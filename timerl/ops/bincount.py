"""``bincount``: a batched, weighted histogram along the index's last axis.

``out[..., k] = sum over j of weights[..., j] where index[..., j] == k``, for ``0 <= k < size``. It is the
scatter-add that costs O(elements): the registry's ``scatter_add`` and ``index_add`` (the transposes of
gather and index_select) compare every element with every class, O(elements x size), which is fine for
gradients of small gathers but not for counting a thousand intervals into a thousand columns per step
(the MMapGame's occupancy profile). Indices must lie in ``[0, size)``; the caller guarantees it (an index
out of range is an error on torch and jax alike, and NumPy's ``add.at`` raises too).

Weights may have trailing axes after the counted one (a row per index): with index (..., J) and weights
(..., J, *row), ``out[..., k, *r] = sum over j of weights[..., j, *r] where index[..., j] == k``, shape
(..., size, *row). Several histograms over the same indices then take one pass over the indices (on XLA one
scatter whose updates are rows, instead of one scalar scatter per histogram).
"""

from __future__ import annotations

import math

import numpy as np

from timerl.ops.batching import VMAP
from timerl.ops.registry import INT_DTYPES, MOVEMENT, NOT_A_REDUCTION, ShapeError, register, same_dim


def _shape(inputs, attrs):
    index, weights = inputs
    if index.dtype not in INT_DTYPES:
        raise ShapeError(f"bincount takes an integer index, got {index.dtype}")
    if not index.shape:
        raise ShapeError("bincount needs at least one axis to count along")
    counted = weights.shape[:len(index.shape)]
    if len(weights.shape) < len(index.shape) or not all(same_dim(a, b) for a, b in zip(index.shape, counted)):
        raise ShapeError(f"bincount needs weights of the index's shape (then optional row axes), got index "
                         f"{tuple(index.shape)} and weights {tuple(weights.shape)}")
    return [tuple(index.shape[:-1]) + (attrs["size"],) + tuple(weights.shape[len(index.shape):])]


def _bincount(xp, index, weights, size):
    batch = tuple(index.shape[:-1])
    row = tuple(weights.shape[index.ndim:])
    if hasattr(weights, "scatter_add_"):  # torch: along the last axis (1.8x index_add_ of flat indices)
        # row axes go ahead of the counted one, so the scatter still runs along the last axis (2.5x scattering
        # rows of 2 along the counted axis, (256, 1041, 2) into 957 bins); the result is a view
        ahead = len(batch) + len(row)
        moved = weights.movedim(len(batch), ahead) if row else weights
        at = index.long().reshape(batch + (1,) * len(row) + index.shape[-1:]).expand(moved.shape)
        counts = moved.new_zeros(batch + row + (size,)).scatter_add_(ahead, at, moved)
        return counts.movedim(ahead, len(batch)) if row else counts
    rows = math.prod(batch)
    offsets = xp.reshape(xp.arange(rows, dtype=index.dtype) * size, batch + (1,))
    flat_index = xp.reshape(index + offsets, (-1,))
    flat_weights = xp.reshape(weights, (-1,) + row)
    counts = xp.zeros((rows * size,) + row, dtype=weights.dtype)
    if hasattr(counts, "at"):  # jax: immutable arrays, functional scatter (of rows when the weights have them)
        # the indices are in range (the caller's promise): no wrapping of negative ones, an op per index
        counts = counts.at[flat_index].add(flat_weights, wrap_negative_indices=False)
    else:
        np.add.at(counts, flat_index, flat_weights)
    return xp.reshape(counts, batch + (size,) + row)


def _grad(F, ins, outs, g, attrs):
    index, weights = ins
    row = weights.ndim - index.ndim
    if not row:
        return [None, F.gather(g[0], -1, index)]
    at = F.expand(F.reshape(index, tuple(index.shape) + (1,) * row), tuple(weights.shape))
    return [None, F.gather(g[0], index.ndim - 1, at)]


register("bincount", MOVEMENT, vectorize=VMAP, incrementalize=NOT_A_REDUCTION,
         shape=_shape, dtype=lambda ins, a: [ins[1].dtype], impl=_bincount, grad=_grad)
