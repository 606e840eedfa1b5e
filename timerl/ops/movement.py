"""Layout and indexing ops of the spatial shape."""

from __future__ import annotations

from typing import Any

from timerl.ops.batching import VMAP, expanded, indexed, permuted, reshaped, shifted_axis, spatially_indexed
from timerl.ops.registry import (
    INT_DTYPES,
    MOVEMENT,
    NOT_A_REDUCTION,
    NOT_DIFFERENTIABLE,
    ShapeError,
    index_range,
    numel,
    register,
    same_dim,
)
from timerl.ops.dtypes import Promotion
from timerl.symbolic import as_expr, minimum

_JOINED = Promotion()  # cat and stack: their inputs in one dtype


def _index_dtype(dtype: str) -> str:
    """Integer indices are read as int64 (torch's gathers take no other); others stay, for the rule to refuse."""
    return "int64" if dtype in INT_DTYPES else dtype


INDEX = Promotion(positions=(1,), compute=_index_dtype)


def _dtype0(inputs, attrs):
    return [inputs[0].dtype]


def _reshape_shape(inputs, attrs):
    shape = attrs["shape"]
    if all(isinstance(d, int) for d in shape) and all(isinstance(d, int) for d in inputs[0].shape):
        if numel(shape) != numel(inputs[0].shape):
            raise ShapeError(f"cannot reshape {tuple(inputs[0].shape)} into {tuple(shape)}")
    return [tuple(shape)]


register("reshape", MOVEMENT, vectorize=reshaped, incrementalize=NOT_A_REDUCTION,
         shape=_reshape_shape, dtype=_dtype0,
         impl=lambda xp, x, shape: xp.reshape(x, tuple(shape)),
         grad=lambda F, ins, outs, g, a: [F.reshape(g[0], ins[0].shape)])


def _inverse(perm):
    inverse = [0] * len(perm)
    for position, axis in enumerate(perm):
        inverse[axis] = position
    return tuple(inverse)


register("permute", MOVEMENT, vectorize=permuted, incrementalize=NOT_A_REDUCTION,
         shape=lambda ins, a: [tuple(ins[0].shape[p] for p in a["perm"])], dtype=_dtype0,
         impl=lambda xp, x, perm: xp.permute_dims(x, tuple(perm)),
         grad=lambda F, ins, outs, g, a: [F.permute(g[0], _inverse(a["perm"]))])


def _expand_shape(inputs, attrs):
    shape, source = attrs["shape"], inputs[0].shape
    offset = len(shape) - len(source)
    for axis, dim in enumerate(source):
        if not (isinstance(dim, int) and dim == 1) and not same_dim(dim, shape[axis + offset]):
            raise ShapeError(f"cannot expand {tuple(source)} to {tuple(shape)}")
    return [tuple(shape)]


register("expand", MOVEMENT, vectorize=expanded, incrementalize=NOT_A_REDUCTION,
         shape=_expand_shape, dtype=_dtype0,
         impl=lambda xp, x, shape: xp.broadcast_to(x, tuple(shape)),
         grad=lambda F, ins, outs, g, a: [F.sum_to(g[0], ins[0].shape)])
register("flip", MOVEMENT, vectorize=shifted_axis, incrementalize=NOT_A_REDUCTION,
         shape=lambda ins, a: [ins[0].shape], dtype=_dtype0,
         impl=lambda xp, x, dim: xp.flip(x, axis=dim),
         grad=lambda F, ins, outs, g, a: [F.flip(g[0], a["dim"])])


def _slice_length(dim, item: slice):
    if isinstance(dim, int):
        return len(range(*item.indices(dim)))
    start, stop, step = item.start or 0, item.stop, item.step or 1
    if step != 1 or start < 0 or (stop is not None and stop < 0):
        raise ShapeError("slices of a dynamically sized dimension take non-negative bounds and step 1")
    end = as_expr(dim) if stop is None else minimum(stop, dim)
    return end - start


def index_shape(shape, key):
    """Shape of ``x[key]`` for NumPy basic indexing (ints, slices, None, Ellipsis)."""
    key = key if isinstance(key, tuple) else (key,)
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > len(shape):
        raise ShapeError(f"too many indices ({consumed}) for a tensor of shape {tuple(shape)}")
    if Ellipsis in key:
        at = key.index(Ellipsis)
        key = key[:at] + (slice(None),) * (len(shape) - consumed) + key[at + 1:]
    else:
        key = key + (slice(None),) * (len(shape) - consumed)
    result, axis = [], 0
    for item in key:
        if item is None:
            result.append(1)
            continue
        dim = shape[axis]
        if isinstance(item, bool) or not (isinstance(item, slice) or hasattr(type(item), "__index__")):
            raise ShapeError(f"spatial indices are ints, slices, None and ...; got {item!r}")
        if isinstance(item, slice):
            result.append(_slice_length(dim, item))
        elif isinstance(dim, int) and not -dim <= item < dim:
            raise ShapeError(f"index {item} is out of range for a dimension of size {dim}")
        axis += 1
    return tuple(result)


