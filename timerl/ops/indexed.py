"""``scatter`` and ``gather_fill``: writes and reads at run-time indices along one axis, total functions.

``scatter(x, index, src, dim)`` is x with ``src`` written at ``index`` along ``dim`` (torch.scatter's layout:
index and src of one shape, equal to x's on every other axis); ``gather_fill(x, index, dim, fill)`` is
``gather`` whose reads outside ``[0, size)`` give ``fill``. An index out of range is part of their meaning (a
write there is dropped, a read gives ``fill``), not an error: they need no host-side check of the indices,
so on jax they stay inside a fused, jitted computation, where ``gather`` and ``index_select`` (whose
indices are checked on the host) cut it. They are how a batched game updates one record per game and move
(O(games)) instead of a ``where`` over every record (O(games x records)). Two writes to one position of
one row leave one of the two values (as torch.scatter).
"""

from __future__ import annotations

from timerl.ops.batching import indexed
from timerl.ops.movement import INDEX
from timerl.ops.registry import INT_DTYPES, MOVEMENT, NOT_A_REDUCTION, ShapeError, register, same_dim


def _same_layout(op, x, index, dim):
    if index.dtype not in INT_DTYPES:
        raise ShapeError(f"{op} takes an integer index, got {index.dtype}")
    if len(index.shape) != len(x.shape):
        raise ShapeError(f"{op} needs an index with as many dimensions as the input")
    for axis, (a, b) in enumerate(zip(x.shape, index.shape)):
        if axis != dim and not same_dim(a, b):
            raise ShapeError(f"{op}: index {tuple(index.shape)} and input {tuple(x.shape)} differ on axis {axis}")


def _scatter_shape(inputs, attrs):
    x, index, src = inputs
    _same_layout("scatter", x, index, attrs["dim"])
    if len(src.shape) != len(index.shape) or not all(same_dim(a, b) for a, b in zip(src.shape, index.shape)):
        raise ShapeError(f"scatter needs src of the index's shape, got {tuple(src.shape)} and {tuple(index.shape)}")
    return [x.shape]


def _along(dim, part):
    """An index tuple taking ``part`` (a slice) of axis ``dim`` and everything of the axes before it."""
    return (slice(None),) * dim + (part,)


def _scatter(xp, x, index, src, dim):
    x, size = xp.asarray(x), x.shape[dim]
    index = xp.where((index >= 0) & (index < size), index, size)
    src = xp.astype(src, x.dtype)
    if hasattr(x, "at"):  # jax: a scatter that drops the writes out of range (in place inside a jitted loop)
        return xp.put_along_axis(x, index, src, axis=dim, inplace=False, mode="drop")
    # one spare position at the end of the axis takes the writes out of range, then is cut off
    if hasattr(x, "scatter_"):  # torch: x copied once into the padded buffer
        padded = x.new_empty(x.shape[:dim] + (size + 1,) + x.shape[dim + 1:])
        padded.narrow(dim, 0, size).copy_(x)
        return padded.scatter_(dim, index, src).narrow(dim, 0, size)
    spare = x[_along(dim, slice(0, 1))] if size else xp.zeros(x.shape[:dim] + (1,) + x.shape[dim + 1:], dtype=x.dtype)
    padded = xp.concat([x, spare], axis=dim)
    xp.put_along_axis(padded, index, src, axis=dim)
    return padded[_along(dim, slice(0, size))]


def _scatter_grad(F, ins, outs, g, a):
    dim = a["dim"]
    kept = F.apply("scatter", g[0], ins[1], F.zeros(ins[2].shape, g[0].dtype), dim=dim)
    return [kept, None, F.apply("gather_fill", g[0], ins[1], dim=dim, fill=0)]


register("scatter", MOVEMENT, vectorize=indexed, incrementalize=NOT_A_REDUCTION,
         shape=_scatter_shape, dtype=lambda ins, a: [ins[0].dtype], impl=_scatter, promotion=INDEX,
         grad=_scatter_grad)


def _gather_fill_shape(inputs, attrs):
    x, index = inputs
    _same_layout("gather_fill", x, index, attrs["dim"])
    return [index.shape]


def _gather_fill(xp, x, index, dim, fill):
    size = x.shape[dim]
    inside = (index >= 0) & (index < size)
    fill = xp.asarray(fill, dtype=x.dtype)
    if not size:
        return xp.broadcast_to(fill, index.shape)
    values = xp.take_along_axis(x, xp.where(inside, index, 0), axis=dim)
    return xp.where(inside, values, fill)


register("gather_fill", MOVEMENT, vectorize=indexed, incrementalize=NOT_A_REDUCTION,
         shape=_gather_fill_shape, dtype=lambda ins, a: [ins[0].dtype], promotion=INDEX,
         impl=_gather_fill,
         # reads outside give a constant: they pass no gradient, and scatter_add drops such indices
         grad=lambda F, ins, outs, g, a: [F.apply("scatter_add", g[0], ins[1], dim=a["dim"],
                                                  size=ins[0].shape[a["dim"]]), None])
