"""`TensorView`: a view of one output of a PDG node, read through a symbolic index, without operators.

A view keeps, for each dimension of its producer's domain, a `Point` or `Range` written in the view's own
dimensions; ``x[t + 1]`` only rewrites that index (no node), so dependence expressions reach the PDG
exactly as the user wrote them. Ranges become leading spatial dimensions, in index order.

The language's functions (`timerl.rt.apply`, `timerl.rt.functional`, `timerl.rt.autodiff`,
`timerl.rt.placeholder`) build and read views; the tensors users hold are `timerl.rt.tensor.RecurrentTensor`s,
views with operators and methods, which the program's context creates (``ctx.view``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from timerl.errors import ShapeError, TimeRLError, user_location
from timerl.pdg.graph import IndexItem, Point, Range, TensorType
from timerl.symbolic import Expr, Symbol

if TYPE_CHECKING:  # the context creates views; a view only reads its attributes
    from timerl.rt.context import Context, NodeDraft


class TensorView:
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
        self._grad: tuple[int, TensorView] | None = None  # (number of backward passes, gradient)

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


def _simplify_dim(dim: Expr) -> int | Expr:
    value = dim.constant_value()
    return dim if value is None else value


def check_same_context(*tensors: TensorView) -> Context:
    contexts = {id(t.ctx): t.ctx for t in tensors}
    if len(contexts) > 1:
        raise ShapeError(f"{user_location()}: tensors from different contexts cannot meet")
    return next(iter(contexts.values()))
