"""Ops the executors evaluate themselves: constants, sources, random draws, sinks, merges, UDFs, and the
gradient accumulation of symbolic backpropagation."""

from __future__ import annotations

from timerl.ops.registry import (
    ACCUMULATE,
    CONST,
    DRAW,
    EXECUTOR,
    MERGE,
    NOT_DIFFERENTIABLE,
    SINK,
    SOURCE,
    UDF,
    register,
    unsupported,
)


def _declared(inputs, attrs):
    return [tuple(attrs["shape"])]


def _declared_dtype(inputs, attrs):
    return [attrs["dtype"]]


register("const", CONST, shape=_declared, dtype=_declared_dtype, impl=EXECUTOR, grad=NOT_DIFFERENTIABLE)
register("source", SOURCE, shape=_declared, dtype=_declared_dtype, impl=EXECUTOR, grad=NOT_DIFFERENTIABLE)
def draws_normal(op: str) -> bool:
    """Whether a draw op samples the standard normal distribution (``randn``) rather than uniform on [0, 1)."""
    return op == "randn"


register("rand", DRAW, shape=_declared, dtype=_declared_dtype, impl=EXECUTOR, grad=NOT_DIFFERENTIABLE)
register("randn", DRAW, shape=_declared, dtype=_declared_dtype, impl=EXECUTOR, grad=NOT_DIFFERENTIABLE)
register("sink", SINK, shape=lambda ins, a: [], dtype=lambda ins, a: [], impl=EXECUTOR,
         grad=unsupported("a sink has no output to differentiate"))
register("merge", MERGE, shape=_declared, dtype=_declared_dtype, impl=EXECUTOR,
         grad=unsupported("merges are differentiated by autodiff itself: the gradient is a merge with the "
                          "same branch conditions (paper §5.1)"))
register("udf", UDF, shape=lambda ins, a: [tuple(t.shape) for t in a["outputs"]],
         dtype=lambda ins, a: [t.dtype for t in a["outputs"]], impl=EXECUTOR,
         grad=unsupported("user-defined functions (e.g. environments) are black boxes: not differentiable"))
register("grad_accumulate", ACCUMULATE, shape=_declared, dtype=_declared_dtype, impl=EXECUTOR,
         grad=unsupported("second-order gradients are not supported"))
