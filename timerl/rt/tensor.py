"""`RecurrentTensor`: a view of one output of a PDG node, read through a symbolic index.

A view keeps, for each dimension of its producer's domain, a `Point` or `Range` written in the view's own
dimensions; ``x[t + 1]`` only rewrites that index (no node), so dependence expressions reach the PDG
exactly as the user wrote them. Ranges become leading spatial dimensions, in index order.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from timerl.errors import DomainError, ShapeError, TimeRLError, user_location
from timerl.pdg.graph import IndexItem, Point, Range, TensorType
from timerl.rt.context import Context, NodeDraft
from timerl.rt.symbolic import Expr, Symbol, as_expr, non_affine_part


class RecurrentTensor:
    __slots__ = ("ctx", "node", "output", "index", "domain", "shape", "dtype", "_grad")
    __array_priority__ = 1000  # so `numpy_array * rt` defers to us

    def __init__(self, ctx: Context, node: NodeDraft, output: int, index: tuple[IndexItem, ...]) -> None:
        self.ctx = ctx
        self.node = node
        self.output = output
        self.index = index
        symbols: set[Symbol] = set()
        for item in index:
            symbols |= {s for s in item.symbols() if not s.is_bound}
        self.domain: tuple[Symbol, ...] = ctx.order_dims(symbols)
        produced = node.outputs[output]
        lengths = tuple(_simplify_dim(item.length()) for item in index if isinstance(item, Range))
        self.shape: tuple[int | Expr, ...] = lengths + tuple(produced.shape)
        self.dtype: str = produced.dtype
        self._grad: tuple[int, RecurrentTensor] | None = None  # (number of backward passes, gradient)

    @classmethod
    def of(cls, ctx: Context, node: NodeDraft, output: int = 0) -> RecurrentTensor:
        return cls(ctx, node, output, tuple(Point(d) for d in node.domain))

    # ---- basic properties --------------------------------------------------------------------------------
    @property
    def type(self) -> TensorType:
        return TensorType(self.shape, self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def requires_grad(self) -> bool:
        return self.node.requires_grad

    def is_plain(self) -> bool:
        """True when the view reads its producer at the very point (no shift, range or dropped dim)."""
        return all(isinstance(item, Point) and item.expr.same(d) for item, d in zip(self.index, self.node.domain))

    def __repr__(self) -> str:
        dims = ", ".join(d.name for d in self.domain)
        shape = ", ".join(str(s) for s in self.shape)
        return f"RecurrentTensor(domain=({dims}), shape=({shape}), dtype={self.dtype}, op={self.node.op})"

    def __bool__(self) -> bool:
        raise TimeRLError(f"{user_location()}: a recurrent tensor has no truth value while the program is being "
                          "defined; use trl.where(...) or ctx.when(...)")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d recurrent tensor")
        return int(self.shape[0])

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
        return RecurrentTensor(self.ctx, view.node, view.output, tuple(index))

    def _materialized(self) -> RecurrentTensor:
        from timerl.rt import functional as F

        return F.apply("identity", self)

    def __setitem__(self, key: Any, value: Any) -> None:
        from timerl.rt.placeholder import assign

        assign(self, key, value)

    @property
    def spatial(self) -> _SpatialIndexer:
        """NumPy basic indexing of the spatial shape: ``x.spatial[0, :, None]``."""
        return _SpatialIndexer(self)

    # ---- sinks and gradients -----------------------------------------------------------------------------------
    def sink(self, fn: Callable[[dict, Any], Any]) -> None:
        from timerl.rt import functional as F

        F.sink(self, fn)

    def backward(self) -> None:
        from timerl.rt.autodiff import backward

        backward(self)

    @property
    def grad(self) -> RecurrentTensor | None:
        """The gradient summed over every ``backward()`` so far: a later ``backward()`` gives a fresh one."""
        if not self.node.requires_grad:
            return None
        passes = len(self.ctx.objectives)
        if self._grad is None or self._grad[0] != passes:
            from timerl.rt.autodiff import gradient_of

            self._grad = (passes, gradient_of(self))
        return self._grad[1]


class _SpatialIndexer:
    def __init__(self, tensor: RecurrentTensor) -> None:
        self.tensor = tensor

    def __getitem__(self, key: Any) -> RecurrentTensor:
        from timerl.rt import functional as F

        return F.spatial(self.tensor, key)


def _simplify_dim(dim: Expr) -> int | Expr:
    value = dim.constant_value()
    return dim if value is None else value


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


def install_operators() -> None:
    """Arithmetic, comparisons and methods, all forwarding to `timerl.rt.functional`."""
    from timerl.rt import functional as F

    def binary(name: str, reverse: bool = False) -> Callable:
        if reverse:
            return lambda self, other: F.apply(name, other, self)
        return lambda self, other: F.apply(name, self, other)

    cls = RecurrentTensor
    for dunder, op in [("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "div"), ("pow", "pow")]:
        setattr(cls, f"__{dunder}__", binary(op))
        setattr(cls, f"__r{dunder}__", binary(op, reverse=True))
    for dunder, op in [("lt", "lt"), ("le", "le"), ("gt", "gt"), ("ge", "ge"), ("eq", "eq"), ("ne", "ne")]:
        setattr(cls, f"__{dunder}__", binary(op))
    cls.__hash__ = object.__hash__  # type: ignore[assignment]
    cls.__and__ = binary("logical_and")  # type: ignore[attr-defined]
    cls.__or__ = binary("logical_or")  # type: ignore[attr-defined]
    cls.__invert__ = lambda self: F.apply("logical_not", self)  # type: ignore[attr-defined]
    cls.__neg__ = lambda self: F.apply("neg", self)  # type: ignore[attr-defined]
    cls.__matmul__ = lambda self, other: F.matmul(self, other)  # type: ignore[attr-defined]
    cls.__rmatmul__ = lambda self, other: F.matmul(other, self)  # type: ignore[attr-defined]
    for method in F.METHODS:
        setattr(cls, method, getattr(F, method))


def check_same_context(*tensors: RecurrentTensor) -> Context:
    contexts = {id(t.ctx): t.ctx for t in tensors}
    if len(contexts) > 1:
        raise ShapeError(f"{user_location()}: tensors from different contexts cannot meet")
    return next(iter(contexts.values()))

