"""The functional API: creation functions and every op's user-facing wrapper, all built on `timerl.rt.apply`
(re-exported here, so `F.apply` and `F.constant` keep working)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from timerl.errors import (
    ShapeError,
    TimeRLError,
    bool_argument,
    float_argument,
    int_argument,
    user_location,
)
from timerl.ops.registry import is_float, same_dim
from timerl.pdg.graph import Attrs, Edge, TensorType
from timerl.rt.apply import (  # noqa: F401  (re-exported: F.apply, F.constant, ...)
    RT, _as_tensors, apply, check_dtype, constant, index_tensor, normalize_axes, normalize_axis, static_shape)
from timerl.rt.arguments import forward_slices, inferred_size, shape_argument, tensor_argument, tensors_argument
from timerl.rt.context import current_context
from timerl.symbolic import Cond, Expr, Symbol, same_all


# ---- creation -------------------------------------------------------------------------------------------


def tensor(value: Any, dtype: str | None = None, domain: Sequence[Symbol] = (), requires_grad: bool = False) -> RT:
    ctx = current_context()
    result = constant(ctx, value, dtype, ctx.check_domain(domain, user_location()))
    result.node.requires_grad = grad_flag(requires_grad, result.dtype)
    return result


def full(shape: Sequence[int], value: Any, dtype: str = "float32", domain: Sequence[Symbol] = (),
         requires_grad: bool = False) -> RT:
    return tensor(np.full(static_shape(shape), value), dtype, domain, requires_grad)


def zeros(shape: Sequence[int], dtype: str = "float32", domain: Sequence[Symbol] = (),
          requires_grad: bool = False) -> RT:
    return full(shape, 0, dtype, domain, requires_grad)


def ones(shape: Sequence[int], dtype: str = "float32", domain: Sequence[Symbol] = (),
         requires_grad: bool = False) -> RT:
    return full(shape, 1, dtype, domain, requires_grad)


def arange(n: int, dtype: str = "int64", domain: Sequence[Symbol] = (), requires_grad: bool = False) -> RT:
    return tensor(np.arange(int_argument("n", n, minimum=0)), dtype, domain, requires_grad)


def _leaf(op: str, shape: Sequence[int], dtype: str, domain: Sequence[Symbol], requires_grad: bool,
          **attrs: Any) -> RT:
    ctx = current_context()
    shape = static_shape(shape)
    domain = ctx.check_domain(domain, user_location())
    node = ctx.add_node(op, Attrs.of(shape=shape, dtype=check_dtype(dtype), **attrs), domain, [],
                        (TensorType(shape, dtype),), user_location())
    node.requires_grad = grad_flag(requires_grad, dtype)
    return ctx.view(node)


def grad_flag(requires_grad: bool, dtype: str) -> bool:
    """Like torch: only floating-point tensors can require gradients."""
    if bool_argument("requires_grad", requires_grad) and not is_float(dtype):
        raise TimeRLError(f"{user_location()}: only floating-point tensors can require gradients, got {dtype}")
    return bool(requires_grad)


def rand(shape: Sequence[int] = (), dtype: str = "float32", domain: Sequence[Symbol] = (),
         requires_grad: bool = False) -> RT:
    """Uniform [0, 1): a fresh, independent draw at every point of the domain, fixed by the seed."""
    return _leaf("rand", shape, dtype, domain, requires_grad, stream=current_context().draw_stream())


def randn(shape: Sequence[int] = (), dtype: str = "float32", domain: Sequence[Symbol] = (),
          requires_grad: bool = False) -> RT:
    return _leaf("randn", shape, dtype, domain, requires_grad, stream=current_context().draw_stream())


def source(fn: Callable[[dict], Any], shape: Sequence[int] = (), dtype: str = "float32",
           domain: Sequence[Symbol] = (), requires_grad: bool = False) -> RT:
    """``fn(point)`` gets the point as ``{"t": 3, ...}`` and returns an array-like of ``shape``."""
    if not callable(fn):
        raise TimeRLError(f"{user_location()}: source(fn, ...) needs a callable")
    return _leaf("source", shape, dtype, domain, requires_grad, fn=fn)


def sink(value: RT, fn: Callable[[dict, Any], Any], native: bool = False) -> None:
    """``fn(point, value)`` at every point of ``value``'s domain, ``value`` a NumPy array (with ``native``, the
    backend's own array: a torch tensor or a jax array)."""
    if not callable(fn):
        raise TimeRLError(f"{user_location()}: sink(fn) needs a callable fn(point, value)")
    ctx = value.ctx
    attrs = Attrs.of(fn=fn, native=bool_argument("native", native))
    ctx.add_node("sink", attrs, value.domain, [Edge(value.node.id, value.output, value.index)], (),
                 user_location())


