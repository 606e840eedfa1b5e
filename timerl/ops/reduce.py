"""Reductions, scans, softmax and the RL discounting ops; ``dims`` are normalized, sorted axis tuples."""

from __future__ import annotations

import functools

from timerl.ops.batching import VMAP, aligned, discounted, discounted_until, shifted_axes, shifted_axis
from timerl.ops.dtypes import Promotion, accumulated, floating
from timerl.ops.registry import (
    CONTRACTION,
    NOT_A_REDUCTION,
    NOT_DIFFERENTIABLE,
    REDUCTION,
    SCAN,
    WINDOW_CARRIED,
    WINDOW_REDUCED,
    RunningSum,
    WindowScan,
    ShapeError,
    broadcast_shapes,
    is_float,
    register,
    same_dim,
    no_window,
    unsupported,
)


def _reduced_shape(inputs, attrs):
    shape, dims, keep = inputs[0].shape, attrs.get("dims"), attrs.get("keepdim", False)
    return [tuple((1 if keep else None) if axis in dims else d for axis, d in enumerate(shape)
                  if keep or axis not in dims)]


def _same(inputs, attrs):
    return [inputs[0].shape]


def _dtype_of_input(inputs, attrs):
    return [inputs[0].dtype]


# the input converted before the kernel: sums of bools and integers accumulate in int64 (as in torch), means,
# softmaxes and discounted sums of them compute in the default float (torch refuses the first two for integers)
ACCUMULATED = Promotion(positions=(0,), compute=accumulated)
FLOATING = Promotion(positions=(0,), compute=floating)


def _accumulated_dtype(inputs, attrs):
    return [accumulated(inputs[0].dtype)]


def _float_dtype(inputs, attrs):
    return [floating(inputs[0].dtype)]


def reduction(name, impl, grad, incrementalize, dtype=_dtype_of_input, window=no_window, **rules):
    """A reduction over the axes ``dims`` (sorted), keeping them as size 1 where ``keepdim``."""
    register(name, REDUCTION, shape=_reduced_shape, dtype=dtype, impl=impl, grad=grad, vectorize=shifted_axes,
             incrementalize=incrementalize, window=window, **rules)


# ---- reductions of windows that share an end or a start, as scans of the run they cover (`WindowScan`) ------


def _zero_row(xp, x):
    return xp.zeros((1, *x.shape[1:]), dtype=x.dtype)


def _suffix_sums(xp, x, attrs):
    """Row k: x[k] + ... + x[M - 1]; row M: 0."""
    flipped = xp.flip(x, axis=0)
    return xp.concat([xp.flip(xp.cumulative_sum(flipped, axis=0), axis=0), _zero_row(xp, x)], axis=0)


def _prefix_sums(xp, x, attrs):
    """Row k: x[0] + ... + x[k - 1]; row 0: 0."""
    return xp.concat([_zero_row(xp, x), xp.cumulative_sum(x, axis=0)], axis=0)


def _discounted_suffix_sums(xp, x, attrs):
    """Row k: sum over j >= k of gamma**(j - k) * x[j]; row M: 0. The reverse recurrence g[k] = x[k] +
    gamma * g[k + 1] by doubling: after the round of span s, row k holds the sum over its next 2 * s positions;
    log2(M) rounds of whole-array operations (no loop over positions, the same code on every backend)."""
    gamma = attrs["gamma"]
    total = xp.concat([x, _zero_row(xp, x)], axis=0)
    rows, span, weight = total.shape[0], 1, gamma
    while span < rows:
        shifted = xp.concat([total[span:], xp.zeros((span, *x.shape[1:]), dtype=x.dtype)], axis=0)
        total = total + weight * shifted
        span, weight = 2 * span, weight * weight
    return total


_PREFIX_DISCOUNT = unsupported("a window's discounted sum weighs each position by its distance from the window's "
                               "start: windows sharing their start but not their end have no common scan")
_SUM_OVER_THE_WINDOW = WindowScan(_suffix_sums, _prefix_sums,
                                  applies=lambda a: tuple(a["dims"] or ()) == (0,) and not a["keepdim"])


