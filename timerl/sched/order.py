"""The memory-aware part of scheduling (paper §6.3): below the outermost band, the statements solved by isl in
parts (`memory_aware`: before the steps, the steps in phases of short dependences, after them), and each loop
body's independent statements ordered by the bytes they keep alive (`order_sequences`)."""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from timerl.pdg.graph import Graph
from timerl.pdg.sizes import static_bytes
from timerl.sched.group import Group


def memory_aware(schedule: isl.Schedule, domain: isl.UnionSet, validity: isl.UnionMap,
                  context: isl.Set, footprint: Footprint) -> isl.Schedule:
    """Below the outermost band (a training iteration ``i``), schedule in three parts, each by isl: the
    statements with fewer dimensions that run before the deepest ones, the deepest ones (a step ``t``), and
    the fewer-dimensional ones that need them (paper §6.3). Solved together, a per-iteration statement that
    reads or feeds every step makes every dependence distance grow with ``T``, and isl stops looking for
    short ones: it puts all of learning after all of acting. Solved apart, learning at step ``t`` runs as
    soon as step ``t + n`` exists, so what lives between them depends on ``n``, not on ``T``.
    The original schedule is kept when the parts would not respect a dependence. Within a part, the statements
    of a loop body run in the order `order_sequences` chooses by their bytes."""
    root = schedule.get_root()
    if root.n_children() != 1 or root.child(0).get_type() != isl.schedule_node_type.band:
        return schedule
    outer = root.child(0).band_get_partial_schedule()
    placement = isl.UnionMap.from_multi_union_pw_aff(outer)
    inner = validity.intersect(placement.apply_range(placement.reverse()))  # dependences within one iteration
    statements: list[isl.Set] = []
    domain.foreach_set(statements.append)
    depth = {s.get_tuple_name(): s.n_dim() for s in statements}
    deepest = max(depth.values())
    edges: list[tuple[str, str]] = []
    inner.foreach_map(lambda m: edges.append((m.get_tuple_name(isl.dim_type.in_), m.get_tuple_name(isl.dim_type.out))))
    after = {name for name, n in depth.items() if n == deepest}
    grown = True
    while grown:
        grown = False
        for source, target in edges:
            if source in after and target not in after:
                after.add(target)
                grown = True
    late = {name for name in after if depth[name] < deepest}
    early = set(depth) - after
    if not late and not early or any(source in late and depth[target] == deepest for source, target in edges):
        return schedule
    parts = []
    for names in (early, *phases(after - late, inner), late):
        if not names:
            continue
        part = union_set([s for s in statements if s.get_tuple_name() in names])
        within = inner.intersect_domain(part).intersect_range(part)
        constraints = isl.ScheduleConstraints.on_domain(part).set_context(context)
        parts.append(order_sequences(constraints.set_validity(within).set_proximity(within).compute_schedule(),
                                      within, footprint))
    result = parts[0]
    for part in parts[1:]:
        result = result.sequence(part)
    return result.insert_partial_schedule(outer)


@dataclass(frozen=True)
class Footprint:
    """The bytes `order_sequences` weighs: per statement, what it stores for other statements at one point
    and the stored members it reads; per stored member, its bytes at one point (0 where symbolic) and the
    statements that read it."""
    stores: dict[str, int]
    reads: dict[str, set[int]]
    member_bytes: dict[int, int]
    readers: dict[int, set[str]]


def footprint(graph: Graph, groups: list[Group], group_of: dict[int, int]) -> Footprint:
    member_bytes = {m: static_bytes(graph.nodes[m]) or 0 for g in groups for m in g.freed_later}
    readers: dict[int, set[str]] = {m: set() for m in member_bytes}
    reads: dict[str, set[int]] = {f"S{g.id}": set() for g in groups}
    for node in graph.nodes:
        for edge in node.inputs if node.id in group_of else ():
            if edge.producer in member_bytes and group_of[edge.producer] != group_of[node.id]:
                readers[edge.producer].add(f"S{group_of[node.id]}")
                reads[f"S{group_of[node.id]}"].add(edge.producer)
    stores = {f"S{g.id}": sum(member_bytes[m] for m in g.freed_later) for g in groups}
    return Footprint(stores, reads, member_bytes, readers)


