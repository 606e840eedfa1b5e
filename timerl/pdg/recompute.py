"""Recomputation (issue 9, item 6; the TimeRL paper leaves it out): a value that waits a long time for a late
reader is computed again right before that reader, from values that are kept until then anyway, where the
flops of computing it again are few for the bytes it would keep (``jax.checkpoint``, chosen automatically).

*Late* ops depend, at the same point, on a read of a later point along their step dimension (a Monte Carlo
return ``r[t:T]`` and everything that needs it: the backward pass of REINFORCE). They cannot run before the
end of the episode window, so every value of an earlier op they read waits on the device until then: the
*frontier*. A frontier value is recomputed when

- it is a pure array op (elementwise, movement, contraction, reduction: no source, random draw, UDF, merge or
  accumulator), and so is every op it is made from at the same point, back to values that stay anyway: a
  frontier value that is not recomputed, or a value of fewer dimensions (the parameters of the iteration);
  any other value it needs (the observation, an environment's output) is then kept for the late readers;
- keeping those costs fewer bytes than the value itself, and the recomputation costs at most
  ``FLOPS_PER_BYTE`` flops for each byte it frees (the cost model: a matmul ``2 m n k``, any other op one
  flop per element it produces).

The late readers then read a copy of the chain (new nodes, the same ops and reads), which the scheduler fuses
into their own dataflow group; the original serves the early readers alone and is freed after them. This
runs after common subexpression elimination, which would merge the copies back.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import replace
from typing import Mapping

import numpy as np

from timerl.ops.registry import CONTRACTION, ELEMENTWISE, MOVEMENT, OPS, REDUCTION
from timerl.pdg.graph import Edge, Graph, Node, Point, Range
from timerl.symbolic import Symbol

FLOPS_PER_BYTE = 256  # a GPU computes hundreds of flops in the time it moves a byte to host memory and back
_PURE = frozenset({ELEMENTWISE, MOVEMENT, CONTRACTION, REDUCTION})


def recompute(graph: Graph, bounds: Mapping[Symbol, int]) -> Graph:
    late = _late(graph)
    if not late:
        return graph
    frontier = {edge.producer for node in graph.nodes if node.id in late for edge in node.inputs
                if edge.producer not in late and _same_point(edge, node, graph.nodes[edge.producer])}
    kept = {n for n in frontier if not _recomputable(graph.nodes[n])}
    chains: dict[int, list[int]] = {}
    for value in sorted(frontier - kept, key=lambda n: (-_bytes(graph.nodes[n], bounds), n)):
        chain, leaves = _chain(graph, value, kept, late)
        freed = _bytes(graph.nodes[value], bounds) - sum(_bytes(graph.nodes[n], bounds) for n in leaves - kept)
        if freed <= 0 or _flops(graph, chain, bounds) > FLOPS_PER_BYTE * freed:
            kept.add(value)
        else:
            chains[value] = chain
            kept |= leaves
    if not chains:
        return graph
    nodes = list(graph.nodes)
    copies: dict[int, int] = {}  # original -> its copy for the late readers (one copy, shared by the chains)
    for chain in chains.values():
        for original in chain:
            if original not in copies:
                copies[original] = len(nodes)
                nodes.append(graph.nodes[original])  # placeholder, rewritten below with its inputs
    for original, copy in copies.items():
        node = graph.nodes[original]
        inputs = tuple(replace(e, producer=copies.get(e.producer, e.producer)) for e in node.inputs)
        nodes[copy] = replace(node, id=copy, inputs=inputs, name=node.name and f"{node.name}.again")
    for n in late:
        node = nodes[n]
        inputs = tuple(replace(e, producer=copies[e.producer]) if e.producer in chains else e
                       for e in node.inputs)
        nodes[n] = replace(node, inputs=inputs)
    return Graph(graph.dims, graph.bounds, tuple(nodes))


def _late(graph: Graph) -> set[int]:
    """Ops that read a later point along their last dimension, and the ops of the same domain after them."""
    late = {node.id for node in graph.nodes if node.domain and any(
        _reads_later(edge, node, graph.nodes[edge.producer]) for edge in node.inputs)}
    pending = list(late)
    while pending:
        node = graph.nodes[pending.pop()]
        for consumer_id, _ in graph.consumers(node.id):
            consumer = graph.nodes[consumer_id]
            if consumer_id not in late and _same_domain(consumer, node):
                late.add(consumer_id)
                pending.append(consumer_id)
    return late


def _reads_later(edge: Edge, consumer: Node, producer: Node) -> bool:
    step = consumer.domain[-1]
    for item, dim in zip(edge.index, producer.domain):
        if not dim.same(step):
            continue
        if isinstance(item, Range):
            reach = (item.stop - step).constant_value()
            return reach is None or reach > 1
        if isinstance(item, Point):
            ahead = (item.expr - step).constant_value()
            return ahead is None or ahead > 0
    return False


def _same_point(edge: Edge, consumer: Node, producer: Node) -> bool:
    """The consumer reads the producer at its own point, and the producer has every dimension of it."""
    return (_same_domain(producer, consumer) and edge.masked_by is None and len(edge.index) == len(producer.domain)
            and all(isinstance(item, Point) and (item.expr - dim).constant_value() == 0
                    for item, dim in zip(edge.index, producer.domain)))


def _same_domain(a: Node, b: Node) -> bool:
    return len(a.domain) == len(b.domain) and all(x.same(y) for x, y in zip(a.domain, b.domain))


def _recomputable(node: Node) -> bool:
    return node.op in OPS and OPS[node.op].category in _PURE and len(node.outputs) == 1


def _chain(graph: Graph, value: int, kept: set[int], late: set[int]) -> tuple[list[int], set[int]]:
    """The ops to compute ``value`` again, producers first, and the values it needs that are not recomputable
    (an environment's observation, a random draw): those must then stay until the late readers."""
    order: list[int] = []
    leaves: set[int] = set()
    seen: set[int] = set()

    def visit(node_id: int) -> None:
        seen.add(node_id)
        node = graph.nodes[node_id]
        for edge in node.inputs:
            producer = graph.nodes[edge.producer]
            if edge.producer in kept or edge.producer in seen or len(producer.domain) < len(node.domain):
                continue
            if _recomputable(producer) and edge.producer not in late and _same_point(edge, node, producer):
                visit(edge.producer)
            else:
                leaves.add(edge.producer)
        order.append(node_id)

    visit(value)
    return order, leaves


def _elements(node: Node, bounds: Mapping[Symbol, int]) -> int:
    sizes = [d if isinstance(d, int) else d.substitute(bounds).constant_value() for d in node.outputs[0].shape]
    return functools.reduce(operator.mul, [s if s is not None else 1 for s in sizes], 1)


def _bytes(node: Node, bounds: Mapping[Symbol, int]) -> int:
    return _elements(node, bounds) * np.dtype(node.outputs[0].dtype).itemsize


def _flops(graph: Graph, chain: list[int], bounds: Mapping[Symbol, int]) -> int:
    total = 0
    for node_id in chain:
        node = graph.nodes[node_id]
        total += _elements(node, bounds)
        if OPS[node.op].category == CONTRACTION:  # 2 m n k for a product m x n, k summed
            left = graph.nodes[node.inputs[0].producer].outputs[node.inputs[0].output].shape
            inner = left[-1] if isinstance(left[-1], int) else 1
            total += (2 * inner - 1) * _elements(node, bounds)
    return total
