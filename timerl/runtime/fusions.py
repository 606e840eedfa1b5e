"""Peephole fusions of one group's members, chosen once when the group is lowered (`timerl.runtime.plan`): what
autodiff writes as several kernels becomes one where the backend has a fused kernel (torch: one pass over memory
instead of three, and no temporaries), ``x @ w + b`` becomes one ``addmm``, an elementwise op writes into an input
that dies at it (paper §6.2), and random draws with the noise computed from them alone come a row ahead.

The gradient of ``y = tanh(x)`` is written with ops as ``g * (1 - y * y)``: three elementwise kernels and two
temporaries the size of the activations, for every point of every layer. torch has it as one kernel
(``tanh_backward(g, y)``, the same arithmetic). A batched statement of the learning phase runs it over
(T, batch, features) values, where the memory traffic of the two temporaries is most of the time.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from timerl.ops.registry import CONST, DRAW, ELEMENTWISE
from timerl.pdg.graph import Graph, Node, identity_read
from timerl.runtime.evaluate import FLOAT_DTYPES
from timerl.runtime.lifetimes import FRESH
from timerl.symbolic import TRUE

Operand = tuple[Node, int]  # (member, input slot): where the fused kernel reads one of its operands
MemberTest = Callable[[Node], bool]
# ``pure``: a registry kernel whose shapes and attributes are the same at every point (`GroupLowering._pure`);
# ``plain``: every input of the member is always read, from a local variable or one pool load


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


def input_dtypes(graph: Graph, member: Node) -> list[str]:
    """The types the member's inputs have at run time (a constant's as it is moved in)."""
    dtypes = []
    for edge in member.inputs:
        producer = graph.nodes[edge.producer]
        if producer.category is CONST:
            dtypes.append(np.asarray(producer.attrs["value"]).dtype.name)
        else:
            dtypes.append(producer.outputs[edge.output].dtype)
    return dtypes


def draw_chains(graph: Graph, members: list[Node], pure: MemberTest) -> dict[int, list[Node]]:
    """Random draws computed ahead for a whole row of the innermost dimension (`timerl.runtime.draws`): draw
    member -> [the draw, then the elementwise members computed from it alone (e.g. Gumbel noise
    ``-log(-log(u))``)]. A draw depends only on its point, so computing the row's draws at its first point
    gives the values the points would draw; one array computation replaces one per point."""
    chains: dict[int, list[Node]] = {}
    for draw in members:
        if draw.category is not DRAW or not draw.domain or draw.condition is not TRUE:
            continue
        chain = [draw]
        ids = {draw.id}
        for member in members:
            if (member.id not in ids and member.category is ELEMENTWISE and pure(member)
                    and len(member.outputs) == 1 and member.domain == draw.domain
                    and all(e.producer in ids and identity_read(e, member, graph.nodes[e.producer])
                            for e in member.inputs)):
                chain.append(member)
                ids.add(member.id)
        chains[draw.id] = chain
    return chains


def buffer_donations(graph: Graph, members: list[Node], inside: set[int], stored: set[int], elsewhere: set[int],
                     computed_at: dict[int, int], kernels: dict[str, Any] | None, pure: MemberTest,
                     plain: MemberTest) -> dict[int, tuple[int, Any]]:
    """Buffer donation (paper §6.2): member -> (the input slot whose buffer it writes into, the backend's
    kernel with ``out=``, from ``kernels``), where that input is a value this group computes into a fresh buffer
    (`FRESH`), stores nowhere, reads for the last time here, and hands to no op that could keep a view of
    it (every reader is a `FRESH` op: no reshape, permute or sink), with exactly the member's type (no
    broadcast, no promotion). ``elsewhere``: members computed by other means (folded, drawn ahead);
    ``computed_at``: a folded member -> the member whose line computes it (its reads happen there)."""
    if not kernels:
        return {}
    order = {m.id: k for k, m in enumerate(members)}
    last_reader: dict[int, int] = {}
    viewed: set[int] = set()  # values some reader might keep a view of
    for member in members:
        at = order[computed_at.get(member.id, member.id)]
        for edge in member.inputs:
            if edge.producer in inside:
                last_reader[edge.producer] = max(last_reader.get(edge.producer, -1), at)
                if member.op not in FRESH:
                    viewed.add(edge.producer)
    fresh = {m.id for m in members if m.op in FRESH and pure(m) and m.id not in elsewhere and len(m.outputs) == 1}
    donations: dict[int, tuple[int, Any]] = {}
    folding = set(computed_at.values())  # members whose line computes a fused kernel of their own
    for member in members:
        kernel = kernels.get(member.op)
        if (kernel is None or member.id in elsewhere or member.id in folding or not pure(member)
                or len(member.outputs) != 1
                or member.outputs[0].dtype not in FLOAT_DTYPES or not plain(member)
                or any(d != member.outputs[0].dtype for d in input_dtypes(graph, member))):
            continue
        for slot, edge in enumerate(member.inputs):
            producer = graph.nodes[edge.producer]
            if (edge.producer in fresh and edge.producer not in stored and edge.producer not in viewed
                    and edge.output == 0
                    and identity_read(edge, member, producer) and last_reader[edge.producer] == order[member.id]
                    and edge.producer not in {d for d, _ in donations.values()}
                    and tuple(producer.outputs[0].shape) == tuple(member.outputs[0].shape)):
                donations[member.id] = (slot, kernel)
                fresh.add(member.id)
                break
        else:
            continue
        fresh.discard(member.inputs[donations[member.id][0]].producer)
    return donations


def matmul_adds(graph: Graph, members: list[Node], inside: set[int], stored: set[int], fuse: Callable | None,
                pure: MemberTest, plain: MemberTest) -> dict[int, tuple[Node, Any]]:
    """Peephole fusion of ``x @ w + b`` (every dense layer): add -> (the matmul it folds in, the fused kernel
    ``fuse`` gives for the shapes), where the matmul's product lives only inside the group and only the add
    reads it, all in one floating-point type, and ``fuse`` has such a kernel for these shapes."""
    if fuse is None:
        return {}
    pairs: dict[int, tuple[Node, Any]] = {}
    for add in members:
        if add.op != "add" or not pure(add) or not plain(add):
            continue
        for slot, edge in enumerate(add.inputs):
            matmul = graph.nodes[edge.producer]
            if (matmul.op != "matmul" or edge.producer not in inside or matmul.id in stored
                    or not identity_read(edge, add, matmul) or not pure(matmul)
                    or graph.consumers(matmul.id) != ((add.id, slot),) or not plain(matmul)):
                continue
            dtypes = set(input_dtypes(graph, add)) | set(input_dtypes(graph, matmul))
            if dtypes != {add.outputs[0].dtype} or add.outputs[0].dtype not in FLOAT_DTYPES:
                continue
            x, w = (graph.nodes[e.producer].outputs[e.output].shape for e in matmul.inputs)
            other = add.inputs[1 - slot]
            bias = graph.nodes[other.producer].outputs[other.output].shape
            kernel = fuse(tuple(x), tuple(w), tuple(bias))
            if kernel is not None:
                pairs[add.id] = (matmul, kernel)
                break
    return pairs
