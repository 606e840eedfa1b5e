"""Gradient contributions that are always there: a ``grad_accumulate`` becomes the plain sum of its inputs.

A gradient node sums the contributions of its consumers, each read through the inverse of the consumer's
read and masked by the consumer: where the consumer cannot be evaluated, its contribution is left out
(`timerl.rt.autodiff`). That makes every gradient node a statement of its own (a masked read is not a read
fusion can keep inside a group), and has the executor add each contribution to a tensor of zeros. Most
contributions of a training step are read at the gradient node's own point (an elementwise op, a matmul on
the same update ``(i, e, m)``) from a consumer that can be evaluated at every point of its box; there the
mask removes nothing, so the node is the sum of its inputs: one input is read directly, several are added
with ``add`` ops (in the executor's order, so the values are the same). The rest of the backward pass then
fuses into a few groups, like the forward pass (PPO: from ~60 statements to a handful).

Which consumers can be evaluated everywhere is an isl question, answered in `timerl.sched.demand`: the
caller passes that answer in (``evaluable_everywhere``; `timerl.compile` does), so the PDG layer does not
reach up into the scheduler.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from timerl.pdg.algebra import same_type
from timerl.pdg.graph import Attrs, Edge, Graph, Node, Point, identity_read, read_through


def fold_contributions(graph: Graph, evaluable_everywhere: Callable[[Graph, set[int]], set[int]]) -> Graph:
    """``evaluable_everywhere(graph, ops)``: those of ``ops`` that can be evaluated at every point of their box."""
    masks = {e.masked_by for n in graph.nodes for e in n.inputs if e.masked_by is not None}
    candidates = [n for n in graph.nodes if n.op == "grad_accumulate" and n.id not in masks and _foldable(graph, n)]
    if not candidates:
        return graph
    everywhere = evaluable_everywhere(graph, {e.masked_by for n in candidates for e in n.inputs})
    folded = [n for n in candidates if all(e.masked_by in everywhere for e in n.inputs)]
    if not folded:
        return graph
    nodes = list(graph.nodes)
    forward: dict[int, tuple[int, int]] = {}  # a node with one contribution -> what its readers read instead
    for node in folded:
        inputs = [replace(e, masked_by=None) for e in node.inputs]
        if len(inputs) == 1:
            forward[node.id] = (inputs[0].producer, inputs[0].output)
            continue
        here = tuple(Point(d) for d in node.domain)
        total = inputs[0]
        for term in inputs[1:-1]:
            nodes.append(Node(len(nodes), "add", Attrs(), node.domain, node.condition, (total, term), node.outputs,
                              node.location, node.name))
            total = Edge(len(nodes) - 1, 0, here)
        nodes[node.id] = replace(node, op="add", attrs=Attrs(), inputs=(total, inputs[-1]))

    return read_through(graph, nodes, forward)


def _foldable(graph: Graph, node: Node) -> bool:
    """Every contribution read whole at the node's own point, always, with exactly the node's type."""
    if not node.inputs or any(window != () for window in node.attrs["windows"]):
        return False
    for edge in node.inputs:
        producer = graph.nodes[edge.producer]
        if (edge.masked_by is None or not identity_read(replace(edge, masked_by=None), node, producer)
                or not same_type(producer.outputs[edge.output], node.outputs[0])):
            return False
    return True
