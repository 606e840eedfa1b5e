"""Elementwise ops: one line each, through `unary`, `binary` and `compare`."""

from __future__ import annotations

from typing import Any, Callable

from timerl.ops.batching import aligned
from timerl.ops.registry import (
    ELEMENTWISE,
    NOT_A_REDUCTION,
    NOT_DIFFERENTIABLE,
    POSITIONWISE,
    WINDOW_CARRIED,
    ShapeError,
    ValueCheck,
    broadcast_shapes,
    is_float,
    promote,
    register,
)


def _same_shape(inputs, attrs):
    return [broadcast_shapes(*(t.shape for t in inputs))]


def _promoted(inputs, attrs):
    return [promote(*(t.dtype for t in inputs))]


def _float_result(inputs, attrs):
    dtype = promote(*(t.dtype for t in inputs))
    return [dtype if is_float(dtype) else "float32"]


def _bool_result(inputs, attrs):
    return ["bool"]


def elementwise(name: str, impl: Callable[..., Any], grad: Any, *, dtype=_promoted, check_values=None) -> None:
    """An op of one or more operands applied element by element, with NumPy broadcasting."""
    register(name, ELEMENTWISE, shape=_same_shape, dtype=dtype, impl=impl, grad=grad, vectorize=aligned,
             incrementalize=NOT_A_REDUCTION, window=lambda attrs: WINDOW_CARRIED, check_values=check_values,
             window_scan=POSITIONWISE)


unary = binary = elementwise  # the registrations below say their arity


def _negative_integer_power(xp, x, y):
    """NumPy refuses an integer to a negative integer power; torch and jax returned 0 or garbage."""
    integers = all("int" in str(v.dtype) or "bool" in str(v.dtype) for v in (x, y))  # numpy, torch, jax names
    if not integers:
        return None
    return xp.any(y < 0), ()


_integer_power = ValueCheck(_negative_integer_power, lambda details: ShapeError(
    "integers to negative integer powers are not allowed; make the base a float first"))


def compare(name: str, impl: Callable[..., Any]) -> None:
    elementwise(name, impl, NOT_DIFFERENTIABLE, dtype=_bool_result)


def _sigmoid(xp, x):
    return 1.0 / (1.0 + xp.exp(-x))


def _unbroadcast(F, grad, like):
    return F.sum_to(grad, like.shape)


# fmt: off
unary("neg", lambda xp, x: -x, lambda F, ins, outs, g, a: [F.neg(g[0])])
unary("exp", lambda xp, x: xp.exp(x), lambda F, ins, outs, g, a: [g[0] * outs[0]], dtype=_float_result)
unary("log", lambda xp, x: xp.log(x), lambda F, ins, outs, g, a: [g[0] / ins[0]], dtype=_float_result)
unary("sqrt", lambda xp, x: xp.sqrt(x), lambda F, ins, outs, g, a: [g[0] / (outs[0] * 2.0)], dtype=_float_result)
unary("abs", lambda xp, x: xp.abs(x), lambda F, ins, outs, g, a: [g[0] * F.sign(ins[0])])
unary("sign", lambda xp, x: xp.sign(x), NOT_DIFFERENTIABLE)
unary("tanh", lambda xp, x: xp.tanh(x), lambda F, ins, outs, g, a: [g[0] * (1.0 - outs[0] * outs[0])],
      dtype=_float_result)
unary("sigmoid", _sigmoid, lambda F, ins, outs, g, a: [g[0] * outs[0] * (1.0 - outs[0])], dtype=_float_result)
unary("relu", lambda xp, x: xp.where(x > 0, x, xp.zeros_like(x)),
      lambda F, ins, outs, g, a: [F.where(ins[0] > 0, g[0], 0.0)])
unary("sin", lambda xp, x: xp.sin(x), lambda F, ins, outs, g, a: [g[0] * F.apply("cos", ins[0])],
      dtype=_float_result)
unary("cos", lambda xp, x: xp.cos(x), lambda F, ins, outs, g, a: [F.neg(g[0] * F.apply("sin", ins[0]))],
      dtype=_float_result)
unary("logical_not", lambda xp, x: xp.logical_not(x), NOT_DIFFERENTIABLE, dtype=_bool_result)
unary("identity", lambda xp, x: x, lambda F, ins, outs, g, a: [g[0]])
unary("detach", lambda xp, x: x, NOT_DIFFERENTIABLE)
# the value as it is, computed once: on XLA an optimization barrier, so that a fusion does not recompute what
# it reads per element (per-game scalars read by a (games x buffers) loop); elsewhere nothing
register("materialize", ELEMENTWISE, shape=_same_shape, dtype=_promoted, impl=lambda xp, x: x,
         grad=lambda F, ins, outs, g, a: [g[0]], vectorize=aligned, incrementalize=NOT_A_REDUCTION,
         lowering={"jax": lambda jax: lambda xp, x: jax.lax.optimization_barrier(x)},
         window=lambda attrs: WINDOW_CARRIED)
