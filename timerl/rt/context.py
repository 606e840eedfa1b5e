"""The context: symbolic dimensions, the program being recorded, `when` blocks, and `compile`."""

from __future__ import annotations

import contextlib
import keyword
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from timerl.compile import compile_program
from timerl.errors import ArgumentError, DomainError, TimeRLError, user_location
from timerl.ops.registry import OPS, SINK, Category
from timerl.pdg.graph import Attrs, Edge, Graph, IndexItem, Node, Point, TensorType
from timerl.symbolic import TRUE, And, Cond, Expr, Symbol, as_cond, conjunction, non_affine_in, position
from timerl.rt.view import TensorView

_ACTIVE: list[Context] = []


@dataclass
class NodeDraft:
    """A node while the program is being recorded: merges gain branches after creation."""

    id: int
    op: str
    attrs: Attrs
    domain: tuple[Symbol, ...]
    condition: Cond
    inputs: list[Edge]
    outputs: tuple[TensorType, ...]
    location: str
    requires_grad: bool = False
    name: str = ""
    gradient_of: int | None = None  # set on nodes created by backward(): the forward node they serve
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def category(self) -> Category:
        return OPS[self.op].category

    def freeze(self) -> Node:
        return Node(self.id, self.op, self.attrs, self.domain, self.condition, tuple(self.inputs), self.outputs,
                    self.location, self.name)


# Words of isl's set syntax: a dimension (a variable of the sets the scheduler builds) cannot be named one.
ISL_WORDS = frozenset({"exists", "and", "or", "not", "implies", "mod", "min", "max", "floor", "ceil", "floord",
                       "ceild", "true", "false", "infty", "infinity", "Infinity", "NaN", "rat"})


def _check_dimension_name(name: str) -> None:
    """A dimension's name is a variable in generated Python and in isl's sets: an ASCII identifier that is not
    a Python keyword or a word of isl's syntax."""
    if not name.isidentifier() or not name.isascii():
        raise TimeRLError(f"{user_location()}: dimension name {name!r} is not an ASCII Python identifier")
    if keyword.iskeyword(name) or name in ISL_WORDS:
        kind = "a Python keyword" if keyword.iskeyword(name) else "a word of isl's set syntax"
        raise TimeRLError(f"{user_location()}: dimension name {name!r} is {kind}; choose another name (reserved: "
                          f"Python's keywords and {', '.join(sorted(ISL_WORDS))})")