register("spatial_index", MOVEMENT, vectorize=spatially_indexed, incrementalize=NOT_A_REDUCTION,
         shape=lambda ins, a: [index_shape(ins[0].shape, a["key"])], dtype=_dtype0,
         impl=lambda xp, x, key: x[key],
         grad=lambda F, ins, outs, g, a: [F.apply("spatial_scatter", g[0], key=a["key"], shape=ins[0].shape)])


def _spatial_scatter(xp, g, key, shape):
    zeros = xp.zeros(tuple(_concrete(shape, g)), dtype=g.dtype)
    if hasattr(zeros, "at"):
        return zeros.at[key].set(g)
    zeros[key] = g
    return zeros


def _concrete(shape, like):
    if all(isinstance(d, int) for d in shape):
        return shape
    raise ShapeError("a spatial scatter needs a static shape")


register("spatial_scatter", MOVEMENT, vectorize=spatially_indexed, incrementalize=NOT_A_REDUCTION,
         shape=lambda ins, a: [tuple(a["shape"])], dtype=_dtype0,
         impl=_spatial_scatter, grad=lambda F, ins, outs, g, a: [F.spatial(g[0], a["key"])])


def _cat_shape(inputs, attrs):
    dim = attrs["dim"]
    first = inputs[0].shape
    total = 0
    for tensor in inputs:
        if len(tensor.shape) != len(first):
            raise ShapeError("cat needs tensors of the same rank")
        if not all(same_dim(a, b) for axis, (a, b) in enumerate(zip(tensor.shape, first)) if axis != dim):
            raise ShapeError(f"cat along dimension {dim} of shapes {tuple(first)} and {tuple(tensor.shape)}")
        total = total + tensor.shape[dim]
    return [first[:dim] + (total,) + first[dim + 1:]]


def _cat_grad(F, ins, outs, g, a):
    grads, offset = [], 0
    for tensor in ins:
        size = tensor.shape[a["dim"]]
        key = (slice(None),) * a["dim"] + (slice(offset, offset + size),)
        grads.append(F.spatial(g[0], key))
        offset += size
    return grads


register("cat", MOVEMENT, vectorize=VMAP, incrementalize=NOT_A_REDUCTION,
         shape=_cat_shape, dtype=lambda ins, a: [_JOINED.dtype(ins, a)], promotion=_JOINED,
         impl=lambda xp, *xs, dim: xp.concat(xs, axis=dim), grad=_cat_grad)
def _stack_shape(inputs, attrs):
    first = inputs[0].shape
    for tensor in inputs:
        if len(tensor.shape) != len(first) or not all(same_dim(a, b) for a, b in zip(tensor.shape, first)):
            raise ShapeError(f"stack needs tensors of one shape, got {tuple(first)} and {tuple(tensor.shape)}")
    return [first[:attrs["dim"]] + (len(inputs),) + first[attrs["dim"]:]]


register("stack", MOVEMENT, vectorize=VMAP, incrementalize=NOT_A_REDUCTION,
         shape=_stack_shape,
         dtype=lambda ins, a: [_JOINED.dtype(ins, a)], promotion=_JOINED,
         impl=lambda xp, *xs, dim: xp.stack(xs, axis=dim),
         grad=lambda F, ins, outs, g, a: [F.spatial(g[0], (slice(None),) * a["dim"] + (k,)) for k in range(len(ins))])


def _scatter_add(xp, g, index, dim, size):
    """zeros with ``size`` along ``dim``, adding ``g`` at ``index`` (the transpose of take_along_axis); indices
    outside ``[0, size)`` add nothing. torch scatters in O(elements), into a buffer one longer along ``dim``
    whose last slot takes the outside indices; elsewhere every element is compared with every class,
    O(elements x size)."""
    if hasattr(g, "scatter_add_"):
        at = index.long()
        at = at.masked_fill((at < 0) | (at >= size), size)
        shape = list(g.shape)
        shape[dim] = size + 1
        return g.new_zeros(shape).scatter_add_(dim, at, g).narrow(dim, 0, size)
    classes = xp.arange(size)
    shape = [1] * (index.ndim + 1)
    shape[dim + 1 if dim >= 0 else dim] = size
    hits = xp.astype(xp.expand_dims(index, axis=dim + 1) == xp.reshape(classes, tuple(shape[: index.ndim + 1])),
                     g.dtype)
    return xp.sum(hits * xp.expand_dims(g, axis=dim + 1), axis=dim)


def _integer_index(op, index):
    if index.dtype not in INT_DTYPES:
        raise ShapeError(f"{op} takes an integer index, got {index.dtype}")


def _in_range(xp: Any) -> dict:
    """jax's indexing options for indices the op's value check has already bounded: jax's default mode fills
    out-of-range reads, a compare and select per element that keeps XLA:CPU from fusing chained gathers well
    (`index_range` raises for such indices on every backend, so no result of them is ever used)."""
    return {"mode": "clip"} if getattr(xp, "__name__", "") == "jax.numpy" else {}