# ---- arithmetic helpers ---------------------------------------------------------------------------------


def scalar(value: Any, dtype: str | None = None) -> RT:
    return constant(current_context(), value, dtype)


def where(cond: Any, x: Any, y: Any) -> RT:
    """``x`` where ``cond`` holds, else ``y``; ``cond`` a bool tensor or a symbolic condition (``t == 0``)."""
    if isinstance(cond, Cond):
        cond = index_tensor(current_context(), cond, "bool")
    return apply("where", cond, x, y)


def maximum(x: Any, y: Any) -> RT:
    return apply("maximum", x, y)


def minimum(x: Any, y: Any) -> RT:
    return apply("minimum", x, y)


def _unary(name: str) -> Callable[[RT], RT]:
    def op(x: RT) -> RT:
        return apply(name, x)

    op.__name__ = name
    return op


neg, exp, log, sqrt, abs, tanh, sigmoid, relu, sign, detach = (
    _unary(n) for n in ("neg", "exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu", "sign", "detach"))


def pow(x: Any, y: Any) -> RT:
    return apply("pow", x, y)


def clip(x: RT, min: float | None = None, max: float | None = None) -> RT:
    low = float_argument("min", min, optional=True)
    high = float_argument("max", max, optional=True)
    if low is None and high is None:
        raise TimeRLError(f"{user_location()}: clip needs at least one of min= and max=")
    return apply("clip", x, low=_bound_value(min, low), high=_bound_value(max, high))


def _bound_value(given: Any, value: float | None) -> int | float | None:
    """A bound as given (an int stays an int, so an integer tensor clipped by ints stays integer, as in torch)."""
    if value is None:
        return None
    return int(given) if isinstance(given, (int, np.integer)) and not isinstance(given, bool) else value


clamp = clip


def astype(x: RT, dtype: str) -> RT:
    if check_dtype(dtype) == x.dtype:
        return x
    return apply("astype", x, dtype=str(dtype))


# ---- reductions -------------------------------------------------------------------------------------------


def _reduce(name: str, x: RT, dim: Any, keepdim: bool) -> RT:
    dims = normalize_axes(dim, x.ndim if x.ndim else 1)  # a 0-d tensor takes dim 0 or -1, like torch's
    if x.ndim == 0:
        dims = ()
    return apply(name, x, dims=dims, keepdim=bool_argument("keepdim", keepdim))


def _along(name: str, x: RT, dim: int, **attrs: Any) -> RT:
    """An op along one dimension; on a 0-d tensor (dim 0 or -1, like torch) it runs on the 1-element vector."""
    if x.ndim:
        return apply(name, x, dim=normalize_axis(dim, x.ndim), **attrs)
    normalize_axes(dim, 1)
    return reshape(apply(name, reshape(x, (1,)), dim=0, **attrs), ())


def sum(x: RT, dim: Any = None, keepdim: bool = False) -> RT:
    return _reduce("sum", x, dim, keepdim)


def mean(x: RT, dim: Any = None, keepdim: bool = False) -> RT:
    return _reduce("mean", x, dim, keepdim)


def max(x: RT, dim: Any = None, keepdim: bool = False) -> RT:
    return _reduce("max", x, dim, keepdim)


def min(x: RT, dim: Any = None, keepdim: bool = False) -> RT:
    return _reduce("min", x, dim, keepdim)


def argmax(x: RT, dim: int | None = None, keepdim: bool = False) -> RT:
    keepdim = bool_argument("keepdim", keepdim)
    if dim is None or x.ndim == 0:
        normalize_axes(dim, 1)  # only checks a 0-d tensor's dim
        return apply("argmax", reshape(x, (-1,)), dims=(0,), keepdim=False)
    return apply("argmax", x, dims=(normalize_axis(dim, x.ndim),), keepdim=keepdim)


def cumsum(x: RT, dim: int = 0) -> RT:
    return _along("cumsum", x, dim)


def softmax(x: RT, dim: int = -1) -> RT:
    return _along("softmax", x, dim)


