"""Dead code elimination: drop every op no root (a sink) depends on (through reads or gradient masks).

Node ids are renumbered densely; random draws are keyed by their ``stream`` attribute, fixed when the op was
created, so removing ops never changes the numbers a program draws.
"""

from __future__ import annotations

from dataclasses import replace

from timerl.pdg.graph import Graph


def eliminate_dead_code(graph: Graph) -> Graph:
    live: set[int] = set()
    stack = [n.id for n in graph.nodes if n.category.root]
    while stack:
        node_id = stack.pop()
        if node_id in live:
            continue
        live.add(node_id)
        for edge in graph.nodes[node_id].inputs:
            stack.append(edge.producer)
            if edge.masked_by is not None:
                stack.append(edge.masked_by)
    if len(live) == len(graph.nodes):
        return graph
    renumber = {old: new for new, old in enumerate(sorted(live))}
    nodes = []
    for node in graph.nodes:
        if node.id not in live:
            continue
        inputs = tuple(replace(e, producer=renumber[e.producer],
                               masked_by=None if e.masked_by is None else renumber[e.masked_by]) for e in node.inputs)
        nodes.append(replace(node, id=renumber[node.id], inputs=inputs))
    return Graph(graph.dims, graph.bounds, tuple(nodes))
