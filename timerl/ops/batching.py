"""Batch rules (paper §5.2): an op applied at many points at once, the points stacked along a new leading axis.

A vectorized statement computes each member at every point of a loop in one call. Where the op's own kernel,
with its axis attributes moved past the new axis, computes every point's result, that call is the kernel itself:
one dispatch of the array library, where `torch.func.vmap` / `jax.vmap` would trace the kernel first (about a
millisecond a call on torch). Rules by category:

- elementwise ops and ``matmul``: the batched operands get size-1 axes after the batch axis up to the rank of
  the widest operand, so broadcasting lines every point's operands up as it would for one point;
- reductions and scans over named axes (``dims``, ``dim``): the axes move by one;
- ``reshape``, ``expand``, ``permute``, ``flip``: the target shape or permutation gains the batch axis;
- ``spatial_index`` and its gradient ``spatial_scatter`` (basic indexing): the key gains a full slice in front;
- ``discounted_sum`` (a sum over axis 0 weighted by powers of gamma): the weights multiply axis 1;
- ``scatter`` and ``gather_fill`` (index, src and x share every axis but the indexed one): operands the same
  at every point are broadcast along the batch axis, and the indexed axis moves by one.

Every other op has no rule (`batch_rule` returns None) and the executor uses the array library's vmap.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from timerl.ops.registry import CONTRACTION, ELEMENTWISE, OPS, REDUCTION, SCAN

_AXIS_SCANS = frozenset({"cumsum", "softmax", "log_softmax"})
_INDEXED = frozenset({"scatter", "gather_fill"})
_SPATIAL = frozenset({"spatial_index", "spatial_scatter"})


def batch_rule(op: str, attrs: dict, ranks: Sequence[int], axes: Sequence[int | None], xp: Any,
               kernel: Callable[..., Any], kernel_with: Callable[[dict], Callable[..., Any]]) -> Callable | None:
    """The op at every point in one call of a kernel, or None where this module has no rule.

    ``ranks``: each input's rank at one point; ``axes``: 0 for inputs batched along axis 0, None for inputs that
    are the same at every point; ``kernel``: the op's kernel for one point; ``kernel_with(attrs)``: the kernel with
    other attributes."""
    category = OPS[op].category
    if category == ELEMENTWISE or category == CONTRACTION:
        return _aligned(kernel, ranks, axes, xp)
    if op in _INDEXED:
        return _indexed(kernel_with({**attrs, "dim": _shift(attrs["dim"])}), axes, xp)
    if sum(a == 0 for a in axes) != 1 or axes[0] != 0:
        return None  # the rules below move the axes of one batched operand, the first
    if category == REDUCTION and op != "discounted_sum" and "dims" in attrs:
        return kernel_with({**attrs, "dims": tuple(_shift(d) for d in attrs["dims"])})
    if (category == SCAN and op in _AXIS_SCANS) or op == "flip":
        return kernel_with({**attrs, "dim": _shift(attrs["dim"])})
    if op == "reshape":
        return lambda x: xp.reshape(x, (x.shape[0], *attrs["shape"]))
    if op == "expand":
        aligned = _aligned(lambda x: x, ranks, axes, xp, rank=len(attrs["shape"]))
        return lambda x: xp.broadcast_to(aligned(x), (x.shape[0], *attrs["shape"]))
    if op == "permute":
        return kernel_with({**attrs, "perm": (0, *(p + 1 for p in attrs["perm"]))})
    if op in _SPATIAL:  # basic indexing: a full slice for the batch axis in front of the key
        key = (slice(None), *(attrs["key"] if isinstance(attrs["key"], tuple) else (attrs["key"],)))
        if op == "spatial_index":
            return kernel_with({**attrs, "key": key})
        return lambda g: kernel_with({**attrs, "key": key, "shape": (g.shape[0], *attrs["shape"])})(g)
    if op == "discounted_sum":
        gamma = attrs["gamma"]

        def discounted(x: Any) -> Any:
            n = x.shape[1]
            weights = xp.pow(xp.full((n,), gamma, dtype=x.dtype), xp.astype(xp.arange(n), x.dtype))
            return xp.sum(xp.reshape(weights, (1, n) + (1,) * (x.ndim - 2)) * x, axis=1)

        return discounted
    return None


def _indexed(shifted: Callable[..., Any], axes: Sequence[int | None], xp: Any) -> Callable[..., Any]:
    def every_point(*inputs: Any) -> Any:
        points = next(x.shape[0] for x, axis in zip(inputs, axes) if axis == 0)
        return shifted(*(x if axis == 0 else xp.broadcast_to(x[None], (points, *x.shape))
                         for x, axis in zip(inputs, axes)))

    return every_point


def _shift(axis: int) -> int:
    return axis + 1 if axis >= 0 else axis


def _aligned(kernel: Callable[..., Any], ranks: Sequence[int], axes: Sequence[int | None], xp: Any,
             rank: int | None = None) -> Callable[..., Any]:
    """``kernel`` on operands whose batched ones are first brought to rank ``1 + rank`` (default: the widest
    operand's rank at one point) with size-1 axes after the batch axis."""
    widest = max(ranks) if rank is None else rank
    padding = [widest - r if a == 0 else 0 for r, a in zip(ranks, axes)]
    if not any(padding):
        return kernel

    def call(*values: Any) -> Any:
        moved = [xp.reshape(v, (v.shape[0],) + (1,) * p + tuple(v.shape[1:])) if p else v
                 for v, p in zip(values, padding)]
        return kernel(*moved)

    return call