def log_softmax(x: RT, dim: int = -1) -> RT:
    return _along("log_softmax", x, dim)


def discounted_sum(x: RT, gamma: float, until: RT | None = None) -> RT:
    """``sum_k gamma**k * x[k]`` over dim 0; with ``until`` (episode ends, bool or 0/1, x's shape), only up to
    and including the first k where ``until[k]`` holds (a Monte Carlo return that stops at the episode's end)."""
    if x.ndim == 0:
        raise ShapeError(f"{user_location()}: discounted_sum needs at least one spatial dimension")
    gamma = float_argument("gamma", gamma)
    if until is None:
        return apply("discounted_sum", x, gamma=gamma)
    ends = tensor_argument("until", until)
    if not same_all(ends.shape, x.shape):
        raise ShapeError(f"{user_location()}: discounted_sum(until=...) needs episode ends of the values' shape "
                         f"{tuple(x.shape)}, got {tuple(ends.shape)}")
    return apply("discounted_sum_until", x, ends, gamma=gamma)


def discounted_cum_sum(x: RT, gamma: float) -> RT:
    """``y[k] = sum_{j >= k} gamma**(j - k) * x[j]`` over dim 0 (the return from each step on)."""
    if x.ndim == 0:
        raise ShapeError(f"{user_location()}: discounted_cum_sum needs at least one spatial dimension")
    return apply("discounted_cum_sum", x, gamma=float_argument("gamma", gamma), reverse=True)


def sum_to(x: RT, shape: Sequence[Any]) -> RT:
    """Sum ``x`` down to ``shape`` (the inverse of broadcasting)."""
    shape = shape_argument("shape", shape)
    extra = x.ndim - len(shape)
    dims = list(range(extra))
    for axis, size in enumerate(shape):
        if isinstance(size, int) and size == 1 and not (isinstance(x.shape[extra + axis], int)
                                                        and x.shape[extra + axis] == 1):
            dims.append(extra + axis)
        elif not same_dim(size, x.shape[extra + axis]) and not (isinstance(size, int) and size == 1):
            raise ShapeError(f"cannot sum shape {x.shape} to {tuple(shape)}")
    if not dims:
        return x
    summed = apply("sum", x, dims=tuple(dims), keepdim=True)
    return summed if same_all(summed.shape, shape) else reshape(summed, tuple(shape))


# ---- layout -------------------------------------------------------------------------------------------------


def reshape(x: RT, *shape: Any) -> RT:
    """PyTorch's forms: ``x.reshape(12)``, ``x.reshape(3, 4)``, ``x.reshape((3, -1))``; one size may be -1."""
    written = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    for size in written:
        if isinstance(size, bool) or not isinstance(size, (int, np.integer, Expr)) or (
                isinstance(size, (int, np.integer)) and size < -1):
            raise ShapeError(f"{user_location()}: reshape{written!r}: sizes are ints >= 0 (one may be -1) or "
                             f"symbolic sizes, got {size!r}")
    shape = tuple(int(s) if isinstance(s, np.integer) else s for s in written)
    holes = [k for k, s in enumerate(shape) if isinstance(s, int) and s == -1]
    if len(holes) > 1:
        raise ShapeError(f"{user_location()}: reshape{written!r}: only one size can be -1")
    if holes:
        shape = shape[:holes[0]] + (inferred_size(x, shape, written),) + shape[holes[0] + 1:]
    if len(shape) == x.ndim and all(_same(a, b) for a, b in zip(shape, x.shape)):
        return x
    return apply("reshape", x, shape=shape)


def _same(a: Any, b: Any) -> bool:
    return same_dim(a, b)


def permute(x: RT, *dims: Any) -> RT:
    perm = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else tuple(dims)
    perm = tuple(normalize_axis(p, x.ndim) for p in perm)
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(f"{user_location()}: {perm} is not a permutation of {x.ndim} dimensions")
    return x if perm == tuple(range(x.ndim)) else apply("permute", x, perm=perm)


