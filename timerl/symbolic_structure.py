"""Structural queries on symbolic expressions: equality by structure (``==`` builds a condition instead),
positions by structure, exact division, the affine split of an expression, and its non-affine parts.

Split from `timerl.symbolic`, which re-exports every name here.
"""

from __future__ import annotations

from typing import Sequence

from timerl.symbolic import Affine, Expr, IntLike, Product, Symbol, _Binary, _from_parts, _linear_parts, as_expr


def same(left: IntLike, right: IntLike) -> bool:
    """Structural equality of two integer expressions or ints (``==`` builds a condition instead)."""
    if isinstance(left, int) and isinstance(right, int):
        return left == right
    return as_expr(left).key() == as_expr(right).key()


def same_all(left: Sequence[IntLike], right: Sequence[IntLike]) -> bool:
    """`same` for two sequences (domains, shapes), element by element."""
    return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right))


def position(item: Expr, items: Sequence[Expr]) -> int:
    """Index of ``item`` in ``items`` by structural equality; ValueError when absent, like ``tuple.index``."""
    for at, candidate in enumerate(items):
        if same(item, candidate):
            return at
    raise ValueError(f"{item} is not among {tuple(items)}")


def non_affine_part(expr: Expr) -> Expr | None:
    """The first product of two symbolic factors inside ``expr`` (``t*t``, ``t*T``), which the polyhedral
    scheduler cannot represent; None when ``expr`` is quasi-affine (sums, constant multiples, ``//``, ``%``,
    min and max)."""
    if isinstance(expr, Product):
        return expr
    if isinstance(expr, Affine):
        parts = [atom for atom, _ in expr.terms]
    elif isinstance(expr, _Binary):
        parts = [expr.left, expr.right]
    else:
        parts = []
    for part in parts:
        found = non_affine_part(part)
        if found is not None:
            return found
    return None


def exact_division(expr: IntLike, divisor: int) -> IntLike | None:
    """``expr / divisor`` when it divides every coefficient (``(2*T - 2*t) / 2`` is ``T - t``); else None."""
    if isinstance(expr, int):
        return expr // divisor if expr % divisor == 0 else None
    constant, terms = _linear_parts(expr)
    if constant % divisor or any(coef % divisor for _, coef in terms.values()):
        return None
    return _from_parts(constant // divisor, {k: (atom, coef // divisor) for k, (atom, coef) in terms.items()})


def affine_coefficient(expr: Expr, symbol: Symbol) -> tuple[int, Expr] | None:
    """Split ``expr`` as ``coef * symbol + rest`` with ``symbol`` absent from ``rest``; None if impossible."""
    constant, terms = _linear_parts(expr)
    entry = terms.pop(symbol.key(), None)
    coef = entry[1] if entry else 0
    rest = _from_parts(constant, terms)
    if symbol in rest.symbols():
        return None
    return coef, rest
