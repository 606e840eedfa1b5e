"""`RecurrentTensor`: the tensors users hold, views of PDG nodes (`timerl.rt.view`) with operators and methods.

Arithmetic and comparisons build ops through `timerl.rt.functional`, so ``x + 1``, ``x.sum()`` and ``F.sum(x)``
are the same; ``x[t + 1]`` indexes the domain (no op), ``x.spatial[...]`` the shape; ``o[t + 1] = rhs`` assigns
a placeholder (`timerl.rt.placeholder`); ``y.backward()`` and ``w.grad`` are symbolic backpropagation
(`timerl.rt.autodiff`). `Context` is the user's ``trl.Context``: the tensors of its programs are
`RecurrentTensor`s.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from timerl.errors import DomainError, ShapeError, user_location
from timerl.pdg.graph import IndexItem, Point, Range
from timerl.rt import context
from timerl.rt import functional as F
from timerl.rt.autodiff import backward, gradient_of
from timerl.rt.placeholder import assign
from timerl.symbolic import Expr, Symbol, as_expr, non_affine_part
from timerl.rt.view import TensorView


def _binary(name: str, reverse: bool = False) -> Callable:
    if reverse:
        return lambda self, other: F.apply(name, other, self)
    return lambda self, other: F.apply(name, self, other)


def _logical(name: str, symbol: str) -> Callable:
    """``&`` and ``|`` are logical: on bool operands only (PyTorch's are bitwise on integers, which would give
    other values: ``2 | True`` is 3 there; a logical or gives True)."""

    def apply(self, other):
        _check_bool(self, symbol)
        _check_bool(other, symbol)
        return F.apply(name, self, other)

    return apply


def _check_bool(value: Any, symbol: str) -> None:
    if isinstance(value, TensorView):
        dtype = value.dtype
    else:
        dtype = None if isinstance(value, bool) else np.asarray(value).dtype
    if dtype is not None and str(dtype) != "bool":
        raise ShapeError(f"{user_location()}: '{symbol}' is a logical operator here and takes bool tensors, got "
                         f"{dtype} (compare first, e.g. x != 0, or use an arithmetic op for bits)")


class RecurrentTensor(TensorView):
    __slots__ = ()

    # ---- arithmetic, comparisons and methods: ops built by `timerl.rt.functional` ----------------------------
    __add__, __radd__ = _binary("add"), _binary("add", reverse=True)
    __sub__, __rsub__ = _binary("sub"), _binary("sub", reverse=True)
    __mul__, __rmul__ = _binary("mul"), _binary("mul", reverse=True)
    __truediv__, __rtruediv__ = _binary("div"), _binary("div", reverse=True)
    __pow__, __rpow__ = _binary("pow"), _binary("pow", reverse=True)
    __mod__, __rmod__ = _binary("remainder"), _binary("remainder", reverse=True)
    __floordiv__, __rfloordiv__ = _binary("floor_divide"), _binary("floor_divide", reverse=True)
    __lt__, __le__, __gt__, __ge__ = _binary("lt"), _binary("le"), _binary("gt"), _binary("ge")
    __eq__, __ne__ = _binary("eq"), _binary("ne")  # type: ignore[assignment]
    __hash__ = object.__hash__  # ``==`` builds an op, so hashing stays by identity
    __and__, __or__ = _logical("logical_and", "&"), _logical("logical_or", "|")
    __rand__, __ror__ = _logical("logical_and", "&"), _logical("logical_or", "|")

    def __invert__(self) -> RecurrentTensor:
        _check_bool(self, "~")
        return F.apply("logical_not", self)

    def __neg__(self) -> RecurrentTensor:
        return F.apply("neg", self)

    def __abs__(self) -> RecurrentTensor:
        return F.apply("abs", self)

    def __matmul__(self, other: Any) -> RecurrentTensor:
        return F.matmul(self, other)

    def __rmatmul__(self, other: Any) -> RecurrentTensor:
        return F.matmul(other, self)

    sum = F.sum
    mean = F.mean
    max = F.max
    min = F.min
    argmax = F.argmax
    cumsum = F.cumsum
    softmax = F.softmax
    log_softmax = F.log_softmax
    discounted_sum = F.discounted_sum
    discounted_cum_sum = F.discounted_cum_sum
    reshape = F.reshape
    permute = F.permute
    transpose = F.transpose
    unsqueeze = F.unsqueeze
    squeeze = F.squeeze
    expand = F.expand
    flip = F.flip
    gather = F.gather
    index_select = F.index_select
    one_hot = F.one_hot
    clip = F.clip
    clamp = F.clamp
    detach = F.detach
    astype = F.astype
    exp = F.exp
    log = F.log
    sqrt = F.sqrt
    abs = F.abs
    tanh = F.tanh
    sigmoid = F.sigmoid
    relu = F.relu
    sign = F.sign
    sum_to = F.sum_to

    # ---- indexing the domain -------------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> RecurrentTensor:
        items = _domain_items(self, key)
        view = self if self.is_plain() or not any(isinstance(i, Range) for i in items) else self._materialized()
        mapping: dict[Symbol, Expr] = {}
        ranged: dict[Symbol, Range] = {}
        for dim, item in zip(view.domain, items):
            if isinstance(item, Point):
                mapping[dim] = item.expr
            else:
                ranged[dim] = item
        index: list[IndexItem] = []
        for item in view.index:
            if isinstance(item, Point) and len(item.expr.symbols() & set(ranged)) == 1:
                dim = next(iter(item.expr.symbols() & set(ranged)))
                offset = item.expr - dim
                if dim in offset.symbols():
                    raise DomainError(f"{user_location()}: a range can only replace a dimension read as "
                                      f"'dim + constant', not {item.expr}")
                r = ranged[dim]
                index.append(Range(r.start + offset, r.stop + offset))
            elif ranged and item.symbols() & set(ranged):
                raise DomainError(f"{user_location()}: cannot index a range read with another range")
            else:
                index.append(item.substitute(mapping))
        return self.ctx.view(view.node, view.output, tuple(index))

    def _materialized(self) -> RecurrentTensor:
        return F.apply("identity", self)

    def __setitem__(self, key: Any, value: Any) -> None:
        assign(self, key, value)

    @property
    def spatial(self) -> _SpatialIndexer:
        """NumPy basic indexing of the spatial shape: ``x.spatial[0, :, None]``."""
        return _SpatialIndexer(self)

    # ---- sinks and gradients -----------------------------------------------------------------------------------
    def sink(self, fn: Callable[[dict, Any], Any], native: bool = False) -> None:
        """``fn(point, value)`` at every point of the domain; ``value`` is a NumPy array (a host copy or a
        read-only view), or with ``native=True`` the backend's own array (a torch tensor, a jax array)."""
        F.sink(self, fn, native)

    def backward(self) -> None:
        backward(self)

    @property
    def grad(self) -> RecurrentTensor | None:
        """The gradient summed over every ``backward()`` so far: a later ``backward()`` gives a fresh one."""
        if not self.node.requires_grad:
            return None
        passes = len(self.ctx.objectives)
        if self._grad is None or self._grad[0] != passes:
            self._grad = (passes, gradient_of(self))
        return self._grad[1]



