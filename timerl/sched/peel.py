"""Statements that a loop runs at one of its iterations only, moved out of the loop (loop peeling).

isl places a statement that runs once per outer iteration wherever its dependences allow, and may put it
inside an inner loop, guarded by a test of the inner counter: with the ``contributions`` pass on, REINFORCE's
logging sink lands at the first step of the learning loop over ``t``,

    for t in T .. 2*T:               for t in T .. 2*T:              if T < 2*T:  (true: not written)
      if t == T:                       learn[t - T]                    sink[i]
        sink[i]                    ->                                for t in T .. 2*T:
      learn[t - T]                                                     learn[t - T]

An executor cannot run such a loop statement by statement (`timerl.runtime.batch`, `timerl.runtime.jax_scan`)
when the guarded part holds a loop of its own (the deallocation of a whole window, here). The guarded parts at
the head of a body that run only at the first iteration run first in it anyway, so they may run before the
loop; those at the tail that run only at the last iteration, after it. Both moves keep the order of every
statement instance (and so every dependence); nothing is analysed, only the conditions are read.

isl may also place such a part after other statements of the first iteration, or before others of the last:
with ``discounted_sum(until=...)`` the returns read no window padded to ``T``, and the sink lands after the
learning statement's first point, before the frees of the later points that its stack still reads,

    for t in 0 .. T:                          if 0 < T:  sink[i]
      learn[t]                                for t in 0 .. T:
      if t == 0:                        ->      learn[t]
        sink[i]                                 if t == 0:  free r[i, 0]
        free r[i, 0]                            if t >= 1:  free r[i, t]
      if t >= 1:  free r[i, t]

Given the groups each group reads (``reads``), such a part moves out when the dependences allow it: a
statement at the first iteration moves before the loop when it reads nothing that the statements before it in
that iteration write (and, a host call, passes no other host call); one at the last iteration moves after the
loop when nothing after it in that iteration reads what it writes or frees what it reads. A deallocation that
the first iteration's earlier statements still need stays in the loop under its condition (after the loop
where it holds a loop of its own); deallocations at the last iteration follow the loop. A free only ever runs
later, never before a read of what it frees. Conditions that cannot hold together (``i == 2`` and ``i <= 1``)
are no dependence.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Collection, Mapping

from timerl.sched import ast
from timerl.symbolic import Expr, Symbol
from timerl.symbolic_conditions import FALSE, TRUE, And, Compare, Cond, Not, compare, conjunction, negation


def peel(node: ast.AstNode, reads: Mapping[int, Collection[int]] | None = None,
         effects: Collection[int] = ()) -> ast.AstNode:
    """``node`` with the once-per-loop parts of every loop's body (at its head and tail) moved out of it; with
    ``reads`` (group -> the groups it reads), also those inside the body that the dependences let move;
    ``effects``: the groups that call the host (sinks, UDFs), kept in their order."""
    if isinstance(node, ast.Sequence):
        body: list[ast.AstNode] = []
        for child in node.body:
            peeled = peel(child, reads, effects)
            body.extend(peeled.body if isinstance(peeled, ast.Sequence) else (peeled,))
        return ast.Sequence(tuple(body))
    if isinstance(node, ast.If):
        return ast.If(node.cond, peel(node.then, reads, effects),
                      None if node.orelse is None else peel(node.orelse, reads, effects))
    if isinstance(node, ast.Loop):
        return _peel_loop(ast.Loop(node.var, node.start, node.stop, node.step, peel(node.body, reads, effects)),
                          reads, frozenset(effects))
    return node


def _peel_loop(loop: ast.Loop, reads: Mapping[int, Collection[int]] | None = None,
               effects: frozenset[int] = frozenset()) -> ast.AstNode:
    children = list(loop.body.body) if isinstance(loop.body, ast.Sequence) else [loop.body]
    last = loop.stop - 1 if loop.step == 1 else None
    before: list[ast.AstNode] = []
    while children and (split := _at(children[0], loop.var, loop.start, -1)) is not None:
        before.append(split[0])
        children[0:1] = [split[1]] if split[1] is not None else []
        if split[1] is not None:
            break
    after: list[ast.AstNode] = []
    while children and last is not None and (split := _at(children[-1], loop.var, last, 1)) is not None:
        after.insert(0, split[0])
        children[-1:] = [split[1]] if split[1] is not None else []
        if split[1] is not None:
            break
    if reads is not None:
        dependences = _Dependences(reads, effects)
        first_parts, late = _move_inner(children, loop.var, loop.start, -1, dependences)
        before.extend(first_parts)
        if last is not None:
            last_parts, _ = _move_inner(children, loop.var, last, 1, dependences)
            after[0:0] = last_parts  # before the tail's parts, which ran last in the last iteration
        after.extend(late)
    if not before and not after:
        return loop
    nonempty = compare(loop.start, "<", loop.stop)  # the loop runs at all (TRUE where the bounds are constant)
    outside = [part if nonempty is TRUE else ast.If(nonempty, part) for part in before]
    if children:
        outside.append(ast.Loop(loop.var, loop.start, loop.stop, loop.step,
                                children[0] if len(children) == 1 else ast.Sequence(tuple(children))))
    outside.extend(part if nonempty is TRUE else ast.If(nonempty, part) for part in after)
    return ast.Sequence(tuple(outside))


class _Dependences:
    """Which statement instances of one iteration may pass each other (by group: a loop body's points are
    not told apart, so the answer errs towards "they may not")."""

    def __init__(self, reads: Mapping[int, Collection[int]], effects: frozenset[int]) -> None:
        self.reads, self.effects = reads, effects

    def execute_passes(self, moved: int, other: ast.AstNode, forward: bool) -> bool:
        """Whether group ``moved``'s statement may now run before ``other``, which ran before it (``forward``
        False), or after ``other``, which ran after it (True)."""
        if isinstance(other, ast.Deallocate):  # moving a statement after a free of what it reads (or writes)
            return not forward or (other.node != moved and other.node not in self.reads.get(moved, ()))
        if not isinstance(other, ast.Execute):
            return False
        if moved in self.effects and other.node in self.effects:
            return False
        if forward:  # `other` may not read what `moved` writes
            return moved not in self.reads.get(other.node, ())
        return other.node not in self.reads.get(moved, ())

    def free_passes_back(self, group: int, other: ast.AstNode) -> bool:
        """Whether a free of group ``group``'s points may run before ``other``, which ran before it."""
        if isinstance(other, ast.Deallocate):
            return True
        return isinstance(other, ast.Execute) and other.node != group and group not in self.reads.get(other.node, ())


