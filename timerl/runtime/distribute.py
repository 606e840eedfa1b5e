"""Loop distribution around recurrences (Kennedy and Allen's loop fission), so that what does not recur runs
batched (`timerl.runtime.batch`).

A loop whose body holds a recurrence runs point by point, and with it everything isl placed beside it: a PPO
rollout's step (the environment reads the action, the next observation is read back) and the critic's value of
each observation, which nothing in the step needs (`timerl.sched.group._recurrent_tail` made it a statement of
its own). The body's statements are split by the strongly connected components of their dependences: each
component that recurs (a statement reading itself at another point, or statements reading each other) stays a
loop run point by point, in the body's order; the others run after what they read, as loops that run
statement by statement, each statement at every point in one call:

    for t in 0 .. T:                       for t in 0 .. T:
      step[t]                                step[t]
      value[t]                ->           for t in 0 .. T:         (vectorized)
      free step[t - 1]                       value[t]
                                           ...

Every dependence goes from an earlier loop to a later one, or stays inside one loop in the body's order, so
every value is computed before it is read; a deallocation joins the first loop after everything it waits for,
so values are still freed as early as the new order allows. Loops are distributed only where that makes a
batched statement; nothing changes elsewhere.

Statements that call the host keep their order, iteration by iteration, where the host may couple them outside
the dependences: a call that hands the host a value (a sink, a UDF) and a call that takes one from it (a source,
a UDF) may be a sink publishing weights that a later iteration's source reads (MuZero's learner feeding
self-play), so two such calls are one component, with whatever lies between them (and so, through them, every
call coupled to either). Two sinks, or two sources, have no such relation: a sink returns nothing the program
reads, a source reads nothing the program computes, so each goes where its dependences let it (a logging sink
batched after a rollout whose source it does not feed).
"""

from __future__ import annotations

import heapq
from typing import Callable, Mapping

from timerl.graphs import strongly_connected
from timerl.sched import ast
from timerl.runtime.statements import flatten, leaf_key, sources, statement_major
from timerl.symbolic import Symbol, minimum

POINTS, BATCHED = "points", "batched"  # how a distributed loop runs


def distribute(node: ast.AstNode, dependences: tuple, batchable: Callable[[int], bool],
               host_calls: Mapping[int, tuple[bool, bool]] = {}, split: bool | Callable[[list[int]], bool] = True,
               chunk: Callable[[list[int]], int | None] = lambda groups: None) -> ast.AstNode:
    """``node`` with every loop that cannot run batched as it is (a statement recurs, or cannot be batched),
    but whose body splits into loops of which one could, distributed (with ``split``, or where ``split(groups)``
    holds for the groups the loop executes); ``dependences`` as
    `statement_dependences` gives them, ``batchable(group)``: whether a group's statement runs batched;
    ``host_calls``: the groups that call the host, each with (hands it a value, takes one from it): coupled
    pairs keep their order (module docstring). ``chunk(groups)``: the most points of a loop
    whose batched statements are ``groups`` to run at once (None: all), for loops that run batched as they are
    and for distributed ones (`_strip_mined`)."""
    if isinstance(node, ast.Sequence):
        return ast.Sequence(tuple(distribute(child, dependences, batchable, host_calls, split, chunk)
                                  for child in node.body))
    if isinstance(node, ast.If):
        return ast.If(node.cond, distribute(node.then, dependences, batchable, host_calls, split, chunk),
                      None if node.orelse is None else distribute(node.orelse, dependences, batchable, host_calls,
                                                                  split, chunk))
    if not isinstance(node, ast.Loop):
        return node
    leaves = flatten(node.body)
    if leaves is None:
        return ast.Loop(node.var, node.start, node.stop, node.step,
                        distribute(node.body, dependences, batchable, host_calls, split, chunk))
    executed = [leaf.node for _, leaf in leaves if isinstance(leaf, ast.Execute)]
    if not executed:
        return node
    if statement_major(leaves, *dependences) and all(batchable(g) for g in executed):  # runs batched as it is
        points = chunk(executed)
        return node if points is None else _strip_mined(node, [node.body], points)
    splits = split(executed) if callable(split) else split
    loops = _split(leaves, dependences, batchable, host_calls) if splits else None
    if loops is None:
        return node
    bodies = []
    for kind, members in loops:
        if kind == POINTS:  # the body's own order and nesting, without the statements that moved out
            bodies.append(_prune(node.body, {id(leaves[k][1]) for k in members}))
        else:  # the order the dependences give, each statement under its own conditions
            bodies.append(ast.Sequence(tuple(_guarded(*leaves[k]) for k in members)))
    batched = [leaves[k][1].node for kind, members in loops if kind == BATCHED for k in members
               if isinstance(leaves[k][1], ast.Execute)]
    return _strip_mined(node, bodies, chunk(batched))


def _strip_mined(loop: ast.Loop, bodies: list[ast.AstNode], points: int | None) -> ast.AstNode:
    """Consecutive loops over ``loop``'s points with these bodies, run in chunks of at most ``points`` points
    (strip mining): every loop over one chunk, then every loop over the next. Valid wherever the loops one after
    the other are: every dependence of the original loop goes from a point to the same or a later one (its
    step is positive), so it goes from an earlier chunk, or inside one chunk from an earlier loop or an earlier
    point of the same loop, as before."""
    if points is None:
        loops = tuple(ast.Loop(loop.var, loop.start, loop.stop, loop.step, body) for body in bodies)
        return loops[0] if len(loops) == 1 else ast.Sequence(loops)
    first = Symbol(f"{loop.var.name}_chunk")
    stop = minimum(first + points * loop.step, loop.stop)
    inner = tuple(ast.Loop(loop.var, first, stop, loop.step, body) for body in bodies)
    return ast.Loop(first, loop.start, loop.stop, points * loop.step, ast.Sequence(inner))


