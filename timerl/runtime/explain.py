"""`Executable.explain`: per statement, the user's lines it holds, what it runs as and, where it is not batched,
the rule that refused, in words naming the program's property (a recurrence, a user's function) and its line.

The decisions are recorded where they are made: `batched_loop` and the jax loop scanner note, for each loop they
are offered, which statements run batched or scanned over its counter and, where they decline, why
(`Decisions.note`); a batched statement that the array library refuses at run time is noted when it happens.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from timerl.graphs import strongly_connected
from timerl.ops.categories import CONST
from timerl.pdg.graph import Graph, identity_read
from timerl.sched import ast
from timerl.symbolic import Symbol

EXPLAIN_VARIABLE = "TIMERL_EXPLAIN"  # set (to anything): every executed program prints its explanation to stderr
BATCHED, SCANNED, POINTS, ONCE = "batched", "scanned", "point by point", "once"


@dataclass
class Decision:
    """How a statement runs inside one loop: ``how`` over the loop's counter ``var``, and why not batched."""

    var: str
    how: str
    reason: str = ""


@dataclass
class Decisions:
    """Every statement's decisions, innermost loop last, and the batched runs refused at run time."""

    by_group: dict[int, list[Decision]] = field(default_factory=dict)
    fallbacks: dict[int, str] = field(default_factory=dict)

    def note(self, group: int, var: Any, how: str, reason: str = "") -> None:
        self.by_group.setdefault(group, []).append(Decision(getattr(var, "name", str(var)), how, reason))



def dependence_reason(graph: Graph, groups: dict, statement: tuple, source: tuple | None, var: Any) -> str:
    """Words for `statements.backward_dependence`'s finding in a loop over ``var``."""
    name = getattr(var, "name", str(var))
    group = groups[statement[1]]
    if source is None:
        return f"the scheduler split G{group.id} in pieces inside the loop over {name}"
    if source == statement:
        return f"a true recurrence over {name}: {_self_read(graph, group)}"
    later = groups[source[1]]
    back = _read_between(graph, later, group)
    if statement[0] == "F" or back is None:
        return (f"G{group.id} waits for G{later.id}, which runs after it in each step of {name} (isl's order "
                "around a recurrence)")
    forward = _read_between(graph, group, later)
    cycle = f", and {forward}" if forward else ""
    return f"a true recurrence over {name} through two statements: {back}{cycle}"


def _read_between(graph: Graph, producer_group: Any, consumer_group: Any) -> str | None:
    """A read of one statement's value by another, as the user wrote it; or None."""
    producers = set(producer_group.members)
    for member_id in consumer_group.members:
        node = graph.nodes[member_id]
        for edge in node.inputs:
            if edge.producer in producers:
                producer = graph.nodes[edge.producer]
                index = ", ".join(str(item) for item in edge.index)
                return (f"{node.op} ({_short(node.location)}) reads {_named(producer)} ({_short(producer.location)})"
                        f" at [{index}]")
    return None


def recurrence_of(group: int, statements: list[int], reads: dict[int, set[int]]) -> set[int]:
    """The statements of a loop body that form one recurrence with ``group`` (its strongly connected component in
    the graph of which statement reads which)."""
    inside = set(statements)
    readers: dict[int, list[int]] = {g: [] for g in inside}
    for g in inside:
        for source in reads.get(g, ()):
            if source in inside:
                readers[source].append(g)
    return next((set(c) for c in strongly_connected(readers) if group in c), {group})


def _self_read(graph: Graph, group: Any) -> str:
    """The member that reads its own statement's values at another point, as the user wrote it."""
    return _recurrence(graph, group) or f"G{group.id} reads its own values at another point"


def _recurrence(graph: Graph, group: Any) -> str | None:
    """Where a statement reads its own values at another point (a recurrence), as the user wrote it; or None."""
    members = set(group.members)
    for member_id in group.members:
        node = graph.nodes[member_id]
        for edge in node.inputs:
            producer = graph.nodes[edge.producer]
            if edge.producer in members and not identity_read(edge, node, producer):
                index = ", ".join(str(item) for item in edge.index)
                return (f"{_named(producer)} ({_short(producer.location)}) is read at [{index}] by {node.op} "
                        f"({_short(node.location)})")
    return None


def _named(node: Any) -> str:
    return f"'{node.name}'" if node.name else node.op


def _short(location: str) -> str:
    """A location relative to the working directory where it lies under it."""
    here = os.getcwd() + os.sep
    return location[len(here):] if location.startswith(here) else location


