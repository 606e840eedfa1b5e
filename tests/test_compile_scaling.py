"""The scheduler's problem grows linearly with the program (issue 8): structure, not seconds, is asserted.
benchmarks/compile_scaling.py measures the times."""

from __future__ import annotations

from functools import lru_cache

import islpy as isl

from benchmarks.compile_scaling import build
import timerl as trl
from timerl.compile import optimize_pdg, resolve_bounds
from timerl.sched.ast import Deallocate, Execute, Loop, Sequence
from timerl.sched.schedule import schedule_graph


@lru_cache(maxsize=None)
def optimized(hidden_layers: int):
    ctx = build(hidden_layers, num_envs=2, hidden=4)
    bounds = resolve_bounds(ctx, {"I": 3, "T": 5})
    return optimize_pdg(ctx.graph(), bounds, trl.CompileOptions(contributions=True)), bounds


@lru_cache(maxsize=None)  # the programs are compiled once for both tests
def schedule(hidden_layers: int):
    return schedule_graph(*optimized(hidden_layers))


def walk(node):
    yield node
    children = node.body if isinstance(node, Sequence) else (node.body,) if isinstance(node, Loop) else (
        tuple(c for c in (getattr(node, "then", None), getattr(node, "orelse", None)) if c is not None))
    for child in children:
        yield from walk(child)


def test_isl_statements_do_not_grow_with_the_layers_and_leave_out_constants():
    results = [schedule(layers) for layers in (1, 2, 3)]
    statements = [r.statements for r in results]
    # a layer adds no statement: its forward ops and, with gradients summed in place
    # (`timerl.pdg.contributions`), its backward ops join the groups of the other layers
    assert statements[0] == statements[1] == statements[2] > 0, statements
    for layers, result in zip((1, 2, 3), results):
        assert result.statements == len(result.groups) - len(result.upfront)
        assert all(g.domain.dim(isl.dim_type.set) == 0 for g in result.groups if g.id in result.upfront)
        graph = optimized(layers)[0]
        constants = {g.id for g in result.groups if g.domain.dim(isl.dim_type.set) == 0
                     and all(graph.nodes[m].op == "const" for m in g.members)}
        assert constants and constants <= set(result.upfront)  # the optimizer's and the network's constants


def test_each_group_runs_once_in_the_program_and_its_frees_are_deallocations():
    result = schedule(2)
    nodes = list(walk(result.schedule.root))
    executed = [n.node for n in nodes if isinstance(n, Execute)]
    freed = {n.node for n in nodes if isinstance(n, Deallocate)}
    assert sorted(executed) == sorted(g.id for g in result.groups)
    assert freed == {g.id for g in result.groups if g.freed_later}
    top = result.schedule.root.body
    first = [next(n for n in walk(child) if isinstance(n, Execute)) for child in top[:len(result.upfront)]]
    assert [n.node for n in first] == list(result.upfront)


def once_per_iteration_statements(result, graph) -> int:
    """isl statements over the iteration dimension alone that read nothing deeper (parameters, optimizer
    states, their transposes)."""
    count = 0
    for group in result.groups:
        if group.id in result.upfront or group.domain.dim(isl.dim_type.set) != 1:
            continue
        producers = {e.producer for n in group.members for e in graph.nodes[n].inputs}
        if all(len(graph.nodes[p].domain) <= 1 for p in producers):
            count += 1
    return count


def test_each_layers_parameters_and_optimizer_states_join_statements_that_do_not_grow_with_layers():
    counts = []
    for layers in (1, 2, 3):
        graph, bounds = optimized(layers)
        counts.append(once_per_iteration_statements(schedule(layers), graph))
        # without that fusion (as under a memory budget), each layer brings its own
        apart = schedule_graph(graph, bounds, memory_aware=True)
        assert once_per_iteration_statements(apart, graph) > counts[-1]
    assert counts[0] == counts[1] == counts[2] > 0, counts
