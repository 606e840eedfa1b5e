"""isl's AST expressions as timerl's symbolic expressions and conditions (`timerl.sched.schedule` converts the loop
AST with them): arithmetic and comparisons, and the piecewise values (`min`, `max`, `c ? a : b`) as guarded
pieces."""

from __future__ import annotations

import islpy as isl

from timerl.errors import ScheduleError
from timerl.symbolic import Cond, Expr, compare, conjunction, const, disjunction, floordiv, maximum, minimum, mod
from timerl.sched import ast


_ARITH = {
    isl.ast_expr_op_type.add: lambda a, b: a + b,
    isl.ast_expr_op_type.sub: lambda a, b: a - b,
    isl.ast_expr_op_type.mul: lambda a, b: a * b,
    isl.ast_expr_op_type.div: floordiv,
    isl.ast_expr_op_type.fdiv_q: floordiv,
    isl.ast_expr_op_type.pdiv_q: floordiv,
    isl.ast_expr_op_type.pdiv_r: mod,
    isl.ast_expr_op_type.zdiv_r: mod,
}
_COMPARE = {
    isl.ast_expr_op_type.le: "<=", isl.ast_expr_op_type.lt: "<", isl.ast_expr_op_type.ge: ">=",
    isl.ast_expr_op_type.gt: ">", isl.ast_expr_op_type.eq: "==",
}


def isl_expr(expr: isl.AstExpr, loop_vars) -> Expr:
    """An isl expression without selects (loop bounds, conditions) as ours."""
    pieces = expr_pieces(expr, loop_vars)
    if len(pieces) > 1:
        raise ScheduleError(f"unsupported conditional isl expression {expr.to_C_str()}")
    return pieces[0][1]


# A piecewise expression: ``(guard, value)`` pairs, the value of the first whose guard (a conjunction) holds.
# The last guard is always empty, so some piece applies.
Pieces = list[tuple[tuple[Cond, ...], Expr]]


def pieces_of_all(exprs: list[isl.AstExpr], loop_vars) -> list[tuple[tuple[Cond, ...], tuple[Expr, ...]]]:
    """The pieces of a statement's point (one expression per dimension): the product of each one's pieces,
    in an order that keeps the first-match rule."""
    result: list[tuple[tuple[Cond, ...], tuple[Expr, ...]]] = [((), ())]
    for expr in exprs:
        result = [(guard + own_guard, point + (value,)) for guard, point in result
                  for own_guard, value in expr_pieces(expr, loop_vars)]
    return result


def guarded(cases: list[tuple[tuple[Cond, ...], ast.AstNode]]) -> ast.AstNode:
    """``if guard1: node1 elif guard2: node2 ... else: nodeN`` (the last guard is empty)."""
    guard, result = cases[-1]
    assert not guard, "the last piece of a piecewise expression is unguarded"
    for guard, node in reversed(cases[:-1]):
        result = ast.If(conjunction(*guard), node, result)
    return result


def expr_pieces(expr: isl.AstExpr, loop_vars) -> Pieces:
    """isl's expression as ours, split into pieces where it selects (``c ? a : b``: isl writes the point of a
    statement that way when one loop runs two pieces of its domain, e.g. an epoch's last minibatch whose
    successor is the next epoch's first)."""
    kind = expr.get_type()
    if kind == isl.ast_expr_type.int:
        return [((), const(expr.get_val().to_python()))]
    if kind == isl.ast_expr_type.id:
        return [((), loop_vars[expr.get_id().get_name()])]
    op = expr.get_op_type()
    args = [expr.get_op_arg(k) for k in range(expr.get_op_n_arg())]
    if op in (isl.ast_expr_op_type.select, isl.ast_expr_op_type.cond):
        condition = isl_cond(args[0], loop_vars)
        chosen = [((condition, *guard), value) for guard, value in expr_pieces(args[1], loop_vars)]
        return chosen + expr_pieces(args[2], loop_vars)
    if op == isl.ast_expr_op_type.minus:
        return [(guard, -value) for guard, value in expr_pieces(args[0], loop_vars)]
    if op in (isl.ast_expr_op_type.min, isl.ast_expr_op_type.max):
        combine = minimum if op == isl.ast_expr_op_type.min else maximum
        return combine_pieces(combine, args, loop_vars)
    if op in _ARITH:
        return combine_pieces(_ARITH[op], args, loop_vars)
    raise ScheduleError(f"unsupported isl expression {expr.to_C_str()}")


def combine_pieces(combine, args: list[isl.AstExpr], loop_vars) -> Pieces:
    """``combine`` folded over the arguments, piece by piece."""
    result = expr_pieces(args[0], loop_vars)
    for arg in args[1:]:
        result = [(left_guard + right_guard, combine(left, right)) for left_guard, left in result
                  for right_guard, right in expr_pieces(arg, loop_vars)]
    return result


def isl_cond(expr: isl.AstExpr, loop_vars) -> Cond:
    op = expr.get_op_type()
    args = [expr.get_op_arg(k) for k in range(expr.get_op_n_arg())]
    if op in _COMPARE:
        return compare(isl_expr(args[0], loop_vars), _COMPARE[op], isl_expr(args[1], loop_vars))
    if op in (isl.ast_expr_op_type.and_, isl.ast_expr_op_type.and_then):
        return conjunction(*(isl_cond(a, loop_vars) for a in args))
    if op in (isl.ast_expr_op_type.or_, isl.ast_expr_op_type.or_else):
        return disjunction(*(isl_cond(a, loop_vars) for a in args))
    raise ScheduleError(f"unsupported isl condition {expr.to_C_str()}")

