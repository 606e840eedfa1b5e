"""Algebraic simplification: ops that give back one of their inputs unchanged are replaced by that input.

After autodiff, ``detach`` and ``identity`` only copy; casts to the type a value already has, reshapes and
expansions to the shape it already has, the identity permutation, products with ones, sums with zeros and
double negations leave it as it is. Each rule (`RULES`, one row per op) names the input whose value the op
returns; every reader of the op then reads that input, and the op, left without readers, goes with dead code
elimination. An op is replaced only where it reads that input at its own point, always (an identity read: the
same domain and point, so the readers' index expressions keep their meaning), the types agree exactly (no
broadcast or promotion happens), and no read uses it as a gradient mask.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from timerl.ops.registry import CONST
from timerl.pdg.graph import Graph, Node, TensorType, identity_read, read_through


def _constant(graph: Graph, node: Node, slot: int, value: float) -> bool:
    producer = graph.nodes[node.inputs[slot].producer]
    return producer.category is CONST and bool(np.all(np.asarray(producer.attrs["value"]) == value))


def same_type(a: TensorType, b: TensorType) -> bool:
    return a.dtype == b.dtype and len(a.shape) == len(b.shape) and all(
        x == y if isinstance(x, int) and isinstance(y, int) else
        (not isinstance(x, int) and not isinstance(y, int) and x.same(y)) for x, y in zip(a.shape, b.shape))


def _input_type(graph: Graph, node: Node, slot: int) -> TensorType:
    edge = node.inputs[slot]
    return graph.nodes[edge.producer].outputs[edge.output]


# op -> (graph, node) -> the slot of the input the op returns unchanged, or None
RULES: dict[str, Callable[[Graph, Node], int | None]] = {
    "identity": lambda g, n: 0,
    "detach": lambda g, n: 0,
    "astype": lambda g, n: 0 if n.attrs["dtype"] == _input_type(g, n, 0).dtype else None,
    "reshape": lambda g, n: 0 if same_type(TensorType(tuple(n.attrs["shape"]), n.outputs[0].dtype),
                                            _input_type(g, n, 0)) else None,
    "expand": lambda g, n: 0 if same_type(TensorType(tuple(n.attrs["shape"]), n.outputs[0].dtype),
                                           _input_type(g, n, 0)) else None,
    "permute": lambda g, n: 0 if tuple(n.attrs["perm"]) == tuple(range(len(n.attrs["perm"]))) else None,
    "mul": lambda g, n: 0 if _constant(g, n, 1, 1) else (1 if _constant(g, n, 0, 1) else None),
    "div": lambda g, n: 0 if _constant(g, n, 1, 1) else None,
    "add": lambda g, n: 0 if _constant(g, n, 1, 0) else (1 if _constant(g, n, 0, 0) else None),
    "sub": lambda g, n: 0 if _constant(g, n, 1, 0) else None,
}


def simplify(graph: Graph) -> Graph:
    masks = {e.masked_by for n in graph.nodes for e in n.inputs if e.masked_by is not None}
    forward: dict[int, tuple[int, int]] = {}  # replaced op -> (producer, output) its readers read instead
    for node in graph.nodes:
        slot = _returned_input(graph, node) if node.id not in masks else None
        if slot is not None:
            edge = node.inputs[slot]
            forward[node.id] = (edge.producer, edge.output)
    for node in graph.nodes:  # -(-x): the outer negation returns what the inner one reads
        if node.op == "neg" and node.id not in masks and node.id not in forward:
            inner = graph.nodes[node.inputs[0].producer]
            if (inner.op == "neg" and identity_read(node.inputs[0], node, inner)
                    and identity_read(inner.inputs[0], inner, graph.nodes[inner.inputs[0].producer])
                    and same_type(_input_type(graph, inner, 0), node.outputs[0])):
                forward[node.id] = (inner.inputs[0].producer, inner.inputs[0].output)
    if not forward:
        return graph

    return read_through(graph, graph.nodes, forward)


def _returned_input(graph: Graph, node: Node) -> int | None:
    rule = RULES.get(node.op)
    if rule is None or len(node.outputs) != 1:
        return None
    slot = rule(graph, node)
    if slot is None:
        return None
    edge = node.inputs[slot]
    producer = graph.nodes[edge.producer]
    if not identity_read(edge, node, producer) or not same_type(producer.outputs[edge.output], node.outputs[0]):
        return None
    return slot
