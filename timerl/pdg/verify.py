"""The PDG checker: runs after graph construction and after every pass (with checks on)."""

from __future__ import annotations

from typing import Mapping

from timerl.errors import DomainError, ShapeError, TimeRLError
from timerl.ops.registry import MERGE, OPS, Unsupported, same_dim
from timerl.pdg.graph import Graph, Point, Range, TensorType
from timerl.symbolic import Symbol


def verify(graph: Graph, bounds: Mapping[Symbol, int] | None = None, after: str = "construction") -> None:
    """Shapes, dtypes and domains agree with the op rules; reads stay inside producers' boxes where that is
    provable without running (constant indices). ``after`` names the pass that produced the graph."""
    for node in graph.nodes:
        if node.op not in OPS:
            raise TimeRLError(f"after {after}: {node.label()} uses an unknown op {node.op!r}")
        if node.category is MERGE and not node.inputs:
            raise DomainError(f"{node.label()}: placeholder is never assigned")
        for edge in node.inputs:
            producer = graph.nodes[edge.producer]
            if len(edge.index) != len(producer.domain):
                raise TimeRLError(f"after {after}: {node.label()} indexes {producer.label()} with "
                                  f"{len(edge.index)} expressions for {len(producer.domain)} dimensions")
            free = set()
            for item in edge.index:
                free |= {s for s in item.symbols() if not s.is_bound}
            if not free <= set(node.domain):
                raise TimeRLError(f"after {after}: {node.label()} reads with symbols outside its domain")
            if bounds is not None:
                _check_constant_reads(graph, node, edge, producer, bounds)
        rule = OPS[node.op]
        if isinstance(rule.shape, Unsupported) or not rule.category.checked:
            continue
        inputs = [_read_type(graph, e) for e in node.inputs]
        expected = rule.infer(inputs, node.attrs)
        for got, want in zip(node.outputs, expected):
            if got.dtype != want.dtype or len(got.shape) != len(want.shape) or not all(
                    same_dim(a, b) for a, b in zip(got.shape, want.shape)):
                raise ShapeError(f"after {after}: {node.label()} declares {got}, its rules give {want}")


def _read_type(graph: Graph, edge) -> TensorType:
    produced = graph.nodes[edge.producer].outputs[edge.output]
    lengths = tuple(item.length() for item in edge.index if isinstance(item, Range))
    lengths = tuple(d.constant_value() if d.constant_value() is not None else d for d in lengths)
    return TensorType(lengths + tuple(produced.shape), produced.dtype)


def _check_constant_reads(graph: Graph, node, edge, producer, bounds: Mapping[Symbol, int]) -> None:
    for dim, item in zip(producer.domain, edge.index):
        size = bounds[graph.bound_of(dim)]
        if isinstance(item, Point):
            expr = item.expr.substitute(bounds)
            value = expr.constant_value()
            if value is not None and not 0 <= value < size:
                raise DomainError(f"{node.label()} reads {producer.label()} at {dim.name} = {item.expr} = {value}, "
                                  f"outside 0 <= {dim.name} < {size}")
        else:
            start, stop = item.start.substitute(bounds).constant_value(), item.stop.substitute(bounds).constant_value()
            if start is not None and stop is not None and stop > start and (start < 0 or stop > size):
                raise DomainError(f"{node.label()} reads {producer.label()} over {dim.name} in {item}, "
                                  f"outside 0 <= {dim.name} < {size}")