def _move_inner(children: list[ast.AstNode], var: Symbol, value: Expr, side: int,
                dependences: _Dependences) -> tuple[list[ast.AstNode], list[ast.AstNode]]:
    """Move the parts of ``children`` (a loop body, changed in place) that run only at ``var == value`` (the
    first iteration, ``side`` -1, or the last, 1) out of the loop where the statements they pass in that
    iteration allow it: (what runs on that side of the loop, in order; deallocations that run after it)."""
    outside: list[ast.AstNode] = []
    late: list[ast.AstNode] = []
    k = 0
    while k < len(children):
        split = _at(children[k], var, value, side, with_condition=True)
        passed = children[:k] if side < 0 else children[k + 1:]
        if split is None or not passed:
            k += 1
            continue
        moved, kept, pin = split
        if not any(isinstance(node, (ast.Execute, ast.Loop)) for node in ast.every_node(moved)):
            k += 1  # frees only, which keep the loop batched where they are
            continue
        others = [leaf for child in passed for leaf in _leaves(substitute(child, var, value), ())]
        plan = _plan(_units(moved, ()), others, side, dependences)
        if plan is None:
            k += 1
            continue
        out, stay, later = plan
        outside.extend(out)
        late.extend(later)
        replacement = ([ast.If(pin, ast.Sequence(tuple(stay)))] if stay else []) + ([kept] if kept is not None else [])
        children[k:k + 1] = replacement
        k += len(replacement)
    return outside, late