unary("clip", lambda xp, x, low, high: xp.clip(x, low, high),
      lambda F, ins, outs, g, a: [F.where((ins[0] >= a["low"]) & (ins[0] <= a["high"]), g[0], 0.0)])
unary("astype", lambda xp, x, dtype: xp.astype(x, getattr(xp, dtype)),
      lambda F, ins, outs, g, a: [F.astype(g[0], ins[0].dtype) if is_float(ins[0].dtype) else None],
      dtype=lambda ins, a: [a.get("dtype")])

binary("add", lambda xp, x, y: x + y,
       lambda F, ins, outs, g, a: [_unbroadcast(F, g[0], ins[0]), _unbroadcast(F, g[0], ins[1])])
binary("sub", lambda xp, x, y: x - y,
       lambda F, ins, outs, g, a: [_unbroadcast(F, g[0], ins[0]), _unbroadcast(F, F.neg(g[0]), ins[1])])
binary("mul", lambda xp, x, y: x * y,
       lambda F, ins, outs, g, a: [_unbroadcast(F, g[0] * ins[1], ins[0]), _unbroadcast(F, g[0] * ins[0], ins[1])])
binary("div", lambda xp, x, y: x / y,
       lambda F, ins, outs, g, a: [_unbroadcast(F, g[0] / ins[1], ins[0]),
                                   _unbroadcast(F, F.neg(g[0] * outs[0] / ins[1]), ins[1])],
       dtype=_float_result)
binary("pow", lambda xp, x, y: xp.pow(x, y),
       lambda F, ins, outs, g, a: [_unbroadcast(F, g[0] * ins[1] * F.pow(ins[0], ins[1] - 1.0), ins[0]),
                                   _unbroadcast(F, g[0] * outs[0] * F.log(ins[0]), ins[1])],
       check_values=_integer_power)
# the sign of the divisor, like Python's % and numpy.remainder; out = x - y * floor(x / y), so
# d out / d y = -floor(x / y) = (out - x) / y, written without a floor op
binary("remainder", lambda xp, x, y: xp.remainder(x, y),
       lambda F, ins, outs, g, a: [_unbroadcast(F, g[0], ins[0]),
                                   _unbroadcast(F, g[0] * (outs[0] - ins[0]) / ins[1], ins[1])])
binary("maximum", lambda xp, x, y: xp.maximum(x, y),
       lambda F, ins, outs, g, a: [_unbroadcast(F, F.where(ins[0] >= ins[1], g[0], 0.0), ins[0]),
                                   _unbroadcast(F, F.where(ins[0] >= ins[1], 0.0, g[0]), ins[1])])
binary("minimum", lambda xp, x, y: xp.minimum(x, y),
       lambda F, ins, outs, g, a: [_unbroadcast(F, F.where(ins[0] <= ins[1], g[0], 0.0), ins[0]),
                                   _unbroadcast(F, F.where(ins[0] <= ins[1], 0.0, g[0]), ins[1])])
binary("logical_and", lambda xp, x, y: xp.logical_and(x, y), NOT_DIFFERENTIABLE, dtype=_bool_result)
binary("logical_or", lambda xp, x, y: xp.logical_or(x, y), NOT_DIFFERENTIABLE, dtype=_bool_result)

compare("lt", lambda xp, x, y: x < y)
compare("le", lambda xp, x, y: x <= y)
compare("gt", lambda xp, x, y: x > y)
compare("ge", lambda xp, x, y: x >= y)
compare("eq", lambda xp, x, y: x == y)
compare("ne", lambda xp, x, y: x != y)

def _where_dtype(inputs, attrs):
    # NumPy and jax read any nonzero as true, torch refuses non-bool conditions: decide once, like torch
    if inputs[0].dtype != "bool":
        raise ShapeError(f"the condition is {inputs[0].dtype}, not bool; compare first (x > 0) or cast it "
                         "with .astype('bool')")
    return [promote(inputs[1].dtype, inputs[2].dtype)]


elementwise("where", lambda xp, c, x, y: xp.where(c, x, y),
            lambda F, ins, outs, g, a: [None, _unbroadcast(F, F.where(ins[0], g[0], 0.0), ins[1]),
                                        _unbroadcast(F, F.where(ins[0], 0.0, g[0]), ins[2])],
            dtype=_where_dtype)
# fmt: on
