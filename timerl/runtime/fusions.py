"""Peephole fusions of what autodiff writes, for backends with a fused kernel (torch: one pass over memory
instead of three, and no temporaries).

The gradient of ``y = tanh(x)`` is written with ops as ``g * (1 - y * y)``: three elementwise kernels and two
temporaries the size of the activations, for every point of every layer. torch has it as one kernel
(``tanh_backward(g, y)``, the same arithmetic). A batched statement of the learning phase runs it over
(T, batch, features) values, where the memory traffic of the two temporaries is most of the time.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from timerl.ops.registry import CONST
from timerl.pdg.graph import Graph, Node, identity_read

Operand = tuple[Node, int]  # (member, input slot): where the fused kernel reads one of its operands


def tanh_gradients(graph: Graph, members: list[Node], inside: set[int], kept: set[int],
                   kernel: Callable | None) -> dict[int, tuple[Callable, Operand, Operand, tuple[int, int]]]:
    """``g * (1 - y * y)`` among a group's ``members``: the last mul -> (``kernel``, g's operand, y's operand,
    the square and the subtraction that fold into it). Only where the two folded members are read by nothing
    else and not ``kept`` (stored, or windows), every value has the same float type and shape (no broadcast:
    the fused kernel sees exactly the operands the muls would), and the 1 is a constant."""
    if kernel is None:
        return {}
    nodes = graph.nodes
    found: dict[int, tuple[Callable, Operand, Operand, tuple[int, int]]] = {}
    for last in members:
        if last.op != "mul" or len(last.outputs) != 1:
            continue
        for slot, edge in enumerate(last.inputs):
            sub = nodes[edge.producer]
            if not _folds(graph, sub, "sub", last, slot, edge, inside, kept) or not _is_one(nodes[sub.inputs[0].producer]):
                continue
            square = nodes[sub.inputs[1].producer]
            if not _folds(graph, square, "mul", sub, 1, sub.inputs[1], inside, kept):
                continue
            first, second = square.inputs
            if (first.producer, first.output, str(first.index), str(first.condition)) != (
                    second.producer, second.output, str(second.index), str(second.condition)):
                continue
            if first.masked_by is not None or last.inputs[1 - slot].masked_by is not None:
                continue
            y_type = nodes[first.producer].outputs[first.output]
            g_edge = last.inputs[1 - slot]
            g_type = nodes[g_edge.producer].outputs[g_edge.output]
            types = {(tuple(t.shape), t.dtype) for t in (y_type, g_type, square.outputs[0], sub.outputs[0],
                                                          last.outputs[0])}
            if len(types) != 1 or next(iter(types))[1] not in ("float32", "float64"):
                continue
            found[last.id] = (kernel, (last, 1 - slot), (square, 0), (square.id, sub.id))
            break
    return found


def _folds(graph: Graph, node: Node, op: str, reader: Node, slot: int, edge: Any, inside: set[int],
           kept: set[int]) -> bool:
    """``node`` is an ``op`` of the group read only by ``reader`` (at ``slot``), point to point."""
    return (node.op == op and node.id in inside and node.id not in kept and len(node.outputs) == 1
            and graph.consumers(node.id) == ((reader.id, slot),) and identity_read(edge, reader, node))


def _is_one(node: Node) -> bool:
    if node.category is not CONST:
        return False
    value = np.asarray(node.attrs["value"])
    return value.ndim == 0 and value.dtype.kind in "fiu" and float(value) == 1.0
