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

from timerl.sched import ast
from timerl.symbolic import Expr, Symbol
from timerl.symbolic_conditions import FALSE, TRUE, And, Compare, Cond, compare, conjunction


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
    while children and (moved := _at(children[0], loop.var, loop.start)) is not None:
        before.append(moved)
        children.pop(0)
    after: list[ast.AstNode] = []
    while children and last is not None and (moved := _at(children[-1], loop.var, last)) is not None:
        after.insert(0, moved)
        children.pop()
    if not before and not after:
        return loop
    nonempty = compare(loop.start, "<", loop.stop)  # the loop runs at all (TRUE where the bounds are constant)
    outside = [part if nonempty is TRUE else ast.If(nonempty, part) for part in before]
    if children:
        outside.append(ast.Loop(loop.var, loop.start, loop.stop, loop.step,
                                children[0] if len(children) == 1 else ast.Sequence(tuple(children))))
    outside.extend(part if nonempty is TRUE else ast.If(nonempty, part) for part in after)
    return ast.Sequence(tuple(outside))


def _at(node: ast.AstNode, var: Symbol, value: Expr) -> ast.AstNode | None:
    """``node`` outside the loop over ``var`` if it runs only where ``var == value`` (a guard with that
    equality among its conjuncts, no else branch), with ``var`` replaced by ``value``; else None."""
    if not isinstance(node, ast.If) or node.orelse is not None:
        return None
    parts = node.cond.parts if isinstance(node.cond, And) else (node.cond,)
    for k, part in enumerate(parts):
        if _pins(part, var, value):
            rest = conjunction(*(p.substitute({var: value}) for j, p in enumerate(parts) if j != k))
            if rest is FALSE:
                return ast.Sequence(())
            body = substitute(node.then, var, value)
            return body if rest is TRUE else ast.If(rest, body)
    return None


def _pins(cond: Cond, var: Symbol, value: Expr) -> bool:
    """Whether ``cond`` is an equality that holds at ``var == value`` and nowhere else along ``var``."""
    if not isinstance(cond, Compare) or cond.op != "==":
        return False
    difference = cond.left - cond.right
    slope = (difference.substitute({var: var + 1}) - difference).constant_value()
    return slope in (1, -1) and difference.substitute({var: value}).constant_value() == 0


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
    return type(node)(node.node, point, node.unit)  # Offload, Fetch