class _SpatialIndexer:
    def __init__(self, tensor: RecurrentTensor) -> None:
        self.tensor = tensor

    def __getitem__(self, key: Any) -> RecurrentTensor:
        return F.spatial(self.tensor, key)


def _domain_items(tensor: RecurrentTensor, key: Any) -> list[IndexItem]:
    keys = key if isinstance(key, tuple) else (key,)
    if len(keys) > len(tensor.domain):
        raise DomainError(f"{user_location()}: {len(keys)} indices for a tensor whose domain has "
                          f"{len(tensor.domain)} dimensions ({', '.join(d.name for d in tensor.domain)})")
    items: list[IndexItem] = []
    for dim, item in zip(tensor.domain, keys):
        if isinstance(item, slice):
            if item.step is not None and not (isinstance(item.step, (int, np.integer)) and item.step == 1):
                raise DomainError(f"{user_location()}: domain slices take no step, got {item.step}")
            start = as_expr(0 if item.start is None else item.start)
            stop = as_expr(tensor.ctx.bound_of(dim) if item.stop is None else item.stop)
            items.append(Range(start, stop))
        elif isinstance(item, (int, np.integer, Expr)) and not isinstance(item, bool):
            items.append(Point(as_expr(item)))
        else:
            raise DomainError(f"{user_location()}: a domain index is an integer expression or a slice, got "
                              f"{item!r}; index the spatial shape with x.spatial[...]")
    for dim in tensor.domain[len(keys):]:
        items.append(Point(dim))
    for item in items:
        unknown = item.symbols() - set(tensor.ctx.dims) - set(tensor.ctx.bounds)
        if unknown:
            raise DomainError(f"{user_location()}: index uses symbols {sorted(s.name for s in unknown)} that "
                              "belong to another context")
    for item in items:
        for expr in (item.expr,) if isinstance(item, Point) else (item.start, item.stop):
            _check_affine(expr, "index")
    return items


def _check_affine(expr: Expr, what: str) -> None:
    product = non_affine_part(expr)
    if product is not None:
        raise DomainError(f"{user_location()}: the {what} {expr} multiplies symbols ({product}); indices and "
                          "conditions must be affine for the polyhedral scheduler: sums, constant multiples, "
                          "`//` and `%` by constants, trl.min and trl.max (e.g. t + 1, 2*t, t // 2)")


class Context(context.Context):
    """``trl.Context(dims="b i t")``: dimensions outermost first, each with an upper bound symbol; the tensors
    of its program are `RecurrentTensor`s."""

    tensor_class = RecurrentTensor