def _split(leaves: list, dependences: tuple, batchable: Callable[[int], bool],
           host_calls: Mapping[int, tuple[bool, bool]] = {}) -> list[tuple[str, list[int]]] | None:
    """The loops the body distributes into, as (kind, leaf indices), or None where distributing makes no
    batched statement (or a batched loop would not run statement by statement: one split in pieces, say), or
    where nothing recurs and some statement cannot batch. A body without a recurrence whose statements all batch
    but read each other against the body's order (a window reading a later step of a statement isl placed after
    it) becomes one batched loop in the order the dependences give. A statement that does not
    recur but cannot run batched (it holds a merge, a draw, a UDF) runs point by point, in a loop of its own
    where that lets the others run batched."""
    keys = [leaf_key(leaf) for _, leaf in leaves]
    positions: dict[tuple, list[int]] = {}  # a statement split in pieces (under different conditions): each
    for k, key in enumerate(keys):
        positions.setdefault(key, []).append(k)
    before = [{j for s in sources(key, *dependences) for j in positions.get(s, ())} for key in keys]
    for coupled in _coupled_calls(keys, host_calls):  # one component each (module docstring): each call waits
        for previous, k in zip(coupled[-1:] + coupled[:-1], coupled):  # for the previous, the first for the last
            before[k].add(previous)
    components = _components(before)
    component_of = {k: c for c, members in enumerate(components) for k in members}
    frees = {k for k, key in enumerate(keys) if key[0] == "F"}
    loops: list[tuple[str, list[int]]] = []
    loop_of: dict[int, int] = {}
    recurrent = False
    for c in _topological(components, before, component_of):
        members = components[c]
        if all(k in frees for k in members):
            continue  # placed below, after everything it waits for
        recurs = len(members) > 1 or any(k in before[k] for k in members)
        recurrent = recurrent or recurs
        kind = POINTS if recurs or not all(batchable(keys[k][1]) for k in members if k not in frees) else BATCHED
        if not loops or loops[-1][0] != kind:
            loops.append((kind, []))
        loops[-1][1].extend(members)
        loop_of.update((k, len(loops) - 1) for k in members)
    reordered = not recurrent and all(kind == BATCHED for kind, _ in loops)  # one batched loop, dependences' order
    if not reordered and (not recurrent or len(loops) < 2 or all(kind == POINTS for kind, _ in loops)):
        return None  # (without a recurrence, isl's order frees values sooner: a window's points, say)
    for k in sorted(frees):
        if k not in loop_of:
            target = max((loop_of[s] for s in before[k]), default=0)
            loops[target][1].append(k)
            loop_of[k] = target
    for kind, members in loops:
        if kind == POINTS:
            members.sort()
        elif not statement_major([leaves[k] for k in members], *dependences):
            return None
    return loops


def _coupled_calls(keys: list[tuple], host_calls: Mapping[int, tuple[bool, bool]]) -> list[list[int]]:
    """The body's host calls (indices into ``keys``) in sets that must keep their order: a call handing the host
    a value and a call taking one from it are coupled, and so is everything coupled to either; sets of one left
    out."""
    calls = [k for k, key in enumerate(keys) if key[0] == "S" and key[1] in host_calls]
    joined = {k: [k] for k in calls}  # call -> the set it is in (shared lists)
    for a_index, a in enumerate(calls):
        hands_a, takes_a = host_calls[keys[a][1]]
        for b in calls[a_index + 1:]:
            hands_b, takes_b = host_calls[keys[b][1]]
            if ((hands_a and takes_b) or (hands_b and takes_a)) and joined[a] is not joined[b]:
                merged = sorted(joined[a] + joined[b])
                for k in merged:
                    joined[k] = merged
    unique = {id(members): members for members in joined.values()}
    return [members for members in unique.values() if len(members) > 1]


def _components(before: list[set[int]]) -> list[list[int]]:
    """Strongly connected components of the graph ``s -> k`` for ``s`` in ``before[k]``, each sorted."""
    after: dict[int, list[int]] = {k: [] for k in range(len(before))}
    for k, sources_of in enumerate(before):
        for s in sources_of:
            after[s].append(k)
    return strongly_connected(after)


def _topological(components: list[list[int]], before: list[set[int]], component_of: dict[int, int]) -> list[int]:
    """The components in an order every dependence respects, earliest in the body first where both may go."""
    waiting = {c: {component_of[s] for k in members for s in before[k]} - {c} for c, members in enumerate(components)}
    ready = [(components[c][0], c) for c, deps in waiting.items() if not deps]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, c = heapq.heappop(ready)
        order.append(c)
        for other, deps in waiting.items():
            if c in deps:
                deps.discard(c)
                if not deps:
                    heapq.heappush(ready, (components[other][0], other))
    return order


def _prune(node: ast.AstNode, keep: set[int]) -> ast.AstNode | None:
    """``node`` with only the statements in ``keep`` (by identity); None where nothing is left."""
    if isinstance(node, ast.Sequence):
        body = tuple(child for child in (_prune(c, keep) for c in node.body) if child is not None)
        return ast.Sequence(body) if body else None
    if isinstance(node, ast.If):
        then = _prune(node.then, keep)
        orelse = None if node.orelse is None else _prune(node.orelse, keep)
        if then is None and orelse is None:
            return None
        if then is None:
            return ast.If(~node.cond, orelse)
        return ast.If(node.cond, then, orelse)
    return node if id(node) in keep else None


def _guarded(conditions: tuple, leaf: ast.AstNode) -> ast.AstNode:
    for cond in reversed(conditions):
        leaf = ast.If(cond, leaf)
    return leaf
