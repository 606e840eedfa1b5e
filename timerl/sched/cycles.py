"""A dependence cycle named the way its author wrote it: the user lines of the reads that close it.

Given the ops whose points depend on themselves, the cycles among them are found op by op, shortest first,
starting from the reads that reach *ahead* (a point later than the reader's own along the first dimension
where they differ: ``q.frozen(t + 1)`` read at ``t``), since a recurrence only ever closes through one. Each
cycle is shown as the reads along it that move between points, by the line that created the reading op;
reads at the reader's own point (the arithmetic of one step) are left out, unless the whole cycle is at one
point. The full list of ops stays on
the error (`ScheduleError.ops`) for whoever wants it.
"""

from __future__ import annotations

from collections import deque

from timerl.errors import ScheduleError
from timerl.pdg.graph import Edge, Graph, Node, Point, Range
from timerl.symbolic import as_expr

MAX_CYCLES = 3
MAX_READS = 4


def cycle_error(graph: Graph, cyclic: set[int]) -> ScheduleError:
    """The `ScheduleError` for the ops ``cyclic`` whose points depend on themselves."""
    cycles = _shortest_cycles(graph, cyclic)
    lines = []
    for number, cycle in enumerate(cycles[:MAX_CYCLES], 1):
        moving = [step for step in cycle if step[2] is not False or not _at_own_point(graph, step[0], step[1])]
        reads = list(dict.fromkeys(_describe(graph, *step) for step in (moving or cycle)))
        shown = reads[:MAX_READS] + ([f"... and {len(reads) - MAX_READS} more reads"] if len(reads) > MAX_READS else [])
        lines.append(f"  cycle {number} ({len(cycle)} ops):\n" + "\n".join(f"    {read}" for read in shown))
    ops = [graph.nodes[n].label() for n in sorted(cyclic)]
    more = f"\n  ({len(cycles) - MAX_CYCLES} longer cycles not shown)" if len(cycles) > MAX_CYCLES else ""
    message = ("no valid execution order: a point depends on itself. The reads that close the cycle, shortest "
               "cycle first (a read of a later point is marked 'ahead'):\n" + "\n".join(lines) + more +
               f"\n  (the {len(ops)} ops involved are listed in this error's .ops)")
    error = ScheduleError(message)
    error.ops = ops
    return error


def _shortest_cycles(graph: Graph, cyclic: set[int]) -> list[list[tuple[Node, Edge, bool | None]]]:
    """Op-level cycles among ``cyclic``, each a list of (reader, edge, reads ahead?), shortest first: one
    through every read that reaches ahead (or, if none does, through every op), duplicates dropped."""
    reads = {n: [e for e in graph.nodes[n].inputs if e.producer in cyclic] for n in cyclic}
    starts = [(n, e) for n in sorted(cyclic) for e in reads[n] if _ahead(graph, graph.nodes[n], e) is not False]
    if not starts:
        starts = [(n, e) for n in sorted(cyclic) for e in reads[n]]
    found, seen = [], set()
    for reader, edge in starts:
        path = _path(reads, edge.producer, reader)
        if path is None:
            continue
        cycle = [(graph.nodes[reader], edge)] + [(graph.nodes[n], e) for n, e in path]
        key = frozenset((node.id, id(e)) for node, e in cycle)
        if key in seen:
            continue
        seen.add(key)
        found.append([(node, e, _ahead(graph, node, e)) for node, e in cycle])
    found.sort(key=len)
    return found


def _path(reads: dict[int, list[Edge]], start: int, goal: int) -> list[tuple[int, Edge]] | None:
    """The shortest chain of reads from op ``start`` to op ``goal`` (breadth first), as (reader, edge)."""
    came: dict[int, tuple[int, Edge] | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            break
        for edge in reads[node]:
            if edge.producer not in came:
                came[edge.producer] = (node, edge)
                queue.append(edge.producer)
    if goal not in came:
        return None
    chain, node = [], goal
    while came[node] is not None:
        reader, edge = came[node]
        chain.append((reader, edge))
        node = reader
    return chain[::-1]


def _ahead(graph: Graph, reader: Node, edge: Edge) -> bool | None:
    """Whether ``edge`` reads a later point than the reader's own (None: cannot tell, a non-constant shift)."""
    producer = graph.nodes[edge.producer]
    own = {id(d): d for d in reader.domain}
    for dim, item in zip(producer.domain, edge.index):
        if id(dim) not in own:
            continue
        if isinstance(item, Point):
            shift = (as_expr(item.expr) - dim).constant_value()
            if shift is None:
                return None
            if shift:
                return shift > 0
        elif isinstance(item, Range):
            last = (as_expr(item.stop) - 1 - dim).constant_value()
            return None if last is None else (last > 0 or None)
    return False


def _at_own_point(graph: Graph, reader: Node, edge: Edge) -> bool:
    producer = graph.nodes[edge.producer]
    if len(edge.index) != len(producer.domain):
        return False
    return all(isinstance(item, Point) and (as_expr(item.expr) - dim).constant_value() == 0
               for dim, item in zip(producer.domain, edge.index))


def _describe(graph: Graph, reader: Node, edge: Edge, ahead: bool | None) -> str:
    producer = graph.nodes[edge.producer]
    index = ", ".join(str(item) for item in edge.index)
    mark = "  <- ahead" if ahead else ("  <- maybe ahead" if ahead is None else "")
    where = ", ".join(d.name for d in reader.domain)
    return (f"{reader.location}: {reader.op} at ({where}) reads [{index}] of {producer.name or producer.op} "
            f"(created at {producer.location}){mark}")


__all__ = ["cycle_error"]