def _gather_shape(inputs, attrs):
    x, index = inputs
    _integer_index("gather", index)
    if len(x.shape) != len(index.shape):
        raise ShapeError("gather needs index with as many dimensions as the input")
    for axis, (size, length) in enumerate(zip(x.shape, index.shape)):
        fits = size >= length if isinstance(size, int) and isinstance(length, int) else same_dim(size, length)
        if axis != attrs["dim"] % len(x.shape) and not fits:
            raise ShapeError(f"gather: index {tuple(index.shape)} is longer than input {tuple(x.shape)} on "
                             f"axis {axis} (torch.gather reads the leading part of the other axes)")
    return [index.shape]


def _leading(index_shape, dim):
    """The leading part of an input that an index of ``index_shape`` reads on the axes other than ``dim``."""
    dim = dim % max(len(index_shape), 1)  # a batched kernel's dim counts from the end
    return tuple(slice(None) if axis == dim else slice(0, length) for axis, length in enumerate(index_shape))


def _gather(xp, x, index, dim):
    """torch.gather: out[i][j] = x[i][index[i][j]] (dim 1), the index no longer than x on the other axes."""
    leading = x[_leading(index.shape, dim)] if x.shape != index.shape else x
    return xp.take_along_axis(leading, index, axis=dim, **_in_range(xp))


def _gather_grad(F, ins, outs, g, a):
    x, index = ins
    spread = F.apply("scatter_add", g[0], index, dim=a["dim"], size=x.shape[a["dim"]])
    if all(same_dim(s, t) for s, t in zip(spread.shape, x.shape)):
        return [spread, None]
    return [F.apply("spatial_scatter", spread, key=_leading(index.shape, a["dim"]), shape=x.shape), None]


register("gather", MOVEMENT, vectorize=indexed, incrementalize=NOT_A_REDUCTION,
         shape=_gather_shape, dtype=_dtype0, impl=_gather, promotion=INDEX,
         check_values=index_range("gather", 1, "dim"), grad=_gather_grad)
register("scatter_add", MOVEMENT, vectorize=indexed, incrementalize=NOT_A_REDUCTION,
         shape=lambda ins, a: [ins[0].shape[:a["dim"]] + (a["size"],) + ins[0].shape[a["dim"] + 1:]],
         dtype=_dtype0, impl=_scatter_add,
         grad=lambda F, ins, outs, g, a: [F.gather(g[0], a["dim"], ins[1]), None])


def _index_select_shape(inputs, attrs):
    _integer_index("index_select", inputs[1])
    if len(inputs[1].shape) != 1:
        raise ShapeError("index_select takes a 1-dimensional index")
    dim = attrs["dim"]
    return [inputs[0].shape[:dim] + (inputs[1].shape[0],) + inputs[0].shape[dim + 1:]]


def _index_add(xp, g, index, dim, size):
    moved = xp.moveaxis(g, dim, -1) if hasattr(xp, "moveaxis") else g
    hits = xp.astype(index[:, None] == xp.arange(size)[None, :], g.dtype)
    result = moved @ hits
    return xp.moveaxis(result, -1, dim) if hasattr(xp, "moveaxis") else result


register("index_select", MOVEMENT, vectorize=VMAP, incrementalize=NOT_A_REDUCTION,
         shape=_index_select_shape, dtype=_dtype0, promotion=INDEX,
         impl=lambda xp, x, index, dim: xp.take(x, index, axis=dim, **_in_range(xp)),
         check_values=index_range("index_select", 1, "dim"),
         grad=lambda F, ins, outs, g, a: [F.apply("index_add", g[0], ins[1], dim=a["dim"],
                                                  size=ins[0].shape[a["dim"]]), None])
register("index_add", MOVEMENT, vectorize=shifted_axis, incrementalize=NOT_A_REDUCTION,
         shape=lambda ins, a: [ins[0].shape[:a["dim"]] + (a["size"],) + ins[0].shape[a["dim"] + 1:]],
         dtype=_dtype0, impl=_index_add,
         grad=lambda F, ins, outs, g, a: [F.index_select(g[0], a["dim"], ins[1]), None])


def _one_hot_shape(inputs, attrs):
    _integer_index("one_hot", inputs[0])
    return [inputs[0].shape + (attrs["num_classes"],)]


register("one_hot", MOVEMENT, vectorize=VMAP, incrementalize=NOT_A_REDUCTION,
         shape=_one_hot_shape,
         dtype=lambda ins, a: ["int64"], promotion=Promotion(positions=(0,), compute=_index_dtype),
         impl=lambda xp, x, num_classes: xp.astype(x[..., None] == xp.arange(num_classes), xp.int64),
         check_values=index_range("one_hot", 0),
         grad=NOT_DIFFERENTIABLE)