def _lines(graph: Graph, group: Any) -> list[tuple[str, str]]:
    """The user's lines a statement holds, each with its ops (a repeated op once, with its count)."""
    lines: dict[str, dict[str, int]] = {}
    for member_id in group.members:
        node = graph.nodes[member_id]
        ops = lines.setdefault(_short(node.location), {})
        ops[node.op] = ops.get(node.op, 0) + 1
    return [(location, " ".join(op if n == 1 else f"{op} x{n}" for op, n in ops.items()))
            for location, ops in lines.items()]


def _enclosing(root: ast.AstNode, groups: dict, graph: Graph) -> tuple[dict[int, tuple[str, ...]], dict[str, str]]:
    """Each statement's enclosing loop counters, outermost first, in the order the program runs them; and each
    counter's name in the program (the dimension it runs over, where a statement's point says so)."""
    found: dict[int, tuple[str, ...]] = {}
    names: dict[str, str] = {}

    def visit(node: ast.AstNode, loops: tuple[str, ...]) -> None:
        if isinstance(node, ast.Loop):
            visit(node.body, loops + (node.var.name,))
        elif isinstance(node, ast.Sequence):
            for child in node.body:
                visit(child, loops)
        elif isinstance(node, ast.If):
            visit(node.then, loops)
            if node.orelse is not None:
                visit(node.orelse, loops)
        elif isinstance(node, ast.Execute):
            found.setdefault(node.node, loops)
            domain = graph.nodes[groups[node.node].members[0]].domain
            for dim, expr in zip(domain, node.point):
                if isinstance(expr, Symbol):
                    names.setdefault(expr.name, dim.name)

    visit(root, ())
    return found, names


def explain(executable: Any) -> str:
    """The explanation, one block per statement in the order the program first runs it."""
    out = []
    for group_id, _, how, lines, size in statements(executable):
        out.append(f"G{group_id}: {how}")
        if size > 1:
            out.append(f"  fuses {size} ops of {len(lines)} line(s):")
        for location, ops in lines:
            out.append(f"  {location}: {ops}")
    return "\n".join(out)


def counts(executable: Any) -> dict[str, int]:
    """Statements by how they run (`exe.stats["statements"]`): batched, scanned, point by point, or once (per
    point of loops that hold other loops, or once in the whole program)."""
    found = {BATCHED: 0, SCANNED: 0, POINTS: 0, ONCE: 0}
    for _, kind, _, _, _ in statements(executable):
        found[kind] += 1
    return found


def statements(executable: Any) -> list[tuple[int, str, str, list, int]]:
    """Per statement that computes something: (group, how it runs in one word, the sentence, its lines, ops)."""
    graph, decisions = executable.graph, executable.decisions
    enclosing, names = _enclosing(executable.schedule.root, executable.groups, graph)
    out = []
    for group_id, counters in enclosing.items():
        group = executable.groups[group_id]
        if all(graph.nodes[m].category is CONST for m in group.members):
            continue
        loops = tuple(names.get(c, c) for c in counters)
        noted = [Decision(names.get(d.var, d.var), d.how, _renamed(d.reason, names))
                 for d in decisions.by_group.get(group_id, [])]
        fallback = decisions.fallbacks.get(group_id)
        how = _how(loops, noted, fallback)
        kind = ONCE if not loops or not noted else POINTS if fallback else noted[-1].how
        recurrence = _recurrence(graph, group) if loops and not noted else None
        if recurrence:
            how = f"point by point over ({', '.join(loops)}): a true recurrence over {loops[-1]}: {recurrence}"
            kind = POINTS
        out.append((group_id, kind, how, _lines(graph, group), len(group.members)))
    return out


def _renamed(reason: str, names: dict[str, str]) -> str:
    for counter, name in names.items():
        reason = reason.replace(f" over {counter}", f" over {name}").replace(f" of {counter}", f" of {name}")
    return reason


def _how(loops: tuple[str, ...], noted: list[Decision], fallback: str | None) -> str:
    if not loops:
        return "runs once"
    if fallback is not None:
        return f"point by point over ({', '.join(loops)}): the batched call failed at run time ({fallback})"
    if not noted:
        return (f"once per ({', '.join(loops)}): directly in the loop over {loops[-1]}, which holds other loops "
                "(they decide for their own statements)")
    last = noted[-1]
    outer = [var for var in loops if var != last.var]
    at = f" at each ({', '.join(outer)})" if outer else ""
    if last.how == BATCHED:
        return f"batched over {last.var}{at}: one call per op for every {last.var}"
    if last.how == SCANNED:
        return f"scanned over {last.var}{at}: one lax.scan"
    return f"point by point over ({', '.join(loops)}): {last.reason}"
