"""Vectorize rules (paper §5.2): an op applied at many points at once, the points stacked along a new leading axis.

A vectorized statement computes each member at every point of a loop in one call. Where the op's own kernel,
with its axis attributes moved past the new axis, computes every point's result, that call is the kernel itself:
one dispatch of the array library, where `torch.func.vmap` / `jax.vmap` would trace the kernel first (about a
millisecond a call on torch). Each op's registry entry names its rule (``vectorize=``); the rules are built here:

- `aligned` (elementwise ops and ``matmul``): the batched operands get size-1 axes after the batch axis up to the
  rank of the widest operand, so broadcasting lines every point's operands up as it would for one point;
- `shifted_axes` / `shifted_axis` (reductions over ``dims``, scans and ``flip`` along ``dim``): the axes move by
  one;
- `reshaped`, `expanded`, `permuted`: the target shape or permutation gains the batch axis;
- `discounted` (``discounted_sum``, a sum over axis 0 weighted by powers of gamma): the weights multiply axis 1;
  `discounted_until` (``discounted_sum_until``): the same, with the episode ends batched alongside;
- `spatially_indexed` (``spatial_index``, ``spatial_scatter``): the key gains a whole slice for the batch axis;
- `indexed` (``scatter``, ``gather_fill``, ``gather``, ``scatter_add``: index and values share every axis but the
  indexed one): operands the same at every point are broadcast along the batch axis, and the indexed axis moves by
  one;
- `VMAP`: no rule of its own; the executor uses the array library's vmap of the op's kernel.

A rule is called as ``rule(attrs, ranks, axes, xp, kernel, kernel_with)``: ``ranks`` are each input's rank at one
point; ``axes`` 0 for inputs batched along axis 0, None for inputs that are the same at every point; ``kernel`` the
op's kernel for one point; ``kernel_with(attrs)`` the kernel with other attributes. It returns the op at every
point in one call, or None where these operands need the array library's vmap instead.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from timerl.ops.registry import OPS, Unsupported

Kernel = Callable[..., Any]
VectorizeRule = Callable[[dict, Sequence[int], Sequence["int | None"], Any, Kernel, Callable[[dict], Kernel]],
                         "Kernel | None"]


def batch_rule(op: str, attrs: dict, ranks: Sequence[int], axes: Sequence[int | None], xp: Any,
               kernel: Kernel, kernel_with: Callable[[dict], Kernel]) -> Kernel | None:
    """The op at every point in one call of a kernel (the op's ``vectorize`` rule), or None where the array
    library's vmap has to do it."""
    rule = OPS[op].vectorize
    if isinstance(rule, Unsupported):
        return None
    return rule(attrs, ranks, axes, xp, kernel, kernel_with)


def VMAP(attrs, ranks, axes, xp, kernel, kernel_with) -> None:
    """No rule of the op's own: the array library's vmap of its kernel."""
    return None


def aligned(attrs, ranks, axes, xp, kernel, kernel_with) -> Kernel:
    return _aligned(kernel, ranks, axes, xp)


def _first_batched_only(rule: VectorizeRule) -> VectorizeRule:
    """``rule`` where the first operand alone is batched; vmap otherwise (the rules move one operand's axes)."""

    def checked(attrs, ranks, axes, xp, kernel, kernel_with):
        if sum(a == 0 for a in axes) != 1 or axes[0] != 0:
            return None
        return rule(attrs, ranks, axes, xp, kernel, kernel_with)

    return functools.wraps(rule)(checked)


@_first_batched_only
def shifted_axes(attrs, ranks, axes, xp, kernel, kernel_with) -> Kernel:
    """The kernel with every axis of ``dims`` moved past the batch axis."""
    return kernel_with({**attrs, "dims": tuple(_shift(d) for d in attrs["dims"])})


@_first_batched_only
def shifted_axis(attrs, ranks, axes, xp, kernel, kernel_with) -> Kernel:
    """The kernel with its ``dim`` moved past the batch axis."""
    return kernel_with({**attrs, "dim": _shift(attrs["dim"])})


@_first_batched_only
def reshaped(attrs, ranks, axes, xp, kernel, kernel_with) -> Kernel:
    return lambda x: xp.reshape(x, (x.shape[0], *attrs["shape"]))


@_first_batched_only
def expanded(attrs, ranks, axes, xp, kernel, kernel_with) -> Kernel:
    aligned_input = _aligned(lambda x: x, ranks, axes, xp, rank=len(attrs["shape"]))
    return lambda x: xp.broadcast_to(aligned_input(x), (x.shape[0], *attrs["shape"]))


@_first_batched_only
def permuted(attrs, ranks, axes, xp, kernel, kernel_with) -> Kernel:
    return kernel_with({**attrs, "perm": (0, *(p + 1 for p in attrs["perm"]))})


@_first_batched_only
def discounted(attrs, ranks, axes, xp, kernel, kernel_with) -> Kernel:
    gamma = attrs["gamma"]

    def every_point(x: Any) -> Any:
        n = x.shape[1]
        weights = xp.pow(xp.full((n,), gamma, dtype=x.dtype), xp.astype(xp.arange(n), x.dtype))
        return xp.sum(xp.reshape(weights, (1, n) + (1,) * (x.ndim - 2)) * x, axis=1)

    return every_point


def discounted_until(attrs, ranks, axes, xp, kernel, kernel_with) -> Kernel | None:
    """``discounted_sum_until`` with the values and the episode ends both batched: the window's axis is 1."""
    if tuple(axes) != (0, 0):
        return None
    gamma = attrs["gamma"]

    def every_point(x: Any, ends: Any) -> Any:
        n = x.shape[1]
        e = xp.astype(ends != 0, x.dtype)
        same_episode = xp.astype((xp.cumulative_sum(e, axis=1) - e) == 0, x.dtype)
        weights = xp.pow(xp.full((n,), gamma, dtype=x.dtype), xp.astype(xp.arange(n), x.dtype))
        return xp.sum(xp.reshape(weights, (1, n) + (1,) * (x.ndim - 2)) * x * same_episode, axis=1)

    return every_point


@_first_batched_only
def spatially_indexed(attrs, ranks, axes, xp, kernel, kernel_with) -> Kernel:
    """``x[key]`` and its scatter: the key gains a whole slice for the batch axis (and the scatter's target
    shape the batch's size)."""
    key = attrs["key"] if isinstance(attrs["key"], tuple) else (attrs["key"],)
    batched = {**attrs, "key": (slice(None), *key)}
    if "shape" not in attrs:
        return kernel_with(batched)
    return lambda x: kernel_with({**batched, "shape": (x.shape[0], *attrs["shape"])})(x)


def indexed(attrs, ranks, axes, xp, kernel, kernel_with) -> Kernel:
    shifted = kernel_with({**attrs, "dim": _shift(attrs["dim"])})

    def every_point(*inputs: Any) -> Any:
        points = next(x.shape[0] for x, axis in zip(inputs, axes) if axis == 0)
        return shifted(*(x if axis == 0 else xp.broadcast_to(x[None], (points, *x.shape))
                         for x, axis in zip(inputs, axes)))

    return every_point


def _shift(axis: int) -> int:
    return axis + 1 if axis >= 0 else axis


def _aligned(kernel: Kernel, ranks: Sequence[int], axes: Sequence[int | None], xp: Any,
             rank: int | None = None) -> Kernel:
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