def _over_the_range(attrs, dtype) -> bool:
    """A float sum over axis 0 alone, the range a read ``x[0:T]`` adds in front."""
    return tuple(attrs.get("dims", ())) == (0,) and not attrs.get("keepdim", False) and is_float(dtype)


_NO_RUNNING_FORM = "no running form written yet (a running {} along the range would do)"


def _kept(F, grad, attrs):
    """Reinsert reduced axes of size 1 so the gradient broadcasts against the input."""
    if attrs.get("keepdim", False):
        return grad
    for axis in attrs["dims"]:
        grad = F.unsqueeze(grad, axis)
    return grad


def _sum_grad(F, ins, outs, g, a):
    return [F.expand(_kept(F, g[0], a), ins[0].shape)]


def _mean_grad(F, ins, outs, g, a):
    count = 1
    for axis in a["dims"]:
        count = count * ins[0].shape[axis]
    if not isinstance(count, int):  # a window of dynamic length: count its elements when it is read
        one = F.constant(g[0].ctx, 1, g[0].dtype, domain=g[0].domain)
        ones = F.expand(one, tuple(ins[0].shape[axis] for axis in a["dims"]))
        return [F.expand(_kept(F, g[0], a), ins[0].shape) / F.sum(ones)]
    return [F.expand(_kept(F, g[0], a), ins[0].shape) / F.astype(F.scalar(count), g[0].dtype)]


def _extreme_grad(F, ins, outs, g, a):
    hit = F.astype(ins[0] == _kept(F, outs[0], a), g[0].dtype)
    share = hit / F.sum(hit, dim=a["dims"], keepdim=True)
    return [share * _kept(F, g[0], a)]


def _floating(xp, x):
    """torch refuses the mean of integers; every backend averages them as float32."""
    return x if xp.isdtype(x.dtype, "real floating") else xp.astype(x, xp.float32)


# fmt: off
reduction("sum", lambda xp, x, dims, keepdim: xp.sum(x, axis=dims, keepdims=keepdim), _sum_grad,
          RunningSum(_over_the_range), dtype=_accumulated_dtype, promotion=ACCUMULATED,
          window=lambda a: WINDOW_REDUCED if tuple(a["dims"] or ()) == (0,) and not a["keepdim"] else None,
          window_scan=_SUM_OVER_THE_WINDOW)
reduction("mean", lambda xp, x, dims, keepdim: xp.mean(_floating(xp, x), axis=dims, keepdims=keepdim), _mean_grad,
          unsupported(_NO_RUNNING_FORM.format("sum divided by the count")), dtype=_float_dtype,
          promotion=FLOATING)
reduction("max", lambda xp, x, dims, keepdim: xp.max(x, axis=dims, keepdims=keepdim), _extreme_grad,
          unsupported(_NO_RUNNING_FORM.format("maximum")))
reduction("min", lambda xp, x, dims, keepdim: xp.min(x, axis=dims, keepdims=keepdim), _extreme_grad,
          unsupported(_NO_RUNNING_FORM.format("minimum")))
reduction("argmax", lambda xp, x, dims, keepdim: xp.argmax(x, axis=dims[0], keepdims=keepdim),
          NOT_DIFFERENTIABLE, unsupported(_NO_RUNNING_FORM.format("maximum with its position")),
          dtype=lambda ins, a: ["int64"])
# fmt: on


def _cumsum(xp, x, dim):
    return xp.cumulative_sum(x, axis=dim)


def _flip(F, x, dim):
    return F.flip(x, dim)


register("cumsum", SCAN, vectorize=shifted_axis, incrementalize=NOT_A_REDUCTION,
         window=lambda a: WINDOW_CARRIED if a["dim"] == 0 else None,
         window_scan=unsupported("a running sum along a window restarts at the window's start: a position has a "
                                 "different value in each window holding it, so windows are padded"),
         shape=_same, dtype=_accumulated_dtype, impl=_cumsum, promotion=ACCUMULATED,
         grad=lambda F, ins, outs, g, a: [_flip(F, F.cumsum(_flip(F, g[0], a["dim"]), a["dim"]), a["dim"])])


def _softmax(xp, x, dim):
    shifted = x - xp.max(x, axis=dim, keepdims=True)
    e = xp.exp(shifted)
    return e / xp.sum(e, axis=dim, keepdims=True)


