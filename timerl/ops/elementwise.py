"""Elementwise ops: one line each, through `unary`, `binary` and `compare`.

Operands meet in one dtype as in PyTorch (`timerl.ops.dtypes`): ``ARITHMETIC`` ops compute in it,
``FLOATING`` ones (``/``, ``exp``) in floating point, comparisons in it with a bool result."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from timerl.ops.batching import aligned
from timerl.ops.dtypes import Promotion, floating, integer_limits
from timerl.ops.registry import (
    ELEMENTWISE,
    INT_DTYPES,
    NOT_A_REDUCTION,
    NOT_DIFFERENTIABLE,
    POSITIONWISE,
    WINDOW_CARRIED,
    ShapeError,
    ValueCheck,
    broadcast_shapes,
    is_float,
    register,
)

ARITHMETIC = Promotion()
FLOATING = Promotion(compute=floating)
# torch has no bool kernel for -x, abs, relu, **, % and //, and refuses - with any bool operand
NO_BOOL = Promotion(no_bools="result")
NO_BOOL_OPERAND = Promotion(no_bools="operands")


def _same_shape(inputs, attrs):
    return [broadcast_shapes(*(t.shape for t in inputs))]


def _computed(promotion: Promotion | None):
    """The dtype rule of an op computed in its promotion's dtype."""

    def rule(inputs, attrs):
        return [promotion.dtype(inputs, attrs) if promotion is not None else inputs[0].dtype]

    return rule


def _bool_result(inputs, attrs):
    return ["bool"]


def elementwise(name: str, impl: Callable[..., Any], grad: Any, *, promotion: Promotion | None = ARITHMETIC,
                dtype=None, check_values=None) -> None:
    """An op of one or more operands applied element by element, with NumPy broadcasting."""
    register(name, ELEMENTWISE, shape=_same_shape, dtype=dtype or _computed(promotion), impl=impl,
             grad=grad, vectorize=aligned, incrementalize=NOT_A_REDUCTION, window=lambda attrs: WINDOW_CARRIED,
             check_values=check_values, window_scan=POSITIONWISE, promotion=promotion)


unary = binary = elementwise  # the registrations below say their arity


def _integers(*values) -> bool:
    return all("int" in str(v.dtype) or "bool" in str(v.dtype) for v in values)  # numpy, torch, jax names


def _negative_integer_power(xp, x, y):
    """NumPy refuses an integer to a negative integer power; torch and jax returned 0 or garbage."""
    if not _integers(x, y):
        return None
    return xp.any(y < 0), ()


_integer_power = ValueCheck(_negative_integer_power, lambda details: ShapeError(
    "integers to negative integer powers are not allowed; make the base a float first"))


def _integer_division_by_zero(xp, x, y):
    """torch raises ZeroDivisionError for integers, NumPy and jax give 0 or garbage: refuse everywhere."""
    if not _integers(x, y):
        return None
    return xp.any(y == 0), ()


_integer_division = ValueCheck(_integer_division_by_zero, lambda details: ShapeError(
    "integer division by zero (in % or //); make the operands floats first to get inf or nan"))


def compare(name: str, impl: Callable[..., Any]) -> None:
    elementwise(name, impl, NOT_DIFFERENTIABLE, dtype=_bool_result)


def _sigmoid(xp, x):
    return 1.0 / (1.0 + xp.exp(-x))


def _unbroadcast(F, grad, like):
    return F.sum_to(grad, like.shape)


def _pow_grad(F, ins, outs, g, a):
    """As torch: no gradient to the base where the exponent is 0 (d/dx x**0 is 0, also at x = 0), nor to the
    exponent where the base is 0 and the exponent is not negative (0**y is constant there)."""
    x, y = ins
    to_base = F.where(y == 0, 0.0, g[0] * y * F.pow(x, y - 1.0))
    to_exponent = F.where((x == 0) & (y >= 0), 0.0, g[0] * outs[0] * F.log(x))
    return [_unbroadcast(F, to_base, x), _unbroadcast(F, to_exponent, y)]


def _clip(xp, x, low, high):
    if low is not None:
        x = xp.maximum(x, xp.asarray(low, dtype=x.dtype))
    return x if high is None else xp.minimum(x, xp.asarray(high, dtype=x.dtype))