def transpose(x: RT, dim0: int = -2, dim1: int = -1) -> RT:
    perm = list(range(x.ndim))
    a, b = normalize_axis(dim0, x.ndim), normalize_axis(dim1, x.ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return permute(x, tuple(perm))


def unsqueeze(x: RT, dim: int) -> RT:
    dim = normalize_axis(dim, x.ndim + 1)
    return reshape(x, x.shape[:dim] + (1,) + x.shape[dim:])


def squeeze(x: RT, dim: int | None = None) -> RT:
    if dim is None:
        return reshape(x, tuple(s for s in x.shape if not (isinstance(s, int) and s == 1)))
    if x.ndim == 0:
        normalize_axes(dim, 1)
        return x
    dim = normalize_axis(dim, x.ndim)
    if not (isinstance(x.shape[dim], int) and x.shape[dim] == 1):
        return x
    return reshape(x, x.shape[:dim] + x.shape[dim + 1:])


def expand(x: RT, *shape: Any) -> RT:
    target = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else tuple(shape)
    shape_argument("shape", tuple(s for s in target if not (isinstance(s, int) and s == -1)))  # -1 keeps a size
    offset = len(target) - x.ndim
    if offset < 0:
        raise ShapeError(f"{user_location()}: expand to {target}: fewer sizes than the tensor's {x.ndim} dimensions")
    if any(isinstance(s, int) and s == -1 for s in target[:offset]):
        raise ShapeError(f"{user_location()}: expand to {target}: -1 (keep the size) in a new leading dimension, "
                         "which has no size to keep")
    target = tuple(x.shape[a - offset] if isinstance(s, int) and s == -1 else s for a, s in enumerate(target))
    if len(target) == x.ndim and all(_same(a, b) for a, b in zip(target, x.shape)):
        return x
    return apply("expand", x, shape=target)


def flip(x: RT, dim: int) -> RT:
    return apply("flip", x, dim=normalize_axis(dim, x.ndim))


def spatial(x: RT, key: Any) -> RT:
    """NumPy basic indexing of the spatial shape. A negative step is a positive-step slice and a flip, so
    every backend runs the same ops (torch slices take no negative step)."""
    key = key if isinstance(key, tuple) else (key,)
    for item in key:
        if isinstance(item, Expr) and item.constant_value() is None:
            raise ShapeError(f"{user_location()}: x.spatial[...] indexes the spatial shape with ints, slices, None "
                             f"and ...; got the symbolic index {item}. To read the tensor at a point of its "
                             "domain write x[...]; to pick elements by a run-time index use index_select or gather")
    key, flipped = forward_slices(x.shape, key)
    result = apply("spatial_index", x, key=key)
    for axis in flipped:
        result = flip(result, axis)
    return result


def cat(tensors: Sequence[RT], dim: int = 0) -> RT:
    first = tensors_argument("tensors", tensors)[0]
    return apply("cat", *tensors, dim=normalize_axis(dim, first.ndim))


def stack(tensors: Sequence[RT], dim: int = 0) -> RT:
    first = tensors_argument("tensors", tensors)[0]
    return apply("stack", *tensors, dim=normalize_axis(dim, first.ndim + 1))


def matmul(x: Any, y: Any) -> RT:
    x, y = _as_tensors([x, y])
    if x.ndim == 0 or y.ndim == 0:
        raise ShapeError(f"{user_location()}: matmul needs tensors with at least one dimension")
    left = unsqueeze(x, 0) if x.ndim == 1 else x
    right = unsqueeze(y, 1) if y.ndim == 1 else y
    result = apply("matmul", left, right)
    if y.ndim == 1:
        result = squeeze(result, -1)
    if x.ndim == 1:
        result = squeeze(result, -2 if y.ndim > 1 else -1)
    return result


def gather(x: RT, dim: int, index: RT) -> RT:
    return apply("gather", tensor_argument("x", x), index, dim=normalize_axis(dim, x.ndim))


def index_select(x: RT, dim: int, index: Any) -> RT:
    return apply("index_select", tensor_argument("x", x), index, dim=normalize_axis(dim, x.ndim))


def one_hot(x: RT, num_classes: int) -> RT:
    return apply("one_hot", tensor_argument("x", x), num_classes=int_argument("num_classes", num_classes, 1))


METHODS = (
    "sum", "mean", "max", "min", "argmax", "cumsum", "softmax", "log_softmax", "discounted_sum",
    "discounted_cum_sum", "reshape", "permute", "transpose", "unsqueeze", "squeeze", "expand", "flip",
    "gather", "index_select", "one_hot", "clip", "clamp", "detach", "astype", "exp", "log", "sqrt", "abs",
    "tanh", "sigmoid", "relu", "sign", "sum_to",
)
