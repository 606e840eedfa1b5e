"""The core of the functional API: `apply` (every op a user or a gradient rule applies goes through it),
constants, and the argument normalization the op wrappers share."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import timerl.ops  # noqa: F401  (registers every op)
from timerl.errors import ShapeError, TimeRLError, int_argument, user_location
from timerl.ops import registry
from timerl.ops.registry import OPS, is_float
from timerl.pdg.graph import Attrs, Edge, TensorType
from timerl.rt.context import Context, current_context
from timerl.symbolic import Cond, Expr, Symbol, register_tensor_maker
from timerl.rt.view import TensorView, check_same_context

RT = TensorView


def normalize_axis(axis: int, rank: int) -> int:
    int_argument("dim", axis)
    if rank == 0:  # ops that take dim 0 or -1 of a 0-d tensor, as torch does, handle it before calling this
        raise ShapeError(f"{user_location()}: dim={axis}: the tensor has no spatial dimensions (shape ())")
    try:
        return registry.normalize_axis(axis, rank)
    except ShapeError as error:
        raise ShapeError(f"{user_location()}: {error}") from None


def normalize_axes(axes: Any, rank: int) -> tuple[int, ...]:
    try:
        return registry.normalize_axes(axes, rank)
    except (ShapeError, TypeError) as error:
        raise ShapeError(f"{user_location()}: dim={axes!r}: {error}") from None


def check_dtype(dtype: Any) -> str:
    if dtype not in registry.DTYPE_ORDER:
        raise ShapeError(f"{user_location()}: unknown dtype {dtype!r}; "
                         f"choose one of {', '.join(registry.DTYPE_ORDER)}")
    return dtype


def static_shape(shape: Any) -> tuple[int, ...]:
    try:
        dims = tuple(shape)
    except TypeError:
        dims = None
    if dims is None or not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 0
                               for d in dims):
        raise ShapeError(f"{user_location()}: a shape is a tuple of non-negative ints, got {shape!r}")
    return tuple(int(d) for d in dims)


def _scalar_dtype(value: Any, others: Sequence[RT]) -> str:
    """A Python scalar outside an op's promotion (an operand it reads as is): weak like in torch, it takes
    the tensors' dtype when that can hold it."""
    floats = [t.dtype for t in others if is_float(t.dtype)]
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return others[0].dtype if others and others[0].dtype != "bool" else "int64"
    return floats[0] if floats else "float32"


_SCALARS = (int, float, bool, np.integer, np.floating, np.bool_)


def constant(ctx: Context, value: Any, dtype: str | None = None, domain: tuple[Symbol, ...] = (),
             location: str | None = None) -> RT:
    try:
        array = np.asarray(value)
        if dtype is None:
            dtype = "float32" if array.dtype.kind == "f" else str(array.dtype)
        array = array.astype(check_dtype(dtype))
    except (ValueError, TypeError) as error:
        raise ShapeError(f"{location or user_location()}: cannot make a tensor of {value!r}: {error}") from None
    node = ctx.add_node("const", Attrs.of(value=array, shape=array.shape, dtype=dtype), tuple(domain), [],
                        (TensorType(array.shape, dtype),), location or user_location())
    return ctx.view(node)


def index_tensor(ctx: Context, expr: Expr | Cond, dtype: str = "int64", location: str | None = None) -> RT:
    """The scalar tensor of an integer expression's value at each point (``T - t``), or of a condition's
    (``t == 0``, dtype bool), over the dimensions it mentions; bounds take the values of the run."""
    location = location or user_location()
    foreign = expr.symbols() - set(ctx.dims) - set(ctx.bounds)
    if foreign:
        raise TimeRLError(f"{location}: {expr} mentions {', '.join(sorted(s.name for s in foreign))}, which "
                          "belong to another context")
    domain = ctx.order_dims(expr.symbols())
    node = ctx.add_node("index", Attrs.of(expr=expr, dtype=check_dtype(dtype)), domain, [],
                        (TensorType((), dtype),), location)
    return ctx.view(node)


register_tensor_maker(lambda expr: index_tensor(current_context(), expr))


def _as_tensors(args: Sequence[Any], op: str | None = None, attrs: Attrs = Attrs()) -> list[RT]:
    """The operands as tensors: Python scalars and arrays become constants, and the operands of ``op``'s
    promotion (`timerl.ops.dtypes.Promotion`) are converted to the one dtype it computes in, as in torch."""
    tensors = [a for a in args if isinstance(a, RT)]
    if not tensors:
        raise TimeRLError(f"{user_location()}: an op needs at least one recurrent tensor input")
    ctx = check_same_context(*tensors)
    promotion = OPS[op].promotion if op is not None else None
    members = set(promotion.members(len(args))) if promotion is not None else set()
    out = []
    for arg in args:
        if isinstance(arg, RT):
            out.append(arg)
        elif isinstance(arg, _SCALARS):
            out.append(arg)  # made a constant below, once its dtype is known
        elif isinstance(arg, (np.ndarray, list, tuple)):
            out.append(constant(ctx, arg))
        elif isinstance(arg, Expr):  # an int like any other, weak: made a tensor below, once its dtype is known
            out.append(arg)
        elif isinstance(arg, Cond):  # a symbolic condition: a bool tensor of its value at each point
            out.append(index_tensor(ctx, arg, "bool"))
        else:
            raise TimeRLError(f"{user_location()}: cannot use {type(arg).__name__} as a tensor")
    common = None
    if members:
        weak = [1 if isinstance(out[k], Expr) else out[k] for k in sorted(members) if not isinstance(out[k], RT)]
        try:
            common = promotion.dtype([out[k].type if isinstance(out[k], RT) else None for k in range(len(out))],
                                     attrs, weak)
        except ShapeError as error:
            raise ShapeError(f"{user_location()}: {op}: {error}") from None
    for k, arg in enumerate(out):
        if isinstance(arg, Expr):
            out[k] = index_tensor(ctx, arg, common if k in members else _scalar_dtype(1, tensors))
        elif not isinstance(arg, RT):
            out[k] = constant(ctx, arg, common if k in members else _scalar_dtype(arg, tensors))
        elif k in members and arg.dtype != common:
            out[k] = apply("astype", arg, dtype=common)
            ctx.conversions += 1
    return out


def apply(op: str, *args: Any, as_tuple: bool = False, **attrs: Any) -> Any:
    """Create a node of ``op`` over the union of the inputs' domains, reading each input through its view.
    Returns the output RT, or a tuple of them for ops with several outputs (or when ``as_tuple``)."""
    frozen = Attrs.of(**attrs)
    inputs = _as_tensors(args, op, frozen)
    ctx = inputs[0].ctx
    location = user_location()
    try:
        types = OPS[op].infer([t.type for t in inputs], frozen)
    except ShapeError as error:
        raise ShapeError(f"{location}: {op}: {error}") from None
    domain = ctx.order_dims(set().union(*(t.domain for t in inputs)))
    edges = [Edge(t.node.id, t.output, t.index) for t in inputs]
    node = ctx.add_node(op, frozen, domain, edges, types, location)
    results = [ctx.view(node, k) for k in range(len(types))]
    return results[0] if len(results) == 1 and not as_tuple else tuple(results)