def _clip_grad(F, ins, outs, g, a):
    inside = (outs[0] == ins[0])  # torch passes the gradient where the bound does not bind (at it too)
    return [F.where(inside, g[0], 0.0)]


def _dtype_name(x) -> str:
    return str(x.dtype).removeprefix("torch.")


def _convert(xp, x, dtype: str):
    """``x`` as ``dtype``; NumPy's array-API namespace does not take ml_dtypes' bfloat16, its arrays do."""
    if isinstance(x, (np.ndarray, np.generic)):
        return np.asarray(x).astype(dtype)
    return xp.astype(x, getattr(xp, dtype))


def _to_integer(xp, x, dtype):
    """Floats to integers, the same on every backend: NaN becomes 0, values beyond the integer range its
    smallest or largest value, the rest round toward zero (C's cast leaves the first two undefined)."""
    if not is_float(_dtype_name(x)) or dtype not in INT_DTYPES:
        return _convert(xp, x, dtype)
    low, high = integer_limits(dtype)
    below, above = x <= float(low - 1), x >= float(high + 1)
    inside = xp.where(below | above | xp.isnan(x), xp.zeros_like(x), x)
    result = _convert(xp, inside, dtype)
    result = xp.where(below, xp.asarray(low, dtype=result.dtype), result)
    return xp.where(above, xp.asarray(high, dtype=result.dtype), result)


# fmt: off
unary("neg", lambda xp, x: -x, lambda F, ins, outs, g, a: [F.neg(g[0])], promotion=NO_BOOL)
unary("exp", lambda xp, x: xp.exp(x), lambda F, ins, outs, g, a: [g[0] * outs[0]], promotion=FLOATING)
unary("log", lambda xp, x: xp.log(x), lambda F, ins, outs, g, a: [g[0] / ins[0]], promotion=FLOATING)
unary("sqrt", lambda xp, x: xp.sqrt(x), lambda F, ins, outs, g, a: [g[0] / (outs[0] * 2.0)],
      promotion=FLOATING)
unary("abs", lambda xp, x: xp.abs(x), lambda F, ins, outs, g, a: [g[0] * F.sign(ins[0])], promotion=NO_BOOL)
unary("sign", lambda xp, x: xp.sign(x), NOT_DIFFERENTIABLE)
unary("tanh", lambda xp, x: xp.tanh(x), lambda F, ins, outs, g, a: [g[0] * (1.0 - outs[0] * outs[0])],
      promotion=FLOATING)
unary("sigmoid", _sigmoid, lambda F, ins, outs, g, a: [g[0] * outs[0] * (1.0 - outs[0])], promotion=FLOATING)
unary("relu", lambda xp, x: xp.where(x > 0, x, xp.zeros_like(x)),
      lambda F, ins, outs, g, a: [F.where(ins[0] > 0, g[0], 0.0)], promotion=NO_BOOL)
unary("sin", lambda xp, x: xp.sin(x), lambda F, ins, outs, g, a: [g[0] * F.apply("cos", ins[0])],
      promotion=FLOATING)
unary("cos", lambda xp, x: xp.cos(x), lambda F, ins, outs, g, a: [F.neg(g[0] * F.apply("sin", ins[0]))],
      promotion=FLOATING)
unary("logical_not", lambda xp, x: xp.logical_not(x), NOT_DIFFERENTIABLE, dtype=_bool_result)
unary("identity", lambda xp, x: x, lambda F, ins, outs, g, a: [g[0]], promotion=None)
unary("detach", lambda xp, x: x, NOT_DIFFERENTIABLE, promotion=None)
# the value as it is, computed once: on XLA an optimization barrier, so that a fusion does not recompute what
# it reads per element (per-game scalars read by a (games x buffers) loop); elsewhere nothing
register("materialize", ELEMENTWISE, shape=_same_shape, dtype=_computed(None), impl=lambda xp, x: x,
         grad=lambda F, ins, outs, g, a: [g[0]], vectorize=aligned, incrementalize=NOT_A_REDUCTION,
         lowering={"jax": lambda jax: lambda xp, x: jax.lax.optimization_barrier(x)},
         window=lambda attrs: WINDOW_CARRIED)
