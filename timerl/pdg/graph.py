"""The polyhedral dependence graph (paper §5.1): frozen nodes tagged with domains, edges with dependences.

An edge says: the consumer, at point ``p`` of its domain, reads output ``output`` of ``producer`` at the
points ``index(p)`` (one `Point` or `Range` per producer dimension), when ``condition(p)`` holds. Merge
nodes (piecewise definitions) pick the one input edge whose condition holds. An edge ``masked_by`` op
``m`` reads zeros wherever ``m`` cannot be evaluated; symbolic backpropagation uses it to sum gradient
contributions over inverted dependences without reading outside the forward program.

A node's *definition domain* is the box ``0 <= d < D`` of its dimensions intersected with its
``condition`` (from ``ctx.when``) and, for merges, with the union of its branches' conditions.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterator, Mapping, Sequence, Union

from timerl.ops.categories import MERGE, Category
from timerl.ops.registry import OPS
from timerl.ops.types import Attrs, Dim, TensorType  # noqa: F401  (the types nodes carry)
from timerl.symbolic import TRUE, Cond, Expr, IntLike, Symbol, conjunction, disjunction, position, same_all


@dataclass(frozen=True)
class Point:
    """Read one point of a producer dimension."""

    expr: Expr

    def substitute(self, mapping: Mapping[Symbol, IntLike]) -> Point:
        return Point(self.expr.substitute(mapping))

    def symbols(self) -> frozenset[Symbol]:
        return self.expr.symbols()

    def __str__(self) -> str:
        return str(self.expr)


@dataclass(frozen=True)
class Range:
    """Read ``start, start + step, ...`` below ``stop``; becomes a leading spatial dimension of the read."""

    start: Expr
    stop: Expr
    step: int = 1

    def substitute(self, mapping: Mapping[Symbol, IntLike]) -> Range:
        return Range(self.start.substitute(mapping), self.stop.substitute(mapping), self.step)

    def symbols(self) -> frozenset[Symbol]:
        return self.start.symbols() | self.stop.symbols()

    def length(self) -> Expr:
        if self.step == 1:
            return self.stop - self.start
        return (self.stop - self.start + (self.step - 1)) // self.step

    def __str__(self) -> str:
        step = f":{self.step}" if self.step != 1 else ""
        return f"{self.start}:{self.stop}{step}"


IndexItem = Union[Point, Range]


@dataclass(frozen=True)
class Edge:
    producer: int
    output: int
    index: tuple[IndexItem, ...]
    condition: Cond = TRUE
    masked_by: int | None = None

    def ranges(self) -> tuple[Range, ...]:
        return tuple(item for item in self.index if isinstance(item, Range))

    def describe(self, graph: Graph) -> str:
        producer = graph.nodes[self.producer]
        text = f"%{self.producer}[{', '.join(str(i) for i in self.index)}]"
        if self.condition is not TRUE:
            text += f" if {self.condition}"
        return text if producer.domain or self.index else f"%{self.producer}"


@dataclass(frozen=True)
class Node:
    id: int
    op: str
    attrs: Attrs
    domain: tuple[Symbol, ...]
    condition: Cond
    inputs: tuple[Edge, ...]
    outputs: tuple[TensorType, ...]
    location: str
    name: str = ""

    @property
    def category(self) -> Category:
        """The op's category (`timerl.ops.categories`): what passes dispatch on instead of the op's name."""
        return OPS[self.op].category

    def label(self) -> str:
        name = f" '{self.name}'" if self.name else ""
        return f"{self.op}{name} (%{self.id}, created at {self.location})"

    def definition_condition(self) -> Cond:
        """The definition domain inside the box of ``domain``."""
        if self.category is MERGE:
            return conjunction(self.condition, disjunction(*(e.condition for e in self.inputs)))
        return self.condition


def identity_read(edge: Edge, consumer: Node, producer: Node) -> bool:
    """``x[b, i, t]`` read at ``[b, i, t]``, always, unmasked: a read that fusion keeps inside one group."""
    return (edge.masked_by is None and edge.condition.key() == ("bool", True)
            and same_all(consumer.domain, producer.domain)
            and all(isinstance(item, Point) and item.expr.same(dim) for item, dim in zip(edge.index, producer.domain)))


@dataclass(frozen=True)
class Graph:
    dims: tuple[Symbol, ...]
    bounds: tuple[Symbol, ...]
    nodes: tuple[Node, ...]
    _consumers: dict = field(default_factory=dict, compare=False, repr=False)

    def bound_of(self, dim: Symbol) -> Symbol:
        return self.bounds[position(dim, self.dims)]

    def consumers(self, node_id: int) -> tuple[tuple[int, int], ...]:
        """(consumer id, input slot) pairs reading ``node_id``."""
        if not self._consumers:
            table: dict[int, list[tuple[int, int]]] = {n.id: [] for n in self.nodes}
            for node in self.nodes:
                for slot, edge in enumerate(node.inputs):
                    table[edge.producer].append((node.id, slot))
            self._consumers.update({k: tuple(v) for k, v in table.items()})
        return self._consumers[node_id]

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __str__(self) -> str:
        lines = []
        for node in self.nodes:
            dims = ", ".join(d.name for d in node.domain)
            ins = ", ".join(e.describe(self) for e in node.inputs)
            outs = ", ".join(str(t) for t in node.outputs)
            when = f" when {node.condition}" if node.condition is not TRUE else ""
            lines.append(f"%{node.id}[{dims}]{when} = {node.op}({ins}) {node.attrs} -> {outs}")
        return "\n".join(lines)


def read_through(graph: Graph, nodes: Sequence[Node], forward: Mapping[int, tuple[int, int]]) -> Graph:
    """``nodes`` as a graph of ``graph``'s dimensions, where every read of output 0 of a node in ``forward``
    reads the (producer, output) that node forwards to instead (followed through chains): how a pass drops
    ops that return an input unchanged (`timerl.pdg.algebra`, `timerl.pdg.contributions`)."""
    def target(producer: int, output: int) -> tuple[int, int]:
        while producer in forward and output == 0:
            producer, output = forward[producer]
        return producer, output

    rewired = []
    for node in nodes:
        inputs = []
        for edge in node.inputs:
            producer, output = target(edge.producer, edge.output)
            inputs.append(edge if producer == edge.producer else replace(edge, producer=producer, output=output))
        rewired.append(replace(node, inputs=tuple(inputs)))
    return Graph(graph.dims, graph.bounds, tuple(rewired))
