"""``bincount``: a batched, weighted histogram along the last axis.

``out[..., k] = sum over j of weights[..., j] where index[..., j] == k``, for ``0 <= k < size``. It is the
scatter-add that costs O(elements): the registry's ``scatter_add`` and ``index_add`` (the transposes of
gather and index_select) compare every element with every class, O(elements x size), which is fine for
gradients of small gathers but not for counting a thousand intervals into a thousand columns per step
(the MMapGame's occupancy profile). Indices must lie in ``[0, size)``; the caller guarantees it (an index
out of range is an error on torch and jax alike, and NumPy's ``add.at`` raises too).
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
    if len(index.shape) != len(weights.shape) or not all(same_dim(a, b) for a, b in zip(index.shape, weights.shape)):
        raise ShapeError(f"bincount needs index and weights of one shape, got {tuple(index.shape)} "
                         f"and {tuple(weights.shape)}")
    if not index.shape:
        raise ShapeError("bincount needs at least one axis to count along")
    return [tuple(index.shape[:-1]) + (attrs["size"],)]


def _bincount(xp, index, weights, size):
    batch = tuple(index.shape[:-1])
    if hasattr(weights, "scatter_add_"):  # torch: along the last axis as it is (1.8x index_add_ of flat indices)
        return weights.new_zeros(batch + (size,)).scatter_add_(-1, index.long(), weights)
    rows = math.prod(batch)
    offsets = xp.reshape(xp.arange(rows, dtype=index.dtype) * size, batch + (1,))
    flat_index = xp.reshape(index + offsets, (-1,))
    flat_weights = xp.reshape(weights, (-1,))
    counts = xp.zeros(rows * size, dtype=weights.dtype)
    if hasattr(counts, "at"):  # jax: immutable arrays, functional scatter
        counts = counts.at[flat_index].add(flat_weights)
    else:
        np.add.at(counts, flat_index, flat_weights)
    return xp.reshape(counts, batch + (size,))


register("bincount", MOVEMENT, vectorize=VMAP, incrementalize=NOT_A_REDUCTION,
         shape=_shape, dtype=lambda ins, a: [ins[1].dtype], impl=_bincount,
         grad=lambda F, ins, outs, g, a: [None, F.gather(g[0], -1, ins[0])])