unary("clip", _clip, _clip_grad, promotion=Promotion(scalars=("low", "high")))
unary("astype", _to_integer,
      lambda F, ins, outs, g, a: [F.astype(g[0], ins[0].dtype) if is_float(ins[0].dtype) else None],
      dtype=lambda ins, a: [a.get("dtype")], promotion=None)

binary("add", lambda xp, x, y: x + y,
       lambda F, ins, outs, g, a: [_unbroadcast(F, g[0], ins[0]), _unbroadcast(F, g[0], ins[1])])
binary("sub", lambda xp, x, y: x - y,
       lambda F, ins, outs, g, a: [_unbroadcast(F, g[0], ins[0]), _unbroadcast(F, F.neg(g[0]), ins[1])],
       promotion=NO_BOOL_OPERAND)
binary("mul", lambda xp, x, y: x * y,
       lambda F, ins, outs, g, a: [_unbroadcast(F, g[0] * ins[1], ins[0]), _unbroadcast(F, g[0] * ins[0], ins[1])])
binary("div", lambda xp, x, y: x / y,
       lambda F, ins, outs, g, a: [_unbroadcast(F, g[0] / ins[1], ins[0]),
                                   _unbroadcast(F, F.neg(g[0] * outs[0] / ins[1]), ins[1])],
       promotion=FLOATING)
binary("pow", lambda xp, x, y: xp.pow(x, y), _pow_grad, check_values=_integer_power, promotion=NO_BOOL)
# the sign of the divisor, like Python's % and numpy.remainder; out = x - y * floor(x / y), so
# d out / d y = -floor(x / y) = (out - x) / y, written without a floor op
binary("remainder", lambda xp, x, y: xp.remainder(x, y),
       lambda F, ins, outs, g, a: [_unbroadcast(F, g[0], ins[0]),
                                   _unbroadcast(F, g[0] * (outs[0] - ins[0]) / ins[1], ins[1])],
       check_values=_integer_division, promotion=NO_BOOL)
# rounds toward negative infinity, like Python's // and torch.floor_divide; piecewise constant: no gradient
binary("floor_divide", lambda xp, x, y: xp.floor_divide(x, y), NOT_DIFFERENTIABLE, check_values=_integer_division,
       promotion=NO_BOOL)
binary("maximum", lambda xp, x, y: xp.maximum(x, y),
       lambda F, ins, outs, g, a: [_unbroadcast(F, F.where(ins[0] >= ins[1], g[0], 0.0), ins[0]),
                                   _unbroadcast(F, F.where(ins[0] >= ins[1], 0.0, g[0]), ins[1])])
binary("minimum", lambda xp, x, y: xp.minimum(x, y),
       lambda F, ins, outs, g, a: [_unbroadcast(F, F.where(ins[0] <= ins[1], g[0], 0.0), ins[0]),
                                   _unbroadcast(F, F.where(ins[0] <= ins[1], 0.0, g[0]), ins[1])])
binary("logical_and", lambda xp, x, y: xp.logical_and(x, y), NOT_DIFFERENTIABLE, dtype=_bool_result,
       promotion=None)
binary("logical_or", lambda xp, x, y: xp.logical_or(x, y), NOT_DIFFERENTIABLE, dtype=_bool_result,
       promotion=None)

compare("lt", lambda xp, x, y: x < y)
compare("le", lambda xp, x, y: x <= y)
compare("gt", lambda xp, x, y: x > y)
compare("ge", lambda xp, x, y: x >= y)
compare("eq", lambda xp, x, y: x == y)
compare("ne", lambda xp, x, y: x != y)

_CHOICES = Promotion(positions=(1, 2))


def _where_dtype(inputs, attrs):
    # NumPy and jax read any nonzero as true, torch refuses non-bool conditions: decide once, like torch
    if inputs[0].dtype != "bool":
        raise ShapeError(f"the condition is {inputs[0].dtype}, not bool; compare first (x > 0) or cast it "
                         "with .astype('bool')")
    return [_CHOICES.dtype(inputs, attrs)]


elementwise("where", lambda xp, c, x, y: xp.where(c, x, y),
            lambda F, ins, outs, g, a: [None, _unbroadcast(F, F.where(ins[0], g[0], 0.0), ins[1]),
                                        _unbroadcast(F, F.where(ins[0], 0.0, g[0]), ins[2])],
            dtype=_where_dtype, promotion=_CHOICES)
# fmt: on
