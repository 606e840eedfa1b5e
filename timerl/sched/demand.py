"""Which points of each op run: demand from sinks and merges, checked against definition domains.

Demand flows from consumers to producers through the read relations. Sinks and merges are roots (they run
on their whole definition domain), so every dependence cycle, which always passes through a merge, is cut
where demand would flow *into* a merge. Masked gradient reads only demand points where the masking op is
*evaluable* (see docs/design.md). A demanded read outside a producer's definition domain is the compile-time
`DomainError` of SPEC.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import islpy as isl

from timerl.errors import DomainError, ScheduleError
from timerl.ops.registry import MERGE
from timerl.pdg.graph import Graph, Node
from timerl.symbolic import Symbol, conjunction
from timerl.sched.polyhedra import Polyhedra, isl_cond


@dataclass
class Demand:
    polyhedra: Polyhedra
    definition: dict[int, isl.Set]
    demand: dict[int, isl.Set]
    reads: dict[tuple[int, int], isl.Map]  # (consumer, slot) -> read relation restricted to what runs


def _is_root(node: Node) -> bool:
    return node.category.root or (node.category is MERGE and not _running(node))


def _running(node: Node) -> str | None:
    """The dimension a running sum (`timerl.pdg.incrementalize`) accumulates along, by name."""
    return node.attrs.get("running") if node.category is MERGE else None


def _prefixes(poly: Polyhedra, node: Node, points: isl.Set) -> isl.Set:
    """Every point a running sum passes through on its way to ``points``: the same point at each earlier
    step of its dimension. The recurrence is cut at the merge like any other, so its demand is closed here."""
    along = _running(node)
    source = ", ".join(d.name for d in node.domain)
    target = ", ".join(f"{d.name}__p" for d in node.domain)
    same = [f"{d.name}__p = {d.name}" for d in node.domain if d.name != along]
    text = (f"{poly.params}{{ Q[{source}] -> P[{target}] : 0 <= {along}__p <= {along}"
            + "".join(f" and {c}" for c in same) + " }")
    earlier = poly._parse(isl.Map, text).set_tuple_name(isl.dim_type.in_, f"S{node.id}")
    return points.apply(earlier.set_tuple_name(isl.dim_type.out, f"S{node.id}"))


class _Evaluable:
    """The points at which each op can be evaluated: its definition domain, less the points where an unmasked
    read lands where its producer cannot be (a merge is evaluable wherever a branch defines it). Computed on
    first use, with the relations and definitions built on first use too."""

    def __init__(self, graph: Graph, poly: Polyhedra, definition: dict[int, isl.Set] | None = None,
                 relation: dict[tuple[int, int], isl.Map] | None = None) -> None:
        self.graph, self.poly = graph, poly
        self.definition = {} if definition is None else definition
        self.relation = {} if relation is None else relation
        self.known: dict[int, isl.Set] = {}

    def definition_of(self, node_id: int) -> isl.Set:
        if node_id not in self.definition:
            self.definition[node_id] = self.poly.definition(self.graph.nodes[node_id])
        return self.definition[node_id]

    def __call__(self, node_id: int) -> isl.Set:
        if node_id in self.known:
            return self.known[node_id]
        node = self.graph.nodes[node_id]
        result = self.definition_of(node_id)
        if node.category is not MERGE:
            for slot, edge in enumerate(node.inputs):
                if edge.masked_by is not None:
                    continue
                bad_targets = self(edge.producer).complement()
                if (node_id, slot) not in self.relation:
                    self.relation[(node_id, slot)] = self.poly.read_relation(node, edge)
                bad = self.relation[(node_id, slot)].intersect_range(bad_targets).domain()
                result = result.subtract(bad)
        self.known[node_id] = result
        return result


def evaluable_everywhere(graph: Graph, bounds: Mapping[Symbol, int], candidates: set[int]) -> set[int]:
    """The ``candidates`` that can be evaluated at every point of their box (with these bounds): defined there,
    and reading, however indirectly, no point its producer does not define. A gradient contribution masked
    by such an op is present wherever it is read (`timerl.pdg.contributions`)."""
    poly = Polyhedra(graph, bounds)
    evaluable = _Evaluable(graph, poly)
    everywhere = set()
    for node_id in candidates:
        box = poly.box_set(graph.nodes[node_id]).intersect_params(poly.context)
        if box.is_subset(evaluable(node_id).intersect_params(poly.context)):
            everywhere.add(node_id)
    return everywhere


def analyze(graph: Graph, bounds: Mapping[Symbol, int]) -> Demand:
    poly = Polyhedra(graph, bounds)
    definition = {n.id: poly.definition(n) for n in graph.nodes}
    relation = {(n.id, k): poly.read_relation(n, e) for n in graph.nodes for k, e in enumerate(n.inputs)}
    evaluable_set = _Evaluable(graph, poly, definition, relation)

    demand: dict[int, isl.Set] = {}
    for node_id in _consumers_first(graph):
        node = graph.nodes[node_id]
        if _is_root(node):
            demand[node_id] = definition[node_id]
        else:
            demand.setdefault(node_id, isl.Set.empty(definition[node_id].get_space()))
            if _running(node):
                demand[node_id] = _prefixes(poly, node, demand[node_id]).intersect(definition[node_id])
        here = demand[node_id]
        for slot, edge in enumerate(node.inputs):
            read = relation[(node_id, slot)].intersect_domain(here)
            if edge.masked_by is not None:
                read = read.intersect_range(_as_space(evaluable_set(edge.masked_by), edge.producer, poly))
            producer = graph.nodes[edge.producer]
            wanted = read.range()
            outside = wanted.subtract(definition[edge.producer]).intersect_params(poly.context)
            if not outside.is_empty():
                raise _domain_error(node, producer, outside, read)
            relation[(node_id, slot)] = read
            if not _is_root(producer):
                demand[edge.producer] = demand.get(edge.producer, isl.Set.empty(wanted.get_space())).union(wanted)
    for node in graph.nodes:
        if node.category is MERGE:
            _check_branches(poly, node)
    return Demand(poly, definition, {k: v.coalesce() for k, v in demand.items()},
                  {k: v.coalesce() for k, v in relation.items()})


def _as_space(evaluable: isl.Set, producer_id: int, poly: Polyhedra) -> isl.Set:
    """The evaluable set of the masking op, renamed to the producer's tuple (they share dimensions)."""
    producer = poly.graph.nodes[producer_id]
    return evaluable.set_tuple_name(f"S{producer.id}")


