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
"""

from __future__ import annotations

from dataclasses import replace

from timerl.sched import ast
from timerl.symbolic import Expr, Symbol
from timerl.symbolic_conditions import FALSE, TRUE, And, Compare, Cond, Not, compare, conjunction, negation


def peel(node: ast.AstNode) -> ast.AstNode:
    """``node`` with the once-per-loop parts of every loop's body (at its head and tail) moved out of it."""
    if isinstance(node, ast.Sequence):
        body: list[ast.AstNode] = []
        for child in node.body:
            peeled = peel(child)
            body.extend(peeled.body if isinstance(peeled, ast.Sequence) else (peeled,))
        return ast.Sequence(tuple(body))
    if isinstance(node, ast.If):
        return ast.If(node.cond, peel(node.then), None if node.orelse is None else peel(node.orelse))
    if isinstance(node, ast.Loop):
        return _peel_loop(ast.Loop(node.var, node.start, node.stop, node.step, peel(node.body)))
    return node


def _peel_loop(loop: ast.Loop) -> ast.AstNode:
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
    if not before and not after:
        return loop
    nonempty = compare(loop.start, "<", loop.stop)  # the loop runs at all (TRUE where the bounds are constant)
    outside = [part if nonempty is TRUE else ast.If(nonempty, part) for part in before]
    if children:
        outside.append(ast.Loop(loop.var, loop.start, loop.stop, loop.step,
                                children[0] if len(children) == 1 else ast.Sequence(tuple(children))))
    outside.extend(part if nonempty is TRUE else ast.If(nonempty, part) for part in after)
    return ast.Sequence(tuple(outside))


def _at(node: ast.AstNode, var: Symbol, value: Expr, side: int) -> tuple[ast.AstNode, ast.AstNode | None] | None:
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
                return moved, kept
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

