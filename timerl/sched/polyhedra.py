"""The PDG as isl objects: op domains as sets, edges as dependence relations (paper §6.1).

Slices become ranges, ``min``/``max`` become isl's piecewise case splits, ``%`` and ``//`` isl's ``mod`` and
``floor`` (isl introduces the existential variables). Bounds are known at compile time and substituted.
Statement names: ``S<id>`` computes node ``id``; ``F<id>`` frees its outputs.
"""

from __future__ import annotations

from typing import Mapping

import islpy as isl

from timerl.errors import ScheduleError
from timerl.pdg.graph import Edge, Graph, Node, Point
from timerl.symbolic import (
    Affine,
    And,
    BoolConst,
    Compare,
    Cond,
    Expr,
    FloorDiv,
    Max,
    Min,
    Mod,
    Not,
    Or,
    Symbol,
)

_ISL_COMPARE = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "=", "!=": "!="}


def isl_expr(expr: Expr, names: Mapping[Symbol, str]) -> str:
    if isinstance(expr, Symbol):
        return names[expr]
    if expr.constant_value() is not None:
        return str(expr.constant_value())
    if isinstance(expr, Affine):
        parts = [f"{coef}*({isl_expr(atom, names)})" for atom, coef in expr.terms]
        return "(" + " + ".join(parts + [str(expr.const)]) + ")"
    if isinstance(expr, FloorDiv):
        return f"floor(({isl_expr(expr.left, names)})/{isl_expr(expr.right, names)})"
    if isinstance(expr, Mod):
        return f"(({isl_expr(expr.left, names)}) mod {isl_expr(expr.right, names)})"
    if isinstance(expr, Min):
        return f"min({isl_expr(expr.left, names)}, {isl_expr(expr.right, names)})"
    if isinstance(expr, Max):
        return f"max({isl_expr(expr.left, names)}, {isl_expr(expr.right, names)})"
    raise ScheduleError(f"the dependence expression {expr} is not affine (products of dimensions are not "
                        "supported by the polyhedral scheduler)")


def isl_cond(cond: Cond, names: Mapping[Symbol, str]) -> str:
    if isinstance(cond, BoolConst):
        return "1 = 1" if cond.value else "1 = 0"
    if isinstance(cond, Compare):
        return f"{isl_expr(cond.left, names)} {_ISL_COMPARE[cond.op]} {isl_expr(cond.right, names)}"
    if isinstance(cond, And):
        return "(" + " and ".join(isl_cond(p, names) for p in cond.parts) + ")"
    if isinstance(cond, Or):
        return "(" + " or ".join(isl_cond(p, names) for p in cond.parts) + ")"
    if isinstance(cond, Not):
        return f"not ({isl_cond(cond.part, names)})"
    raise ScheduleError(f"cannot express the condition {cond} in isl")


def parse(kind, text: str):
    try:
        return kind(text)
    except isl.Error:
        raise ScheduleError(f"internal error: isl could not parse {text}") from None


class Polyhedra:
    """Domains and dependence relations of one graph, with the bounds as isl parameters.

    Keeping ``T`` symbolic makes the scheduling problem independent of the bounds' values (with them
    substituted, isl's integer programs grew with T: 35 s at T = 100 against 1 s at T = 10). The values
    are the ``context``, used for the checks and for generating the loops."""

    def __init__(self, graph: Graph, bounds: Mapping[Symbol, int]) -> None:
        self.graph = graph
        self.bounds = dict(bounds)
        self.params = "[" + ", ".join(b.name for b in graph.bounds) + "] -> "
        values = " and ".join(f"{b.name} = {self.bounds[b]}" for b in graph.bounds) or "1 = 1"
        self.context = isl.Set(f"{self.params}{{ : {values} }}")
        positive = " and ".join(f"{b.name} >= 1" for b in graph.bounds) or "1 = 1"
        self.generic_context = isl.Set(f"{self.params}{{ : {positive} }}")
        self._parsed: dict[str, isl.Set | isl.Map] = {}

    def names(self, node: Node, suffix: str = "") -> dict[Symbol, str]:
        names: dict[Symbol, str] = {b: b.name for b in self.graph.bounds}
        names.update({d: f"{d.name}{suffix}" for d in node.domain})
        return names

    def tuple_of(self, node: Node, prefix: str = "S", suffix: str = "") -> str:
        return f"{prefix}{node.id}[{', '.join(f'{d.name}{suffix}' for d in node.domain)}]"

    def box(self, node: Node, suffix: str = "") -> str:
        parts = [f"0 <= {d.name}{suffix} < {self.graph.bound_of(d).name}" for d in node.domain]
        return " and ".join(parts) if parts else "1 = 1"

    def definition(self, node: Node, prefix: str = "S") -> isl.Set:
        """The definition domain: box ∩ condition (∩ branch union for merges)."""
        cond = node.definition_condition()
        names = ", ".join(d.name for d in node.domain)
        text = f"{self.params}{{ D[{names}] : {self.box(node)} and {isl_cond(cond, self.names(node))} }}"
        return self._parse(isl.Set, text).set_tuple_name(f"{prefix}{node.id}")

    def box_set(self, node: Node) -> isl.Set:
        """Every point of the node's dimensions within the bounds, whatever its condition."""
        names = ", ".join(d.name for d in node.domain)
        return self._parse(isl.Set, f"{self.params}{{ D[{names}] : {self.box(node)} }}").set_tuple_name(f"S{node.id}")

    def read_relation(self, consumer: Node, edge: Edge) -> isl.Map:
        """{ S_consumer[q] -> S_producer[p] : the consumer at q reads p, when the edge's condition holds }."""
        producer = self.graph.nodes[edge.producer]
        q_names = self.names(consumer)
        constraints = [self.box(consumer)]
        constraints.append(isl_cond(edge.condition, q_names))
        for dim, item in zip(producer.domain, edge.index):
            p = f"{dim.name}__p"
            if isinstance(item, Point):
                constraints.append(f"{p} = {isl_expr(item.expr, q_names)}")
            else:
                start = isl_expr(item.start, q_names)
                stop = isl_expr(item.stop, q_names)
                constraints.append(f"{start} <= {p} < {stop}")
                if item.step != 1:
                    constraints.append(f"({p} - {start}) mod {item.step} = 0")
        source = ", ".join(d.name for d in consumer.domain)
        target = ", ".join(f"{d.name}__p" for d in producer.domain)
        relation = self._parse(isl.Map, f"{self.params}{{ Q[{source}] -> P[{target}] : {' and '.join(constraints)} }}")
        relation = relation.set_tuple_name(isl.dim_type.in_, f"S{consumer.id}")
        return relation.set_tuple_name(isl.dim_type.out, f"S{producer.id}")

    def _parse(self, kind, text: str):
        """Parsing is most of the cost of building the relations, and most edges of a program repeat a few
        shapes (same dimensions, same index expressions) under different statement names."""
        if text not in self._parsed:
            self._parsed[text] = parse(kind, text)
        return self._parsed[text]