def order_sequences(schedule: isl.Schedule, validity: isl.UnionMap, footprint: Footprint) -> isl.Schedule:
    """Reorder the statements of each sequence of statements (a loop body) that isl left free to order: isl's
    order of independent statements changes with the groups' numbering (seen, not derived from isl's code), and
    a renumbering moved the largest gradient before the small ones, keeping every other value of the step
    alive while it is computed (REINFORCE with running sums: +8% peak). Greedily, depth first
    (`lightest_first`): among the statements whose predecessors at the same point of the enclosing loops have
    run, the next one reads what the latest statement produced (a gradient, then its running sum, before the
    next gradient), then adds the fewest bytes (what it stores less what dies at it: values all of whose
    readers have run), then stores the fewest, then isl's order. Bytes are per point: batched loops run each
    statement over the same chunk of points."""
    def visit(node: isl.ScheduleNode) -> isl.ScheduleNode:
        if node.get_type() != isl.schedule_node_type.sequence:
            return node
        count = node.n_children()
        if any(node.child(k).child(0).get_type() != isl.schedule_node_type.leaf for k in range(count)):
            return node
        filters = [node.child(k).filter_get_filter() for k in range(count)]
        names: list[set[str]] = []
        for selected in filters:
            names.append(set())
            selected.foreach_set(lambda s, into=names[-1]: into.add(s.get_tuple_name()))
        prefix = node.get_prefix_schedule_union_map()
        together = validity.intersect(prefix.apply_range(prefix.reverse()))
        sources = [together.intersect_domain(selected) for selected in filters]
        before = [{j for j in range(count) if j != k and not sources[j].intersect_range(filters[k]).is_empty()}
                  for k in range(count)]
        order = lightest_first(names, before, footprint)
        if order == list(range(count)):
            return node
        ordered = isl.UnionSetList.alloc(node.get_ctx(), count)
        for k in order:
            ordered = ordered.add(filters[k])
        return node.cut().insert_sequence(ordered)

    return schedule.map_schedule_node_bottom_up(visit)


def lightest_first(names: list[set[str]], before: list[set[int]], footprint: Footprint) -> list[int]:
    """The order `order_sequences` chooses for statements ``names`` (a child of a sequence may hold several),
    ``before[k]``: the children that must run before child ``k``."""
    order: list[int] = []
    placed: set[str] = set()
    left = list(range(len(names)))

    def weight(k: int) -> tuple[int, int, int, int]:
        latest = max((order.index(j) for j in before[k]), default=-1)
        stored = sum(footprint.stores.get(s, 0) for s in names[k])
        done = placed | names[k]
        read = {m for s in names[k] for m in footprint.reads.get(s, ())}
        freed = sum(footprint.member_bytes[m] for m in read if footprint.readers[m] <= done)
        return -latest, stored - freed, stored, k

    while left:
        ready = [k for k in left if before[k] <= set(order)]
        if not ready:  # no order within one point (isl's schedule has one; keep it)
            return list(range(len(names)))
        chosen = min(ready, key=weight)
        order.append(chosen)
        placed |= names[chosen]
        left.remove(chosen)
    return order


_FAR = 10 ** 6  # a distance no window of a real program has: a dependence that can exceed it grows with a bound


def phases(names: set[str], dependences: isl.UnionMap) -> list[set[str]]:
    """``names`` in the order of their *long* dependences: one whose distance along the innermost dimension
    grows with a bound (a Monte Carlo return at ``t`` reads every later reward) starts a later phase. Solved
    with such a dependence, isl splits what follows it into several loops (per-step gradients computed for
    every step in one loop and consumed in the next); solved apart, each phase has only short distances and
    fuses into one loop."""
    edges: list[tuple[str, str, bool]] = []

    def visit(relation: isl.Map) -> None:
        source, target = relation.get_tuple_name(isl.dim_type.in_), relation.get_tuple_name(isl.dim_type.out)
        if source not in names or target not in names or source == target:
            return
        same = relation.set_tuple_name(isl.dim_type.in_, "X").set_tuple_name(isl.dim_type.out, "X")
        if same.dim(isl.dim_type.in_) != same.dim(isl.dim_type.out) or same.dim(isl.dim_type.in_) == 0:
            return
        deltas = same.deltas()
        coordinates = [f"d{k}" for k in range(deltas.dim(isl.dim_type.set))]
        name = deltas.get_tuple_name() if deltas.has_tuple_name() else ""
        last = coordinates[-1]
        far = isl.Set(f"{{ {name}[{', '.join(coordinates)}] : {last} > {_FAR} or {last} < -{_FAR} }}")
        edges.append((source, target, not deltas.intersect(far.align_params(deltas.get_space())).is_empty()))

    dependences.foreach_map(visit)
    phase = {name: 0 for name in names}
    for _ in range(len(names)):  # longest path by long edges; dependences run forwards, so this settles
        changed = False
        for source, target, long in edges:
            if phase[source] + long > phase[target]:
                phase[target] = phase[source] + long
                changed = True
        if not changed:
            break
    return [{n for n in names if phase[n] == k} for k in sorted(set(phase.values()))]


def union_set(sets: list[isl.Set]) -> isl.UnionSet:
    result = isl.UnionSet.from_set(sets[0])
    for item in sets[1:]:
        result = result.union(isl.UnionSet.from_set(item))
    return result
