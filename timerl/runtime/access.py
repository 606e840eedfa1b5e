"""Evaluating dependence expressions at a point: which producer points an edge reads.

Shared by the reference interpreter and the scheduled executor. Bound symbols are replaced by their
values once, and every index expression becomes one compiled Python function of the consumer's point.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence

from timerl.errors import ShapeError
from timerl.pdg.graph import Edge, Graph, Range
from timerl.symbolic import TRUE, Cond, Symbol, compile_function


class EdgeReader:
    """Producer points read by ``edge`` at a consumer point, in row-major order of its ranges."""

    def __init__(self, edge: Edge, consumer_domain: Sequence[Symbol], bounds: Mapping[Symbol, int]) -> None:
        self.edge = edge
        exprs = []
        self.kinds: list[int] = []  # 0: point, else the step of a range
        for item in edge.index:
            if isinstance(item, Range):
                exprs += [item.start.substitute(bounds), item.stop.substitute(bounds)]
                self.kinds.append(item.step)
            else:
                exprs.append(item.expr.substitute(bounds))
                self.kinds.append(0)
        self.has_ranges = any(self.kinds)
        self._index = compile_function(tuple(exprs), tuple(consumer_domain))
        condition = edge.condition.substitute(bounds)
        self._condition = None if condition is TRUE else compile_function((condition,), tuple(consumer_domain))

    def active(self, point: Sequence[int]) -> bool:
        return self._condition is None or bool(self._condition(*point)[0])

    def point_read(self, point: Sequence[int]) -> tuple[int, ...]:
        """The producer point an edge without ranges reads (`coordinates`, without building a list)."""
        return self._index(*point)

    def coordinates(self, point: Sequence[int]) -> list[int | range]:
        values = self._index(*point)
        coords: list[int | range] = []
        k = 0
        for step in self.kinds:
            if step:
                coords.append(range(values[k], values[k + 1], step))
                k += 2
            else:
                coords.append(values[k])
                k += 1
        return coords

    def points(self, point: Sequence[int]) -> tuple[list[tuple[int, ...]], tuple[int, ...]]:
        coords = self.coordinates(point)
        if not self.has_ranges:
            return [tuple(coords)], ()  # type: ignore[arg-type]
        axes = [c if isinstance(c, range) else (c,) for c in coords]
        lengths = tuple(len(c) for c in coords if isinstance(c, range))
        return list(itertools.product(*axes)), lengths


def condition_function(cond: Cond, domain: Sequence[Symbol], bounds: Mapping[Symbol, int]):
    cond = cond.substitute(bounds)
    if cond is TRUE:
        return None
    function = compile_function((cond,), tuple(domain))
    return lambda point: bool(function(*point)[0])


def point_dict(domain: Sequence[Symbol], point: Sequence[int]) -> dict[str, int]:
    return {d.name: int(c) for d, c in zip(domain, point)}


def stack_range(values: list[Any], lengths: tuple[int, ...], graph: Graph, edge: Edge, backend: Any) -> Any:
    """The points of a range read, stacked: range dimensions first, in index order."""
    if not values:
        produced = graph.nodes[edge.producer].outputs[edge.output]
        if not all(isinstance(d, int) for d in produced.shape):
            raise ShapeError(f"empty range read of {graph.nodes[edge.producer].label()}, whose shape is dynamic")
        return backend.zeros(lengths + tuple(produced.shape), produced.dtype)
    stacked = backend.stack(values)
    if len(lengths) > 1:
        stacked = backend.xp.reshape(stacked, lengths + tuple(stacked.shape[1:]))
    return stacked


def empty_stats(compile_seconds: float) -> dict[str, float]:
    """`exe.stats` before the first run: the fields SPEC.md promises."""
    return {"peak_device_bytes": 0, "peak_host_bytes": 0, "bytes_offloaded": 0, "bytes_fetched": 0,
            "compile_seconds": compile_seconds, "execute_seconds": 0.0}
