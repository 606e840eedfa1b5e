"""Incrementalization (paper §5.3): a reduction over a whole dimension becomes a running accumulation.

A gradient of a per-iteration tensor (a parameter ``w[i]`` read by every step ``t``) sums one contribution per
step: ``grad[i] = sum_t V[i, t]``. Computed as one sum at the end, every ``V[i, t]`` lives until step ``T - 1``,
so memory grows with ``T``. Rewritten as a recurrence along ``t``,

    Z[i, t]   = V[i, t] where the consumer is evaluable, zeros elsewhere   (the masked read, per step)
    acc[i, 0] = Z[i, 0]
    acc[i, t] = acc[i, t - 1] + Z[i, t]                                     (t >= 1)
    grad[i]  reads acc[i, T - 1]

each contribution dies at its step and the scheduler may run the sum next to the steps that produce it
(paper §6.3): peak memory follows the access pattern, not ``T``.

The same holds for a user's sum over a whole dimension, ``x[i, 0:T].sum(0)``. Each op's registry entry says
whether it has a running form (``incrementalize``: a `RunningSum` or `RunningContributions` record, rewritten
here by the rewrite in `REWRITES` for its kind); an op whose rule is `unsupported` is left whole. The accumulator is a merge marked
``running=<dim name>``: demand analysis (`timerl.sched.demand`) runs it only on the prefixes its readers need.
The pass is an option of the pipeline (`timerl.pdg.pipeline`), off-able so results can be compared.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from timerl.ops.registry import OPS, RunningContributions, RunningSum
from timerl.pdg.graph import Attrs, Edge, Graph, Node, Point, Range
from timerl.symbolic import TRUE, Symbol, compare, const, position


def incrementalize(graph: Graph) -> Graph:
    """Rewrite every input edge that its op's rule accepts; the graph is returned unchanged otherwise."""
    nodes = list(graph.nodes)
    for node in graph.nodes:
        rule = OPS[node.op].incrementalize
        rewrite = REWRITES.get(type(rule))
        if rewrite is None:
            continue
        current = node
        for slot, edge in enumerate(node.inputs):
            dim = _full_range_dim(graph, edge)
            if dim is not None and rewrite.accepts(rule, current, slot):
                current = rewrite.rewrite(graph, nodes, current, slot, dim)
        nodes[node.id] = current
    if len(nodes) == len(graph.nodes):
        return graph
    return Graph(graph.dims, graph.bounds, tuple(nodes))


def _full_range_dim(graph: Graph, edge: Edge) -> Symbol | None:
    """The producer dimension ``t`` the edge reads whole (``0:T``, unit step), when it is the only range and
    every other index is a point; None otherwise."""
    producer = graph.nodes[edge.producer]
    ranged = [k for k, item in enumerate(edge.index) if isinstance(item, Range)]
    if len(ranged) != 1 or edge.condition is not TRUE or len(edge.index) != len(producer.domain):
        return None
    item = edge.index[ranged[0]]
    dim = producer.domain[ranged[0]]
    if item.step != 1 or item.start.constant_value() != 0 or not item.stop.same(graph.bound_of(dim)):
        return None
    return dim


def _running_sum(graph: Graph, nodes: list[Node], consumer: Node, edge: Edge, dim: Symbol,
                 step: Callable[[Callable[..., int], tuple[Point, ...]], Edge]) -> Edge:
    """Add ``acc[p] = step[p] (+ acc[p - 1 along dim])`` over the producer's domain; the edge that reads the
    total, ``acc`` at the last step, in place of ``edge``. ``step(add, here)`` gives the per-step term."""
    producer = graph.nodes[edge.producer]
    kind = producer.outputs[edge.output]
    here = tuple(Point(d) for d in producer.domain)
    axis = position(dim, producer.domain)
    earlier = tuple(Point(dim - 1) if k == axis else item for k, item in enumerate(here))
    where = f"{consumer.location} (running sum over {dim.name})"

    def add(op: str, attrs: Attrs, inputs: tuple[Edge, ...], condition=TRUE) -> int:
        new = Node(len(nodes), op, attrs, producer.domain, condition, inputs, (kind,), where, consumer.name)
        nodes.append(new)
        return new.id

    term = step(add, here)
    accumulator = len(nodes) + 1  # the merge, created right after the add that reads it
    later = compare(dim, ">=", const(1))
    total = add("add", Attrs(), (Edge(accumulator, 0, earlier), replace(term, condition=TRUE)), later)
    add("merge", Attrs.of(running=dim.name, shape=tuple(kind.shape), dtype=kind.dtype),
        (replace(term, condition=compare(dim, "==", const(0))), Edge(total, 0, here, later)))
    last = tuple(Point(graph.bound_of(dim) - 1) if k == axis else item for k, item in enumerate(edge.index))
    return Edge(accumulator, 0, last, TRUE, masked_by=None if edge.masked_by is None else accumulator)


class _RunningGradient:
    """``grad_accumulate`` over a masked full-range read: the sum of per-step contributions, as they come."""

    @staticmethod
    def accepts(rule: RunningContributions, node: Node, slot: int) -> bool:
        edge = node.inputs[slot]
        return edge.masked_by is not None and node.attrs["windows"][slot] == ()

    @staticmethod
    def rewrite(graph: Graph, nodes: list[Node], node: Node, slot: int, dim: Symbol) -> Node:
        edge = node.inputs[slot]
        kind = graph.nodes[edge.producer].outputs[edge.output]

        def step(add, here) -> Edge:  # the masked read, one step at a time: zeros where the consumer is not
            attrs = Attrs.of(shape=tuple(kind.shape), dtype=kind.dtype, windows=((),))
            return Edge(add("grad_accumulate", attrs, (Edge(edge.producer, edge.output, here, TRUE,
                                                             edge.masked_by),)), 0, here)

        inputs = list(node.inputs)
        inputs[slot] = _running_sum(graph, nodes, node, edge, dim, step)
        return replace(node, inputs=tuple(inputs))


class _RunningReduction:
    """``x[..., 0:T].sum(0)`` of floats: the sum over the range dimension, step by step."""

    @staticmethod
    def accepts(rule: RunningSum, node: Node, slot: int) -> bool:
        return node.inputs[slot].masked_by is None and rule.applies(node.attrs, node.outputs[0].dtype)

    @staticmethod
    def rewrite(graph: Graph, nodes: list[Node], node: Node, slot: int, dim: Symbol) -> Node:
        edge = node.inputs[slot]
        if graph.nodes[edge.producer].outputs[edge.output].dtype != node.outputs[0].dtype:
            return node
        here_read = _running_sum(graph, nodes, node, edge, dim,
                                 lambda add, here: Edge(edge.producer, edge.output, here))
        return replace(node, op="identity", attrs=Attrs(), inputs=(here_read,))


REWRITES = {
    RunningContributions: _RunningGradient(),
    RunningSum: _RunningReduction(),
}
