"""The PDG passes, in order. With ``checks`` on (always in tests), the verifier runs after every pass and an
error names the pass that broke the graph. Dataflow fusion for the scheduler lives in `timerl.sched.group`
and follows the same ``optimize`` switch."""

from __future__ import annotations

from typing import Callable, Mapping

from timerl.pdg.dce import eliminate_dead_code
from timerl.pdg.graph import Graph
from timerl.pdg.verify import verify
from timerl.rt.symbolic import Symbol

PASSES: tuple[tuple[str, Callable[[Graph], Graph]], ...] = (
    ("dce", eliminate_dead_code),
)


def optimize_graph(graph: Graph, bounds: Mapping[Symbol, int], checks: bool = True) -> Graph:
    for name, transform in PASSES:
        graph = transform(graph)
        if checks:
            verify(graph, bounds, after=name)
    return graph
