"""Ops the executors evaluate themselves: constants, sources, random draws, integer expressions of the point
(``index``), sinks, merges, UDFs, and the gradient accumulation of symbolic backpropagation."""

from __future__ import annotations

from timerl.ops.registry import (
    ACCUMULATE,
    CONST,
    DRAW,
    EXECUTOR,
    INDEX,
    MERGE,
    NOT_A_REDUCTION,
    NOT_DIFFERENTIABLE,
    SINK,
    SOURCE,
    UDF,
    RunningContributions,
    register,
    unsupported,
)


def _declared(inputs, attrs):
    return [tuple(attrs["shape"])]


def _declared_dtype(inputs, attrs):
    return [attrs["dtype"]]


def draws_normal(op: str) -> bool:
    """Whether a draw op samples the standard normal distribution (``randn``) rather than uniform on [0, 1)."""
    return op == "randn"


def _executor(name, category, *, shape=_declared, dtype=_declared_dtype, grad, vectorize,
              incrementalize=NOT_A_REDUCTION):
    register(name, category, shape=shape, dtype=dtype, impl=EXECUTOR, grad=grad, vectorize=vectorize,
             incrementalize=incrementalize)


_USER_FUNCTION = unsupported("a user's Python function: called point by point")

_executor("const", CONST, grad=NOT_DIFFERENTIABLE,
          vectorize=unsupported("the same value at every point: a vectorized statement passes it as is"))
_executor("source", SOURCE, grad=NOT_DIFFERENTIABLE, vectorize=_USER_FUNCTION)
for _draw in ("rand", "randn"):
    _executor(_draw, DRAW, grad=NOT_DIFFERENTIABLE,
              vectorize=unsupported("drawn for many points at once by the counter-based generator "
                                    "(timerl.runtime.draws), not by a kernel"))
_executor("index", INDEX, shape=lambda ins, a: [()], grad=NOT_DIFFERENTIABLE,
          vectorize=unsupported("the expression evaluated at each point by the executor, not by a kernel"))
_executor("sink", SINK, shape=lambda ins, a: [], dtype=lambda ins, a: [],
          grad=unsupported("a sink has no output to differentiate"),
          vectorize=unsupported("called point by point once a vectorized statement's values are computed"))
_executor("merge", MERGE,
          grad=unsupported("merges are differentiated by autodiff itself: the gradient is a merge with the "
                           "same branch conditions (paper §5.1)"),
          vectorize=unsupported("selects a branch per point: a recurrence, which vectorization leaves alone"))
_executor("udf", UDF, shape=lambda ins, a: [tuple(t.shape) for t in a["outputs"]],
          dtype=lambda ins, a: [t.dtype for t in a["outputs"]],
          grad=unsupported("user-defined functions (e.g. environments) are black boxes: not differentiable"),
          vectorize=_USER_FUNCTION)
_executor("grad_accumulate", ACCUMULATE, grad=unsupported("second-order gradients are not supported"),
          vectorize=unsupported("sums the contributions a vectorized statement computed, stacked or one by one "
                                "(timerl.runtime.evaluate.accumulate_gradient)"),
          incrementalize=RunningContributions())