class Context:
    """A program being recorded: its dimensions, outermost first, each with an upper bound symbol, and its nodes.
    Users create `timerl.rt.tensor.Context`, whose tensors have operators (``tensor_class``)."""

    tensor_class: type[TensorView] = TensorView

    def __init__(self, dims: str | Sequence[str]) -> None:
        if not isinstance(dims, (str, list, tuple)) or not all(isinstance(n, str) for n in dims):
            raise ArgumentError(f"{user_location()}: dims must be a string of names such as 'i t', got {dims!r}")
        names = dims.split() if isinstance(dims, str) else list(dims)
        if not names and dims:
            raise TimeRLError(f"{user_location()}: Context(dims=...) takes space-separated dimension names, e.g. 'i t'")
        for name in names:
            _check_dimension_name(name)
        if len(set(names)) != len(names):
            raise TimeRLError(f"{user_location()}: dimension names repeat: {names}")
        self.dims: tuple[Symbol, ...] = tuple(Symbol(n) for n in names)
        bound_names = _bound_names(names)
        self.bounds: tuple[Symbol, ...] = tuple(Symbol(n, is_bound=True) for n in bound_names)
        self._dim_ids = frozenset(id(d) for d in self.dims)
        self.nodes: list[NodeDraft] = []
        self.conversions = 0  # dtype conversions `timerl.rt.apply` inserted for promotion (see `draw_stream`)
        self._when: list[Cond] = []
        self.objectives: list[Any] = []

    # ---- recording ------------------------------------------------------------------------------------
    def __enter__(self) -> Context:
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _ACTIVE.remove(self)

    def when(self, cond: Cond | bool) -> contextlib.AbstractContextManager[None]:
        """Everything created inside runs only at the points where ``cond`` holds."""
        cond = as_cond(cond)  # checked here, so an error names the user's line
        foreign = cond.symbols() - set(self.dims) - set(self.bounds)
        if foreign:
            raise DomainError(f"{user_location()}: the condition {cond} mentions "
                              f"{', '.join(sorted(s.name for s in foreign))} of another context")
        product = non_affine_in(cond)
        if product is not None:
            raise DomainError(f"{user_location()}: the condition {cond} multiplies symbols ({product}); conditions "
                              "must be affine for the polyhedral scheduler: sums, constant multiples, `//` and `%` "
                              "by constants, trl.min and trl.max")
        return self._when_block(cond)

    @contextlib.contextmanager
    def _when_block(self, cond: Cond) -> Iterator[None]:
        self._when.append(cond)
        try:
            yield
        finally:
            self._when.pop()

    @contextlib.contextmanager
    def outside_when(self) -> Iterator[None]:
        """Records as if no `when` block were open (a library building state that must exist everywhere,
        such as an optimizer's moments under a gated ``step()``)."""
        saved, self._when = self._when, []
        try:
            yield
        finally:
            self._when = saved

    def current_condition(self) -> Cond:
        return conjunction(TRUE, *self._when)

    def add_node(self, op: str, attrs: Attrs, domain: tuple[Symbol, ...], inputs: list[Edge],
                 outputs: tuple[TensorType, ...], location: str, condition: Cond | None = None) -> NodeDraft:
        if condition is None:
            condition = self.current_condition()
            if OPS[op].category is not SINK:
                # a node that does not vary over a dim a `when` mentions (a scalar operand, a per-iteration
                # tensor inside a per-step block) runs wherever some point of that dim may need it
                condition = conjunction(TRUE, *(c for c in conjuncts(condition)
                                                if {s for s in c.symbols() if not s.is_bound} <= set(domain)))
        self.check_domain(domain, location)  # a backstop: the user-facing entry points checked already
        stray = {s for s in condition.symbols() if not s.is_bound} - set(domain)
        if stray:
            names = ", ".join(sorted(s.name for s in stray))
            raise DomainError(f"{location}: a `when` condition mentions {names}, which this tensor's domain "
                              f"({', '.join(d.name for d in domain)}) does not have")
        node = NodeDraft(len(self.nodes), op, attrs, domain, condition, inputs, outputs, location)
        self.nodes.append(node)
        return node

    def draw_stream(self) -> int:
        """The random stream of a draw made now: its position among the nodes the program wrote, not counting
        the conversions promotion inserted, so that how operands are converted never changes what is drawn."""
        return len(self.nodes) - self.conversions

    def check_domain(self, domain: Any, location: str) -> tuple[Symbol, ...]:
        """A user's ``domain=``: dimensions of this context, each once, returned in the context's order."""
        if isinstance(domain, (str, Expr)) or not isinstance(domain, (tuple, list)):
            example = f"({self.dims[-1].name},)" if self.dims else "()"
            raise DomainError(f"{location}: domain= takes a tuple of this context's dimensions, e.g. "
                              f"domain={example}; got {domain!r}")
        ours = self._dim_ids
        for entry in domain:
            if isinstance(entry, Symbol) and id(entry) in ours:
                continue
            if isinstance(entry, Symbol) and entry.is_bound:
                why = f"{entry} is a bound (0 <= dim < bound), not a dimension"
            elif isinstance(entry, Symbol):
                why = f"{entry} is a dimension of another context"
            elif isinstance(entry, Expr):
                why = f"{entry} is an expression; a domain lists dimensions themselves"
            else:
                why = f"{entry!r} is not a dimension (use the symbols of ctx.dims, not their names)"
            raise DomainError(f"{location}: domain={tuple(domain)!r}: {why}; this context's dimensions are "
                              f"({', '.join(d.name for d in self.dims)})")
        if len({id(d) for d in domain}) != len(domain):
            raise DomainError(f"{location}: domain={tuple(domain)!r} repeats a dimension")
        return self.order_dims(set(domain))

    def order_dims(self, dims: set[Symbol] | frozenset[Symbol]) -> tuple[Symbol, ...]:
        return tuple(d for d in self.dims if d in dims)

    def bound_of(self, dim: Symbol) -> Symbol:
        return self.bounds[position(dim, self.dims)]

    def view(self, node: NodeDraft, output: int = 0, index: tuple[IndexItem, ...] | None = None) -> TensorView:
        """A tensor of this program reading ``output`` of ``node`` through ``index`` (default: at its own point)."""
        if index is None:
            index = tuple(Point(d) for d in node.domain)
        return self.tensor_class(self, node, output, index)

    def graph(self) -> Graph:
        return Graph(self.dims, self.bounds, tuple(n.freeze() for n in self.nodes))

    # ---- compiling ------------------------------------------------------------------------------------
    def compile(self, bounds: dict | None = None, backend: str = "torch", **options: Any):
        return compile_program(self, bounds or {}, backend, **options)


def _bound_names(names: Sequence[str]) -> list[str]:
    """Each dimension's bound is its name upper-cased (``t``: ``T``), or the name with ``_bound`` appended where that
    is taken (``T``: ``T_bound``, and ``t`` beside a dimension ``T``: ``t_bound``): no two symbols of a context share a name,
    which the schedule and the generated code identify them by."""
    taken, bounds = set(names), []
    for name in names:
        bound = name.upper() if name.upper() not in taken else name + "_bound"
        while bound in taken:
            bound += "_"
        taken.add(bound)
        bounds.append(bound)
    return bounds


def current_context() -> Context:
    if not _ACTIVE:
        raise TimeRLError(f"{user_location()}: no active timerl context: create tensors inside `with ctx:`")
    return _ACTIVE[-1]


def conjuncts(cond: Cond) -> tuple[Cond, ...]:
    return cond.parts if isinstance(cond, And) else (cond,)