def _consumers_first(graph: Graph) -> list[int]:
    """A topological order with every consumer before its producers, ignoring edges into merges; a running
    sum's merge comes after its readers, except the recurrence that reads it back."""
    pending = {n.id: 0 for n in graph.nodes}
    producers_of: dict[int, list[int]] = {n.id: [] for n in graph.nodes}
    for node in graph.nodes:
        for edge in node.inputs:
            producer = graph.nodes[edge.producer]
            if producer.category is MERGE and (not _running(producer) or node.id in {e.producer for e in producer.inputs}):
                continue
            pending[edge.producer] += 1
            producers_of[node.id].append(edge.producer)
    ready = [n for n, count in pending.items() if count == 0]
    order = []
    while ready:
        node_id = ready.pop()
        order.append(node_id)
        for producer in producers_of[node_id]:
            pending[producer] -= 1
            if pending[producer] == 0:
                ready.append(producer)
    if len(order) != len(graph.nodes):
        stuck = [graph.nodes[n].label() for n, count in pending.items() if count > 0]
        raise ScheduleError("dependence cycle that passes through no placeholder: " + "; ".join(stuck[:4]))
    return order


def _domain_error(consumer: Node, producer: Node, outside: isl.Set, read: isl.Map) -> DomainError:
    point = outside.sample_point()
    coords = [point.get_coordinate_val(isl.dim_type.set, k).to_python() for k in range(len(producer.domain))]
    where = ", ".join(f"{d.name}={c}" for d, c in zip(producer.domain, coords))
    readers = read.intersect_range(isl.Set.from_point(point)).domain().sample_point()
    at = [readers.get_coordinate_val(isl.dim_type.set, k).to_python() for k in range(len(consumer.domain))]
    by = ", ".join(f"{d.name}={c}" for d, c in zip(consumer.domain, at))
    what = "no branch defines that point" if producer.category is MERGE else "outside its domain"
    return DomainError(f"{consumer.label()} at ({by}) reads {producer.label()} at ({where}): {what}")


def _check_branches(poly: Polyhedra, node: Node) -> None:
    box = poly.definition(node)
    conditions = [e.condition for e in node.inputs]
    for first in range(len(conditions)):
        for second in range(first + 1, len(conditions)):
            both = conjunction(node.condition, conditions[first], conditions[second])
            text = f"{poly.params}{{ {poly.tuple_of(node)} : {poly.box(node)} and {isl_cond(both, poly.names(node))} }}"
            overlap = isl.Set(text).intersect(box).intersect_params(poly.context)
            if not overlap.is_empty():
                raise DomainError(f"{node.label()}: branches {first} and {second} both define {overlap}")
