"""PDG in, frozen loop AST out: the one door to isl (shared/STYLE.md, example 7).

Each dataflow group that runs is a statement ``S<id>`` over its demanded points. Validity constraints are the
dependences (the consumers' read relations, reversed); proximity constraints are the same relations, so isl
keeps producers next to their consumers. Two kinds of work stay out of isl's integer programs, whose cost
grows faster than the number of statements (see `timerl.sched.timeline`): domain-less groups that read
nothing with a domain run once up front, and deallocations are placed after isl has scheduled, each point
right after the statement instance that reads it last (paper §6.2-6.3).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Mapping

import islpy as isl

from timerl.errors import ScheduleError
from timerl.ops.registry import SINK, UDF
from timerl.pdg.graph import Graph
from timerl.symbolic import Expr, Symbol, const
from timerl.sched import ast
from timerl.sched.cycles import cycle_error
from timerl.sched.demand import Demand, analyze
from timerl.sched.group import Group, group_nodes, is_internal, rename_relation
from timerl.sched.isl_expr import guarded, isl_cond, isl_expr, pieces_of_all
from timerl.sched import order
from timerl.sched.peel import peel
from timerl.sched.timeline import (READER, Timeline, deallocation_program, freed_units, swapped_members,
                                   upfront_groups)

# Scheduling each weakly connected component whole (rather than SCC by SCC and then clustering) lets the
# proximity constraints fuse producers with their consumers, e.g. a window read y[t:t+4] becomes one loop
# that computes y[c], uses it for g[c-3] and frees it, instead of computing all of y first.
# Measured on REINFORCE with 12 hidden layers: serializing SCCs, Feautrier's algorithm and SCC-by-SCC
# clustering each make isl 2-5x faster, and each computes every y of that window program first again.
isl.DEFAULT_CONTEXT.set_schedule_whole_component(1)
# Statements the schedule places at the same time are generated together: without it, isl spends seconds
# separating the many zero-dimensional statements (constants, parameters) of a training program.
isl.DEFAULT_CONTEXT.set_ast_build_group_coscheduled(1)


@dataclass(frozen=True)
class ScheduleResult:
    schedule: ast.Schedule
    demand: Demand
    groups: list[Group]
    statements: int
    seconds: float  # CPU seconds (process time: a loaded machine does not inflate them)
    phases: dict[str, float] = field(default_factory=dict)  # CPU seconds per step: demand, grouping, isl, ast, frees
    upfront: tuple[int, ...] = ()  # groups run once, before every loop, in this order (outside isl's problem)


def schedule_graph(graph: Graph, bounds: Mapping[Symbol, int], fuse: bool = True,
                   memory_aware: bool = False, swaps: bool = False, per_iteration: bool = True,
                   split_tails: bool = False, absorb_state: bool = True) -> ScheduleResult:
    """Schedule dataflow groups (``fuse``: identity-read fusion; ``per_iteration``: statements that run once
    per outer iteration share one, see `timerl.sched.group.group_nodes`); if fusing made isl fail, schedule op
    by op before calling it a cycle.
    ``memory_aware``: nest the schedule below its outermost band (`order.memory_aware`). ``swaps``: place an
    offload and a fetch statement between every two consecutive uses of a point (`Timeline.swap_pairs`);
    which of them run is chosen against the memory budget by `timerl.runtime.dryrun.choose_swaps`.
    ``split_tails``: what a recurrent group's recurrence does not need is a statement of its own
    (`timerl.sched.group._recurrent_tail`). ``absorb_state``: a placeholder carrying one group's own state
    joins that group (`timerl.sched.group._absorb_own_state`, with ``fuse``)."""
    started = time.process_time()
    demand = analyze(graph, bounds)
    phases = {"demand": time.process_time() - started}
    try:
        return _schedule_groups(graph, demand, fuse, started, phases, memory_aware, swaps, per_iteration,
                                split_tails, absorb_state)
    except ScheduleError:
        if not fuse and not per_iteration:
            raise
        return _schedule_groups(graph, demand, False, started, phases, memory_aware, swaps, False)


def _schedule_groups(graph: Graph, demand: Demand, fuse: bool, started: float,
                     phases: dict[str, float], memory_aware: bool = False, swaps: bool = False,
                     per_iteration: bool = True, split_tails: bool = False,
                     absorb_state: bool = True) -> ScheduleResult:
    clock = time.process_time()
    groups, group_of = group_nodes(graph, demand, fuse, per_iteration=per_iteration and not memory_aware,
                                   split_tails=split_tails, absorb_state=absorb_state)
    dependences: list[isl.Map] = []
    readers: dict[int, list[isl.Map]] = {g.id: [] for g in groups}
    output_readers: dict[tuple[int, int], list[isl.Map]] = {}  # (producer, output) -> reads from other groups
    producers: dict[int, set[int]] = {g.id: set() for g in groups}
    for node in graph.nodes:
        if node.id not in group_of:
            continue
        for slot, edge in enumerate(node.inputs):
            read = demand.reads[(node.id, slot)]
            if read.is_empty() or edge.producer not in group_of:
                continue
            if is_internal(graph, edge, node, group_of):
                continue
            relation = rename_relation(read, group_of)
            dependences.append(relation.reverse())
            readers[group_of[edge.producer]].append(relation)
            output_readers.setdefault((edge.producer, edge.output), []).append(relation)
            producers[group_of[node.id]].add(group_of[edge.producer])
    upfront = upfront_groups(groups, producers)
    early = set(upfront)
    domains = [g.domain for g in groups if g.id not in early]
    labels = {g.id: _label(graph, g) for g in groups}
    if not groups:
        return ScheduleResult(ast.Schedule(ast.Sequence(()), labels), demand, groups, 0,
                              time.process_time() - started, phases)
    phases["grouping"] = time.process_time() - clock
    clock = time.process_time()
    isl_schedule = None
    if domains:
        domain = order.union_set(domains)
        validity = _union_map([d for d in dependences if not _touches(d, early)], domain).coalesce()
        constraints = isl.ScheduleConstraints.on_domain(domain).set_context(demand.polyhedra.generic_context)
        constraints = constraints.set_validity(validity).set_proximity(validity)
        try:
            isl_schedule = constraints.compute_schedule()
        except isl.Error:
            isl_schedule = None
        if isl_schedule is None and (fuse or per_iteration):  # `schedule_graph` tries op by op before naming
            raise ScheduleError("isl found no order of the fused statements")  # a cycle (whose closure is slow)
        if isl_schedule is None:
            raise _cycle_error(graph, groups, validity.intersect_params(demand.polyhedra.context))
        if memory_aware:
            isl_schedule = order.memory_aware(isl_schedule, domain, validity, demand.polyhedra.generic_context,
                                               order.footprint(graph, groups, group_of))
    phases["isl"] = time.process_time() - clock
    clock = time.process_time()
    context = demand.polyhedra.context
    parameters = {b.name: const(demand.polyhedra.bounds[b]) for b in graph.bounds}
    timeline = Timeline(context)
    for position, group_id in enumerate(upfront):
        timeline.add(position, isl.Map.from_domain(groups[group_id].domain), [], ["0", str(position)])
    program = None
    if isl_schedule is not None:
        build, _callback = isl.AstBuild.from_context(context).set_at_each_domain(timeline.annotate)
        program = build.node_from_schedule(_atomic(isl_schedule))
        timeline.record_paths(program, ["1"])
    phases["ast"] = time.process_time() - clock
    clock = time.process_time()
    built: dict[str, isl.AstNode] = {}
    outputs = {n.id: len(n.outputs) for n in graph.nodes}
    units = freed_units(groups, readers, output_readers, outputs)
    frees = {key: _targets(deallocation_program(relation, timeline.domain(key), context, built),
                           [(u.group, u.parts) for u in units])
             for key, relation in timeline.last_readers(units).items()}
    if swaps:
        pairs, offloads, versions, fetches = timeline.swap_pairs(
            swapped_members(groups, readers, output_readers, outputs), FETCH_DISTANCES)
        whole = {g.id: g.freed_later for g in groups}  # members None: every stored member of the group
        moved = [(m.group, None if m.members == whole[m.group] else m.members) for m, _ in pairs]
        offload_targets = [(group, (unit, members)) for unit, (group, members) in enumerate(moved)]
        fetch_targets = [(moved[unit][0], (unit, moved[unit][1], distance)) for unit, distance in versions]
        frees = {key: _Around(frees.get(key), *(
            _targets(deallocation_program(relation[key], timeline.domain(key), context, built), targets)
            if key in relation else None for relation, targets in ((offloads, offload_targets),
                                                                   (fetches, fetch_targets))))
            for key in set(frees) | set(offloads) | set(fetches)}
    body = [_after(ast.Execute(group_id, ()), frees.get(position), parameters)
            for position, group_id in enumerate(upfront)]
    if program is not None:
        host_calls = {g.id for g in groups if any(graph.nodes[m].category in (SINK, UDF) for m in g.members)}
        body.append(peel(_convert(program, parameters, frees), producers, host_calls))
    tree = ast.Sequence(tuple(body))
    phases["frees"] = time.process_time() - clock
    return ScheduleResult(ast.Schedule(tree, labels), demand, groups, len(domains), time.process_time() - started,
                          phases, tuple(upfront))


# How far ahead of its reader a scheduled fetch may be issued, in executions of the reading site: the candidates
# that `timerl.runtime.dryrun.choose_swaps` tries against the budget (0, right before the reader, always fits)
FETCH_DISTANCES = (1, 2, 4)


def _label(graph: Graph, group: Group) -> str:
    ops = [graph.nodes[n].op for n in group.members]
    shown = "+".join(ops) if len(ops) <= 4 else "+".join(ops[:3]) + f"+...({len(ops) - 3} more)"
    return f"{shown} G{group.id}"


def _touches(relation: isl.Map, groups: set[int]) -> bool:
    names = (relation.get_tuple_name(isl.dim_type.in_), relation.get_tuple_name(isl.dim_type.out))
    return any(int(name[1:]) in groups for name in names)


def _atomic(schedule: isl.Schedule) -> isl.Schedule:
    """Ask for 'atomic' loops: each statement instance once, no code duplicated to separate loop pieces.
    The generated program is smaller and isl builds it an order of magnitude faster."""

    def visit(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if node.get_type() == isl.schedule_node_type.band:
            for member in range(node.band_n_member()):
                node = node.band_member_set_ast_loop_type(member, isl.ast_loop_type.atomic)
        return node

    return schedule.map_schedule_node_bottom_up(visit)


@dataclass(frozen=True)
class _Around:
    """The memory programs of one site: frees and offloads after it, fetches before it (each a
    `deallocation_program`, or None)."""

    frees: tuple | None
    offloads: tuple | None = None
    fetches: tuple | None = None


def _targets(program: tuple[isl.AstNode, tuple[int, ...]], units: list) -> tuple[isl.AstNode, tuple]:
    """A deallocation program whose ``F<j>`` frees ``units[j]``: (group, parts) pairs (`timeline.Freed`)."""
    return program[0], tuple(units[j] for j in program[1])


def _after(execute: ast.Execute, frees, loop_vars: dict[str, Expr]) -> ast.AstNode:
    """A computation followed by the deallocations of the points it was the last to read (and, with
    scheduled swaps, preceded by the fetches of what it reads, followed by the offloads of what it read
    last before a gap)."""
    if frees is None:
        return execute
    around = frees if isinstance(frees, _Around) else _Around(frees)
    reader = dict(loop_vars, **{f"{READER}{k}": e for k, e in enumerate(execute.point)})
    before, after = [], []
    if around.fetches is not None:
        before.append(_convert(around.fetches[0], reader, {}, around.fetches[1], ast.Fetch))
    if around.frees is not None:  # first: an offload then moves only what is read again
        after.append(_convert(around.frees[0], reader, {}, around.frees[1]))
    if around.offloads is not None:
        after.append(_convert(around.offloads[0], reader, {}, around.offloads[1], ast.Offload))
    return ast.Sequence((*before, execute, *after)) if before or after else execute


def _union_map(maps: list[isl.Map], domain: isl.UnionSet) -> isl.UnionMap:
    result = isl.UnionMap.empty(domain.get_space())
    for item in maps:
        result = result.union(isl.UnionMap.from_map(item))
    return result


def _cycle_error(graph: Graph, groups: list[Group], validity: isl.UnionMap) -> ScheduleError:
    """Name the reads that close the cycles among the ops whose points depend on themselves (through the
    transitive closure of the dependences)."""
    closure, _exact = validity.transitive_closure()
    cyclic: set[int] = set()

    def visit(relation: isl.Map) -> None:
        source, target = relation.get_tuple_name(isl.dim_type.in_), relation.get_tuple_name(isl.dim_type.out)
        if source == target and source.startswith("S"):
            same_point = relation.intersect(isl.Map.identity(relation.get_space()))
            if not same_point.is_empty():
                cyclic.update(groups[int(source[1:])].members)

    closure.foreach_map(visit)
    if not cyclic:
        return ScheduleError("no valid execution order (isl found none)")
    return cycle_error(graph, cyclic)


# ---- isl AST -> our AST ---------------------------------------------------------------------------------------


def _convert(node: isl.AstNode, loop_vars: dict[str, Expr], frees: dict, freed_groups: tuple = (),
             verb: type = ast.Deallocate):
    """isl's AST as ours; ``frees`` are the deallocation programs to insert after each site, and in such a
    program ``F<j>`` frees ``freed_groups[j]``, a (group, parts) pair, or, with ``verb``, offloads or fetches
    members of the group of ``freed_groups[j]``, a (group, (swap unit, members)) pair, or for a fetch (group,
    (swap unit, members, distance)) (`Timeline.swap_pairs`)."""
    kind = node.get_type()
    if kind == isl.ast_node_type.block:
        children = node.block_get_children()
        return ast.Sequence(tuple(_convert(children.get_at(k), loop_vars, frees, freed_groups, verb)
                                  for k in range(children.n_ast_node())))
    if kind == isl.ast_node_type.for_:
        name = node.for_get_iterator().get_id().get_name()
        var = Symbol(name)
        inner = dict(loop_vars, **{name: var})
        step = isl_expr(node.for_get_inc(), loop_vars).constant_value()
        body = _convert(node.for_get_body(), inner, frees, freed_groups, verb)
        bounds = pieces_of_all([node.for_get_init(), _stop_bound(node.for_get_cond(), name)], inner)
        return guarded([(guard, ast.Loop(var, start, stop, int(step), body)) for guard, (start, stop) in bounds])
    if kind == isl.ast_node_type.if_:
        then = _convert(node.if_get_then_node(), loop_vars, frees, freed_groups, verb)
        orelse = (_convert(node.if_get_else_node(), loop_vars, frees, freed_groups, verb)
                  if node.if_has_else_node() else None)
        return ast.If(isl_cond(node.if_get_cond(), loop_vars), then, orelse)
    if kind == isl.ast_node_type.user:
        call = node.user_get_expr()
        name = call.get_op_arg(0).get_id().get_name()
        node_id = int(name[1:])
        pieces = pieces_of_all([call.get_op_arg(k) for k in range(1, call.get_op_n_arg())], loop_vars)
        if name[0] == "F":
            group_id, detail = freed_groups[node_id]  # (group, parts) to free, (group, (unit, members, ...)) to move
            details = (detail,) if verb is ast.Deallocate else detail
            return guarded([(guard, verb(group_id, point, *details)) for guard, point in pieces])
        site = int(node.get_annotation().get_name()[1:])
        return guarded([(guard, _after(ast.Execute(node_id, point), frees.get(site), loop_vars))
                         for guard, point in pieces])
    if kind == isl.ast_node_type.mark:
        return _convert(node.mark_get_node(), loop_vars, frees, freed_groups, verb)
    raise ScheduleError(f"unexpected isl AST node {kind}")


def _stop_bound(cond: isl.AstExpr, name: str) -> isl.AstExpr:
    """isl writes loop conditions as ``c <= e`` or ``c < e``; we keep an exclusive stop (``e + 1`` or ``e``)."""
    op = cond.get_op_type()
    left, right = cond.get_op_arg(0), cond.get_op_arg(1)
    if left.get_type() == isl.ast_expr_type.id and left.get_id().get_name() == name:
        if op == isl.ast_expr_op_type.le:
            return right.add(isl.AstExpr.from_val(isl.Val.one(right.get_ctx())))
        if op == isl.ast_expr_op_type.lt:
            return right
    raise ScheduleError(f"unexpected loop condition {cond.to_C_str()}")