def _log_softmax(xp, x, dim):
    shifted = x - xp.max(x, axis=dim, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=dim, keepdims=True))


def _torch_kernel(name):
    """torch's own kernel of an op along ``dim``: one call where the array-API lowering takes several."""
    return lambda torch, dim: functools.partial(getattr(torch, name), dim=dim)


register("softmax", SCAN, vectorize=shifted_axis, incrementalize=NOT_A_REDUCTION,
         lowering={"torch": _torch_kernel("softmax")}, shape=_same, dtype=_float_dtype, impl=_softmax,
         promotion=FLOATING,
         grad=lambda F, ins, outs, g, a: [outs[0] * (g[0] - F.sum(g[0] * outs[0], dim=a["dim"], keepdim=True))])
register("log_softmax", SCAN, vectorize=shifted_axis, incrementalize=NOT_A_REDUCTION,
         lowering={"torch": _torch_kernel("log_softmax")}, shape=_same, dtype=_float_dtype, impl=_log_softmax,
         promotion=FLOATING,
         grad=lambda F, ins, outs, g, a: [g[0] - F.exp(outs[0]) * F.sum(g[0], dim=a["dim"], keepdim=True)])


def _powers(xp, n, gamma, like):
    exponents = xp.astype(xp.arange(n), like.dtype)
    return xp.pow(xp.full((n,), gamma, dtype=like.dtype), exponents)


def _discount_matrix(xp, n, gamma, like, reverse):
    """M[k, j] = gamma**(j-k) for j >= k (reverse: returns looking forward), else 0."""
    index = xp.arange(n)
    gap = index[None, :] - index[:, None] if reverse else index[:, None] - index[None, :]
    weights = xp.pow(xp.full((n, n), gamma, dtype=like.dtype), xp.astype(xp.abs(gap), like.dtype))
    return xp.where(gap >= 0, weights, xp.zeros_like(weights))


def _discounted_sum(xp, x, gamma):
    n = x.shape[0]
    weights = _powers(xp, n, gamma, x)
    return xp.tensordot(weights, x, axes=1)


def _discounted_cum_sum(xp, x, gamma, reverse):
    n = x.shape[0]
    flat = xp.reshape(x, (n, -1))
    return xp.reshape(_discount_matrix(xp, n, gamma, x, reverse) @ flat, x.shape)


def _discounted_spread(xp, g, like, gamma):
    n = like.shape[0]
    weights = _powers(xp, n, gamma, g)
    return xp.reshape(weights, (n,) + (1,) * (like.ndim - 1)) * g[None, ...]


register("discounted_sum", REDUCTION, vectorize=discounted, window=lambda a: WINDOW_REDUCED,
         window_scan=WindowScan(_discounted_suffix_sums, _PREFIX_DISCOUNT),
         incrementalize=unsupported(
             "no running form written yet (r[t:T].discounted_sum as the backward recurrence g[t] = r[t] + "
             "gamma * g[t + 1], paper §5.3)"),
         shape=lambda ins, a: [ins[0].shape[1:]], dtype=_float_dtype, promotion=FLOATING,
         impl=_discounted_sum,
         grad=lambda F, ins, outs, g, a: [F.apply("discounted_spread", g[0], ins[0], gamma=a["gamma"])])
# ---- discounted sums up to the first episode end: ``x.discounted_sum(gamma, until=ends)`` --------------------


def _same_episode(xp, ends, like):
    """1 at positions k with no end strictly before k (the window's first episode, its end included), else 0."""
    e = xp.astype(ends != 0, like.dtype)
    return xp.astype((xp.cumulative_sum(e, axis=0) - e) == 0, like.dtype)


def _discounted_sum_until(xp, x, ends, gamma):
    """``sum_k gamma**k x[k]`` over axis 0, up to and including the first k where ``ends[k]`` holds."""
    return _discounted_sum(xp, x * _same_episode(xp, ends, x), gamma)


