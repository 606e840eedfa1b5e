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


def leaf_key(leaf: ast.AstNode) -> tuple:
    """A loop body's statement as the dependence analysis names it: ("S", group) or ("F", group, parts)."""
    return ("S", leaf.node) if isinstance(leaf, ast.Execute) else ("F", leaf.node, leaf.parts)


def sources(key: tuple, reads: dict, readers: dict, output_readers: dict) -> list[tuple]:
    """The statements that must run before statement ``key`` at the points it touches: the groups a
    statement reads; for a deallocation, the group that stored the values and the groups reading them."""
    kind, group, *parts = key
    if kind == "S":
        return [("S", g) for g in reads[group]]
    if parts[0] is None:
        return [("S", group)] + [("S", g) for g in readers[group]]
    return [("S", group)] + [("S", g) for member, outputs in parts[0] for k in outputs  # some outputs only
                             for g in output_readers.get((member, k), ())]


def statement_major(leaves: list[tuple[tuple, ast.AstNode]], reads: dict, readers: dict,
                    output_readers: dict) -> bool:
    """Whether running each statement over the whole loop, in body order, respects every dependence: each
    dependence between statements of the body must go from an earlier statement to a later one. A deallocation
    split in pieces under different conditions (isl placed the first point's apart) may run piece by piece:
    nothing reads what it frees, so each piece only has to follow what it waits for."""
    return backward_dependence(leaves, reads, readers, output_readers) is None


def backward_dependence(leaves: list[tuple[tuple, ast.AstNode]], reads: dict, readers: dict,
                        output_readers: dict) -> tuple[tuple, tuple] | None:
    """What keeps a loop from running statement-major (`statement_major`): ``(statement, source)``, a statement
    of the body and one it must follow that runs at or after it in the body (the same key twice: the statement
    reads itself at another point, a recurrence; a source of None: isl split the statement in pieces), or None."""
    position: dict[tuple, int] = {}  # ("S", group) or ("F", group, parts)
    pieces: list[tuple[tuple, int]] = []  # every deallocation's pieces
    for index, (_, leaf) in enumerate(leaves):
        key = leaf_key(leaf)
        if key[0] == "F":
            pieces.append((key, index))
            position.setdefault(key, index)
            continue
        if key in position:
            return key, None  # one statement split in pieces: keep the loop as isl ordered it
        position[key] = index
    checked = [(key, index) for key, index in position.items() if key[0] == "S"] + pieces
    for key, index in checked:
        for source in sources(key, reads, readers, output_readers):
            at = position.get(source)
            if at is not None and (at >= index or source == key):
                return key, source
    return None
