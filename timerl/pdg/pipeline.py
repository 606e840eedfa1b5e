"""The PDG passes, in order: gradient nodes whose contributions are always there become plain sums
(`timerl.pdg.contributions`), algebraic simplification (`timerl.pdg.algebra`), common subexpression elimination
(`timerl.pdg.cse`), dead code elimination (`timerl.pdg.dce`, which drops what the first two left without
readers) and incrementalization (`timerl.pdg.incrementalize`, paper §5.3). Each pass has its switch in
`timerl.options.CompileOptions` (of the same name); with ``checks`` on (always in tests), the verifier runs
after every pass and an error names the pass that broke the graph.

``incrementalize`` is off unless asked for or ``device_memory`` is set: a running sum is a recurrence, which
keeps the executor from batching the loop it sits in (`timerl.runtime.batch`), so it pays off when memory is
the constraint and costs time otherwise.

``recompute`` (`timerl.pdg.recompute`, default off) runs last: values that wait for a late reader are
computed again before it, where that costs few flops for the bytes it frees; after CSE, which would merge
the copies back, and with the bounds, which its cost model needs."""

from __future__ import annotations

from typing import Callable, Mapping

from timerl.options import CompileOptions
from timerl.pdg.algebra import simplify
from timerl.pdg.contributions import fold_contributions
from timerl.pdg.cse import eliminate_common_subexpressions
from timerl.pdg.dce import eliminate_dead_code
from timerl.pdg.graph import Graph
from timerl.pdg.incrementalize import incrementalize as incrementalize_reductions
from timerl.pdg.recompute import recompute as recompute_values
from timerl.pdg.verify import verify
from timerl.symbolic import Symbol

PASSES: tuple[tuple[str, Callable[[Graph], Graph]], ...] = (
    ("contributions", fold_contributions),  # needs ``evaluable_everywhere`` (see `optimize_graph`)
    ("algebra", simplify),
    ("cse", eliminate_common_subexpressions),
    ("dce", eliminate_dead_code),
    ("incrementalize", incrementalize_reductions),
)


def optimize_graph(graph: Graph, bounds: Mapping[Symbol, int], options: CompileOptions = CompileOptions(),
                   passes: tuple[tuple[str, Callable[[Graph], Graph]], ...] = PASSES,
                   evaluable_everywhere: Callable[[Graph, set[int]], set[int]] | None = None) -> Graph:
    """Run the ``passes`` whose switch is on in ``options`` (``incrementalize=None`` counts as off), in order;
    then, with ``options.recompute``, `timerl.pdg.recompute`. ``evaluable_everywhere(graph, ops)`` answers the
    contributions pass's isl question (`timerl.sched.demand.evaluable_everywhere`, passed in from above:
    `timerl.compile.optimize_pdg`); without it that pass is skipped."""
    for name, transform in passes:
        if not getattr(options, name):
            continue
        if transform is fold_contributions:
            if evaluable_everywhere is None:
                continue
            graph = fold_contributions(graph, evaluable_everywhere)
        else:
            graph = transform(graph)
        if options.checks:
            verify(graph, bounds, after=name)
    if options.recompute:
        graph = recompute_values(graph, bounds)
        if options.checks:
            verify(graph, bounds, after="recompute")
    return graph