def _plan(units: list[tuple[tuple, ast.AstNode]], others: list[tuple[tuple, ast.AstNode]], side: int,
          dependences: _Dependences) -> tuple[list, list, list] | None:
    """Where each unit of a part pinned to one iteration goes: (out of the loop on its side, staying in the
    loop under the part's condition, after the loop); None where a statement of it cannot pass ``others``."""
    out: list[ast.AstNode] = []
    stay: list[ast.AstNode] = []
    late: list[ast.AstNode] = []
    for conditions, unit in units:
        leaves = _leaves(unit, ())
        if not all(isinstance(leaf, (ast.Execute, ast.Deallocate)) for _, leaf in leaves):
            return None  # (offloads and fetches: not analysed)
        where = conjunction(*conditions)
        met = [other for cond, other in others if _possible(conjunction(where, *cond))]
        executes = [leaf.node for _, leaf in leaves if isinstance(leaf, ast.Execute)]
        guarded = _guarded(conditions, unit)
        if side > 0:  # frees at the last iteration may always run later
            if not all(dependences.execute_passes(g, other, True) for g in executes for other in met):
                return None
            out.append(guarded)
            continue
        if not all(dependences.execute_passes(g, other, False) for g in executes for other in met):
            return None
        frees = [leaf.node for _, leaf in leaves if isinstance(leaf, ast.Deallocate)]
        if all(dependences.free_passes_back(g, other) for g in frees for other in met):
            out.append(guarded)
        elif executes:
            return None
        elif any(isinstance(node, ast.Loop) for node in ast.every_node(unit)):
            late.append(guarded)
        else:
            stay.append(guarded)
    return out, stay, late


def _units(node: ast.AstNode, conditions: tuple) -> list[tuple[tuple, ast.AstNode]]:
    """``node``'s statements and inner loops, each with the conditions guarding it, in order."""
    if isinstance(node, ast.Sequence):
        return [unit for child in node.body for unit in _units(child, conditions)]
    if isinstance(node, ast.If):
        return _units(node.then, conditions + (node.cond,)) + (
            [] if node.orelse is None else _units(node.orelse, conditions + (negation(node.cond),)))
    return [(conditions, node)]


def _leaves(node: ast.AstNode, conditions: tuple) -> list[tuple[tuple, ast.AstNode]]:
    """Every statement under ``node``, inner loops' included, with the conditions guarding it."""
    if isinstance(node, ast.Loop):
        return _leaves(node.body, conditions)
    return [leaf for cond, unit in _units(node, conditions)
            for leaf in ([(cond, unit)] if not isinstance(unit, ast.Loop) else _leaves(unit, cond))]


def _guarded(conditions: tuple, node: ast.AstNode) -> ast.AstNode:
    for cond in reversed(conditions):
        node = ast.If(cond, node)
    return node


def _possible(cond: Cond) -> bool:
    """False where ``cond`` cannot hold: FALSE, or FALSE once a symbol one of its equalities pins is replaced
    by its value (``i == 2 and i <= 1``); True otherwise (it may hold)."""
    if cond is FALSE:
        return False
    for part in cond.parts if isinstance(cond, And) else (cond,):
        for symbol in part.symbols():
            value = pinned_value(part, symbol)
            if value is not None and cond.substitute({symbol: value}) is FALSE:
                return False
    return True


