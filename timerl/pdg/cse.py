"""Common subexpression elimination: ops that compute the same thing at the same points become one.

Two ops are the same when they have the same op, attributes, domain, definition condition, output types and
inputs, their inputs read through the same dependence expressions from producers that are themselves the same
(compared structurally, with the symbolic keys of `timerl.symbolic`). Autodiff writes such repeats often (a
weight's transpose for each gradient that needs it, the same cast or constant in many places). Every reader of
a repeat then reads the first op that computes it; the repeats are left without readers for dead code
elimination to drop.

Ops are never merged where the identity of the op is the point: sources, sinks and UDFs (the user's functions
run once per op and point, environments step), random draws (each op is its own stream), merges (a
placeholder's definitions) and gradient accumulations; nor ops that some read uses as a gradient mask.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import numpy as np

from timerl.pdg.graph import Edge, Graph, Node, Point, TensorType
from timerl.symbolic import Expr

_SMALL = 4096  # constants up to this many elements are compared by value, larger ones by identity


def eliminate_common_subexpressions(graph: Graph) -> Graph:
    masks = {e.masked_by for n in graph.nodes for e in n.inputs if e.masked_by is not None}
    representative = {n.id: n.id for n in graph.nodes}

    def find(node_id: int) -> int:
        while representative[node_id] != node_id:
            representative[node_id] = representative[representative[node_id]]
            node_id = representative[node_id]
        return node_id

    changed = True
    while changed:  # recurrences pass through merges, which are never merged: a few sweeps reach the fixpoint
        changed = False
        seen: dict[tuple, int] = {}
        for node in graph.nodes:
            if not node.category.pure or node.id in masks or representative[node.id] != node.id:
                continue
            key = _node_key(node, find)
            if key is None:
                continue
            first = seen.setdefault(key, node.id)
            if first != node.id:
                representative[node.id] = first
                changed = True
    if all(k == v for k, v in representative.items()):
        return graph
    nodes = tuple(replace(n, inputs=tuple(replace(e, producer=find(e.producer)) for e in n.inputs))
                  for n in graph.nodes)
    return Graph(graph.dims, graph.bounds, nodes)


def _node_key(node: Node, find: Callable[[int], int]) -> tuple | None:
    attrs = _value_key(node.attrs.as_dict())
    if attrs is None:
        return None
    return (node.op, attrs, tuple(d.key() for d in node.domain), node.condition.key(),
            tuple(_edge_key(e, find) for e in node.inputs), tuple(_type_key(t) for t in node.outputs))


def _edge_key(edge: Edge, find: Callable[[int], int]) -> tuple:
    items = tuple(("p", item.expr.key()) if isinstance(item, Point)
                  else ("r", item.start.key(), item.stop.key(), item.step) for item in edge.index)
    return (find(edge.producer), edge.output, items, edge.condition.key(), edge.masked_by)


def _type_key(t: TensorType) -> tuple:
    return (tuple(_value_key(d) for d in t.shape), t.dtype)


def _value_key(value: Any) -> Any:
    """A hashable structural key of an attribute value; None where it has none (never merged)."""
    if isinstance(value, Expr):
        return ("expr", value.key())
    if isinstance(value, (bool, int, float, str, type(None))):
        return (type(value).__name__, value)
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        array = np.asarray(value)
        if array.size > _SMALL or array.dtype == object:
            return ("id", id(value))
        return ("array", array.dtype.str, array.shape, array.tobytes())
    if isinstance(value, (tuple, list)):
        keys = tuple(_value_key(v) for v in value)
        return None if any(k is None for k in keys) else (type(value).__name__, keys)
    if isinstance(value, dict):
        keys = tuple((k, _value_key(v)) for k, v in sorted(value.items()))
        return None if any(k[1] is None for k in keys) else ("dict", keys)
    if isinstance(value, slice):
        return _value_key((value.start, value.stop, value.step))
    if isinstance(value, TensorType):
        return _type_key(value)
    return None
