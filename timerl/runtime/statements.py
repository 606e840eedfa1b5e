"""Which loops may run statement-major (`timerl.runtime.batch`): the dependences between a loop's statements,
and whether running each statement over the whole loop, in body order, respects them."""

from __future__ import annotations

from timerl.pdg.graph import Graph, identity_read
from timerl.sched import ast


def statement_dependences(graph: Graph, groups: dict) -> tuple[dict[int, set[int]], dict[int, set[int]], dict]:
    """For each group: the groups it reads from, and the groups whose reads must precede its deallocation;
    for each (member, output): the groups whose reads must precede a deallocation of that output alone."""
    group_of = {m: g.id for g in groups.values() for m in g.members}
    reads: dict[int, set[int]] = {g: set() for g in groups}
    readers: dict[int, set[int]] = {g: set() for g in groups}
    output_readers: dict[tuple[int, int], set[int]] = {}
    for group in groups.values():
        for member_id in group.members:
            member = graph.nodes[member_id]
            for edge in member.inputs:
                source = group_of.get(edge.producer)
                if source is None:
                    continue
                if source == group.id and identity_read(edge, member, graph.nodes[edge.producer]):
                    continue
                reads[group.id].add(source)
                readers[source].add(group.id)
                output_readers.setdefault((edge.producer, edge.output), set()).add(group.id)
    return reads, readers, output_readers


def flatten(body: ast.AstNode, conditions: tuple = ()) -> list[tuple[tuple, ast.AstNode]] | None:
    """The statements of a loop body with the conditions guarding each; None if the body has inner loops or
    if-else branches (kept as they are)."""
    if isinstance(body, ast.Sequence):
        leaves = []
        for child in body.body:
            inner = flatten(child, conditions)
            if inner is None:
                return None
            leaves.extend(inner)
        return leaves
    if isinstance(body, ast.If):
        then = flatten(body.then, conditions + (body.cond,))
        if body.orelse is None or then is None:
            return then
        orelse = flatten(body.orelse, conditions + (~body.cond,))
        return None if orelse is None else then + orelse
    if isinstance(body, (ast.Execute, ast.Deallocate)):
        return [(conditions, body)]
    return None


def freed_parts(node: ast.Deallocate, graph: Graph) -> tuple[tuple[int, tuple[int, ...], int], ...]:
    """A deallocation of some outputs (`timeline.Freed`): (member, outputs freed, number of outputs)."""
    return tuple((member, outputs, len(graph.nodes[member].outputs)) for member, outputs in node.parts)


def statement_major(leaves: list[tuple[tuple, ast.AstNode]], reads: dict, readers: dict,
                    output_readers: dict) -> bool:
    """Whether running each statement over the whole loop, in body order, respects every dependence: each
    dependence between statements of the body must go from an earlier statement to a later one."""
    position: dict[tuple, int] = {}  # ("S", group) or ("F", group, parts)
    for index, (_, leaf) in enumerate(leaves):
        key = ("S", leaf.node) if isinstance(leaf, ast.Execute) else ("F", leaf.node, leaf.parts)
        if key in position:
            return False  # one statement split in pieces: keep the loop as isl ordered it
        position[key] = index
    for (kind, group, *parts), index in position.items():
        if kind == "S":
            sources = [("S", g) for g in reads[group]]
        elif parts[0] is None:
            sources = [("S", group)] + [("S", g) for g in readers[group]]
        else:  # some outputs only: their own readers
            sources = [("S", group)] + [("S", g) for member, outputs in parts[0] for k in outputs
                                        for g in output_readers.get((member, k), ())]
        for source in sources:
            at = position.get(source)
            if at is not None and (at >= index or source == (kind, group)):
                return False
    return True