def _at(node: ast.AstNode, var: Symbol, value: Expr, side: int, with_condition: bool = False
        ) -> tuple[ast.AstNode, ast.AstNode | None] | tuple[ast.AstNode, ast.AstNode | None, Cond] | None:
    """Where ``node`` runs something only at ``var == value`` (the loop's first iteration, ``side`` -1, or its
    last, 1): that part outside the loop, with ``var`` replaced by ``value``, and what stays in the loop (None:
    nothing); else None. A branch ``if c: A else: B`` whose ``c`` or ``not c`` holds at ``value`` only gives
    that side (``A`` or ``B``) and keeps the other one guarded, which runs the same instances."""
    if not isinstance(node, ast.If):
        return None
    for cond, body, other in ((node.cond, node.then, node.orelse), (negation(node.cond), node.orelse, node.then)):
        if body is None:
            continue
        parts = cond.parts if isinstance(cond, And) else (cond,)
        for k, part in enumerate(parts):
            if _only_at(part, var, value, side):
                rest = conjunction(*(p.substitute({var: value}) for j, p in enumerate(parts) if j != k))
                moved = (ast.Sequence(()) if rest is FALSE else substitute(body, var, value) if rest is TRUE
                         else ast.If(rest, substitute(body, var, value)))
                kept = None if other is None else ast.If(negation(cond), other) if cond is node.cond else ast.If(
                    node.cond, other)
                return (moved, kept, part) if with_condition else (moved, kept)
    return None


def _only_at(cond: Cond, var: Symbol, value: Expr, side: int) -> bool:
    """Whether, among the loop's iterations (``value`` the first, ``side`` -1, or the last, 1), ``cond`` holds
    at ``value`` only: an equality of slope 1 or -1 in ``var`` holding there, or an inequality holding there
    and not at the next iteration inwards (one side of a line: it fails at every iteration further in)."""
    inner = cond.part if isinstance(cond, Not) else cond
    if not isinstance(inner, Compare):
        return False
    difference = inner.left - inner.right
    slope = (difference.substitute({var: var + 1}) - difference).constant_value()
    if slope not in (1, -1) or var in (difference - var * slope).symbols():
        return False
    if inner.op in ("==", "!="):
        return inner.op == "==" and cond is inner and _pins(inner, var, value)
    return cond.substitute({var: value}) is TRUE and cond.substitute({var: value - side}) is FALSE


def _pins(cond: Cond, var: Symbol, value: Expr) -> bool:
    """Whether ``cond`` is an equality that holds at ``var == value`` and nowhere else along ``var``."""
    pinned = pinned_value(cond, var)
    return pinned is not None and (pinned - value).constant_value() == 0


def pinned_value(cond: Cond, var: Symbol) -> Expr | None:
    """The one value of ``var`` at which ``cond`` can hold, where one of its conjuncts is an equality of
    slope 1 or -1 in ``var`` (``t - 8 == 7``: 15); else None."""
    for part in cond.parts if isinstance(cond, And) else (cond,):
        if not isinstance(part, Compare) or part.op != "==":
            continue
        difference = part.left - part.right
        slope = (difference.substitute({var: var + 1}) - difference).constant_value()
        rest = difference - var * slope if slope in (1, -1) else None
        if rest is not None and var not in rest.symbols():
            return rest * -slope
    return None


def substitute(node: ast.AstNode, var: Symbol, value: Expr) -> ast.AstNode:
    """``node`` with the counter ``var`` replaced by ``value`` in every point, condition and bound."""
    mapping = {var: value}
    if isinstance(node, ast.Sequence):
        return ast.Sequence(tuple(substitute(child, var, value) for child in node.body))
    if isinstance(node, ast.If):
        return ast.If(node.cond.substitute(mapping), substitute(node.then, var, value),
                      None if node.orelse is None else substitute(node.orelse, var, value))
    if isinstance(node, ast.Loop):
        return ast.Loop(node.var, node.start.substitute(mapping), node.stop.substitute(mapping), node.step,
                        substitute(node.body, var, value))
    point = tuple(e.substitute(mapping) for e in node.point)
    if isinstance(node, ast.Execute):
        return ast.Execute(node.node, point)
    if isinstance(node, ast.Deallocate):
        return ast.Deallocate(node.node, point, node.parts)
    return replace(node, point=point)  # Offload, Fetch: their unit, members and distance kept