def _discounted_until_suffix_sums(xp, x, ends, attrs):
    """Row k: the discounted sum from position k of the run up to its first end; row M: 0. The reverse
    recurrence g[k] = x[k] + a[k] * g[k + 1], a[k] = gamma * (1 - ends[k]), by doubling on pairs: after the
    round of span s, g[k] = total[k] + factor[k] * g[k + s]; log2(M) rounds of whole-array operations."""
    gamma = attrs["gamma"]
    zero = _zero_row(xp, x)
    total = xp.concat([x, zero], axis=0)
    factor = xp.concat([gamma * (1 - xp.astype(ends != 0, x.dtype)) * xp.ones_like(x), zero], axis=0)
    rows, span = total.shape[0], 1
    while span < rows:
        pad = xp.zeros((span, *x.shape[1:]), dtype=x.dtype)
        total = total + factor * xp.concat([total[span:], pad], axis=0)
        factor = factor * xp.concat([factor[span:], pad], axis=0)
        span = 2 * span
    return total


def _until_grad(F, ins, outs, g, a):
    """Linear in x: the output's gradient spread with the discount's powers, zero after the first end."""
    x, ends = ins
    e = F.astype(F.astype(ends, "bool"), x.dtype)
    same_episode = F.astype((F.cumsum(e, 0) - e) == 0, x.dtype)
    return [F.apply("discounted_spread", g[0], x, gamma=a["gamma"]) * same_episode, None]


register("discounted_sum_until", REDUCTION, vectorize=discounted_until, window=lambda a: WINDOW_REDUCED,
         window_scan=WindowScan(_discounted_until_suffix_sums, _PREFIX_DISCOUNT),
         incrementalize=unsupported(
             "no running form written yet (the backward recurrence g[t] = x[t] + gamma * (1 - ends[t]) * g[t + 1])"),
         shape=lambda ins, a: [ins[0].shape[1:]], dtype=_float_dtype, promotion=FLOATING,
         impl=_discounted_sum_until, grad=_until_grad)


register("discounted_spread", SCAN, vectorize=VMAP, incrementalize=NOT_A_REDUCTION,
         shape=lambda ins, a: [ins[1].shape], dtype=_float_dtype,
         impl=_discounted_spread,
         grad=lambda F, ins, outs, g, a: [F.apply("discounted_sum", g[0], gamma=a["gamma"]), None])
register("discounted_cum_sum", SCAN, vectorize=VMAP, incrementalize=NOT_A_REDUCTION,
         shape=_same, dtype=_float_dtype, impl=_discounted_cum_sum, promotion=FLOATING,
         grad=lambda F, ins, outs, g, a: [F.apply("discounted_cum_sum", g[0], gamma=a["gamma"],
                                                  reverse=not a["reverse"])])


def _matmul_shape(inputs, attrs):
    a, b = inputs[0].shape, inputs[1].shape
    if len(a) < 2 or len(b) < 2:
        raise ShapeError("matmul primitive takes operands with at least 2 dimensions")
    if not same_dim(a[-1], b[-2]):
        if isinstance(a[-1], int) and isinstance(b[-2], int):
            raise ShapeError(f"matmul of shapes {tuple(a)} and {tuple(b)}: inner sizes {a[-1]} and {b[-2]} differ")
    batch = broadcast_shapes(a[:-2], b[:-2])
    return [batch + (a[-2], b[-1])]


def _matmul_grad(F, ins, outs, g, a):
    left, right = ins
    grad_left = F.sum_to(F.matmul(g[0], F.transpose(right, -1, -2)), left.shape)
    grad_right = F.sum_to(F.matmul(F.transpose(left, -1, -2), g[0]), right.shape)
    return [grad_left, grad_right]


_OPERANDS = Promotion()


def _matmul_dtype(inputs, attrs):
    dtype = _OPERANDS.dtype(inputs, attrs)
    if dtype == "bool":  # torch has no bool kernel for it
        raise ShapeError("matmul of bool tensors: convert them first, e.g. .astype('int64')")
    return [dtype]


register("matmul", CONTRACTION, vectorize=aligned, incrementalize=NOT_A_REDUCTION,
         shape=_matmul_shape, dtype=_matmul_dtype, promotion=_OPERANDS,
         impl=lambda xp, x, y: xp.matmul(x, y), grad=_matmul_grad)
