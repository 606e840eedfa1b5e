"""Piecewise definitions: placeholders, their branch assignments, and trainable parameters.

``o[i, t + 1] = rhs`` adds a branch to the merge node behind ``o``: at a point ``p`` of ``o`` with
``p_t >= 1`` (the target lies in the domain), ``o[p] = rhs[p_t - 1]``. The right-hand side is therefore
only ever read where its target exists, which is what lets ``g[t - 1] = r[t - 1] + g[t]`` never read
``r[-1]``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from timerl.errors import DomainError, ShapeError, TimeRLError, user_location
from timerl.ops.registry import MERGE, is_float, same_dim
from timerl.pdg.graph import Attrs, Edge, TensorType
from timerl.rt import functional as F
from timerl.rt.context import conjuncts, current_context
from timerl.symbolic import TRUE, Cond, Expr, Symbol, affine_coefficient, as_expr, compare, conjunction
from timerl.rt.view import TensorView

RT = TensorView


def placeholder(shape: Sequence[int] = (), dtype: str = "float32", domain: Sequence[Symbol] = (),
                requires_grad: bool = False) -> RT:
    ctx = current_context()
    shape = F.shape_argument("shape", shape)
    node = ctx.add_node("merge", Attrs.of(shape=shape, dtype=F.check_dtype(dtype)),
                        ctx.check_domain(domain, user_location()), [],
                        (TensorType(shape, dtype),), user_location())
    node.requires_grad = F.grad_flag(requires_grad, dtype)
    return ctx.view(node)


def param(init: Any, domain: Sequence[Symbol] | None = None, dtype: str | None = None) -> RT:
    """A trainable tensor over ``domain`` (default: the context's first dimension) equal to ``init`` at 0."""
    ctx = current_context()
    if domain is None:
        domain = ctx.dims[:1]
    init_rt = init if isinstance(init, RT) else F.tensor(np.asarray(init), dtype or _default_dtype(init))
    result = placeholder(init_rt.shape, init_rt.dtype, ctx.check_domain(domain, user_location()), requires_grad=True)
    key = tuple(0 for _ in domain)
    assign(result, key if len(key) != 1 else key[0], init_rt)
    return result


def load_initial(parameter: RT, value: Any) -> None:
    """The value a `param` starts from (its value at 0) replaced by ``value``, an array of its shape: weights
    trained by another program loaded into this one (``module.load_parameters``)."""
    node = parameter.node
    location = user_location()
    branches = node.inputs if node.category is MERGE and node.requires_grad else []
    start = parameter.ctx.nodes[branches[0].producer] if branches else None
    if start is None or start.op != "const":
        raise TimeRLError(f"{location}: only a trl.param created from an array can load values (created at "
                          f"{node.location})")
    dtype, shape = start.attrs["dtype"], tuple(start.attrs["shape"])
    try:
        array = np.array(value, dtype=dtype)
    except (TypeError, ValueError) as error:
        raise ShapeError(f"{location}: cannot load {type(value).__name__} into a {dtype} parameter: {error}") from None
    if array.shape != shape:
        raise ShapeError(f"{location}: loading shape {array.shape} into a parameter of shape {shape} (created at "
                         f"{node.location})")
    start.attrs = Attrs.of(value=array, shape=shape, dtype=dtype)


def _default_dtype(value: Any) -> str:
    return "float32" if np.asarray(value).dtype.kind in "fc" else str(np.asarray(value).dtype)


def assign(target: RT, key: Any, value: Any) -> None:
    location = user_location()
    node = target.node
    if node.category is not MERGE or not target.is_plain():
        raise TimeRLError(f"{location}: only placeholders (trl.placeholder / trl.param) take assignments")
    keys = key if isinstance(key, tuple) else (key,)
    if len(keys) > len(node.domain):
        raise DomainError(f"{location}: {len(keys)} indices for a placeholder over "
                          f"({', '.join(d.name for d in node.domain)})")
    keys = keys + tuple(node.domain[len(keys):])
    ctx = target.ctx
    if not isinstance(value, RT):
        value = F.constant(ctx, value, node.outputs[0].dtype, location=location)
    elif value.ctx is not ctx:
        raise ShapeError(f"{location}: the right-hand side is a tensor of another context; a placeholder takes "
                         "tensors of its own program (made inside the same `with ctx:`)")
    condition: Cond = TRUE
    source_point: dict[Symbol, Expr] = {}
    for dim, item in zip(node.domain, keys):
        bound = ctx.bound_of(dim)
        if isinstance(item, slice) or isinstance(item, bool) or not isinstance(item, (int, np.integer, Expr)):
            raise DomainError(f"{location}: assignment indices are a dimension, a constant or "
                              f"dimension + constant; got {item!r}")
        expr = as_expr(item)
        split = affine_coefficient(expr, dim)
        others = {s for s in expr.symbols() if not s.is_bound} - {dim}
        if split is None or others or split[0] not in (0, 1):
            raise DomainError(f"{location}: assignment index {expr} for {dim.name} must be {dim.name}, a constant, "
                              f"or {dim.name} + constant")
        coef, offset = split
        if coef == 0:
            condition = conjunction(condition, compare(dim, "==", offset))
            source_point[dim] = offset
        else:
            # o[d + c] = rhs(d): the point p of o comes from rhs at d = p - c, where 0 <= p - c < D
            condition = conjunction(condition, compare(dim - offset, ">=", 0), compare(dim - offset, "<", bound))
            source_point[dim] = dim - offset
    extra = set(value.domain) - set(node.domain)
    if extra:
        raise DomainError(f"{location}: the right-hand side varies over {sorted(d.name for d in extra)}, which "
                          f"the placeholder's domain ({', '.join(d.name for d in node.domain)}) does not have")
    value = _conform(value, node.outputs[0], location)
    # a branch assigned inside `ctx.when(cond)` holds where cond holds at its right-hand side's point
    when = [c for c in conjuncts(ctx.current_condition())
            if {s for s in c.symbols() if not s.is_bound} <= set(node.domain)]
    condition = conjunction(condition, *(c.substitute(source_point) for c in when))
    index = tuple(item.substitute(source_point) for item in value.index)
    node.inputs.append(Edge(value.node.id, value.output, index, condition))


def _conform(value: RT, expected: TensorType, location: str) -> RT:
    """The right-hand side in the placeholder's dtype and shape, as PyTorch's ``x[...] = value`` casts: floats to
    another float, int64, int32 and bool to any dtype (True is 1); anything else (a float into an integer or bool
    placeholder: it would truncate silently) is a `ShapeError`. Then broadcast to the placeholder's shape."""
    if value.dtype != expected.dtype:
        if is_float(value.dtype) and is_float(expected.dtype) or value.dtype in ("int64", "int32", "bool"):
            value = F.astype(value, expected.dtype)
        else:
            raise ShapeError(f"{location}: assigning {value.dtype} to a {expected.dtype} placeholder")
    if len(value.shape) != len(expected.shape) or not all(same_dim(a, b) for a, b in zip(value.shape, expected.shape)):
        try:
            value = F.expand(value, expected.shape)
        except ShapeError:
            raise ShapeError(f"{location}: assigning shape {tuple(value.shape)} to a placeholder of shape "
                             f"{tuple(expected.shape)}") from None
    return value
