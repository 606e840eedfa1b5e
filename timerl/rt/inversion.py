"""Inverting a dependence: which consumer points read a producer point (paper §5.1, "t:T inverts into 0:t+1").

Used by symbolic backpropagation (`timerl.rt.autodiff`) to sum gradient contributions.
"""

from __future__ import annotations

from timerl.errors import TimeRLError
from timerl.pdg.graph import Edge, IndexItem, Point, Range
from timerl.rt.context import NodeDraft
from timerl.symbolic import (
    FALSE,
    TRUE,
    Affine,
    And,
    Compare,
    Cond,
    Expr,
    FloorDiv,
    Max,
    Min,
    Mod,
    Symbol,
    affine_coefficient,
    as_expr,
    compare,
    conjunction,
    maximum,
    minimum,
    same,
)


# ---- inverting a read --------------------------------------------------------------------------------------
#
# A consumer c at point q reads x at f(q); the gradient of x at p sums over {q : p in f(q)}. Per dimension
# of x (p is x's coordinate there, q the one consumer dimension its index mentions, Q its bound):
#
#   forward index at q                 consumer points q reading p        only where
#   k  (no consumer dim)               (no constraint on q)                p == k
#   a*q + k   (a = 1, -1, >1, <-1)     q = (p - k) / a                     a divides p - k
#   min(q + k, B)                      q = p - k            | q in B-k:Q   p < B | p == B
#   max(q + k, B)                      q = p - k            | q in 0:B-k+1 p > B | p == B
#   (q + k) % m                        q in (p - k) % m : Q : m            p < m
#   (q + k) // m                       q in m*p - k : m*p - k + m
#   range a(q):b(q), a and b each a constant, q + k, min(q + k, B) or max(q + k, B) (nondecreasing in q):
#                                      q in (least q with b(q) > p) : (greatest q with a(q) <= p) + 1
#                                      e.g. t:T -> 0:p+1, 0:t+1 -> p:Q, t:min(t+n,T) -> p-n+1:p+1,
#                                      max(0,t-3):t+1 -> p:p+4, 0:T -> 0:Q (with a <= p < b)
#   a consumer dim no index mentions   q in 0:Q  (c over (i, t) reading w[i] sums over t)
#   q == k in a merge branch condition q = k
#
# A "|" means two inputs of the accumulation, each with its own condition on p. Ranges are clipped to the
# consumer's box; points outside it are never evaluable, so the mask drops them. A range read also gives a
# window entry: the contribution at q is a stack over the range, and p sits at (p - a(q)) // step in it.


Alternative = tuple[Cond, dict[Symbol, IndexItem]]


def invert_read(edge: Edge, consumer: NodeDraft, producer: NodeDraft,
                bounds: dict[Symbol, Symbol]) -> list[tuple[Cond, tuple[IndexItem, ...]]]:
    """(condition on the producer's point p, index of consumer points q reading p) pairs covering f^-1(p)."""
    alternatives: list[Alternative] = [(TRUE, {})]
    for dim, item in zip(producer.domain, edge.index):
        try:
            pieces = _invert_item(item, dim, bounds)
        except _NotInvertible as error:
            read = ", ".join(str(i) for i in edge.index)
            raise TimeRLError(f"{consumer.location}: cannot differentiate the read [{read}] of a tensor over "
                              f"({', '.join(d.name for d in producer.domain)}): {error}") from None
        alternatives = [_combine(a, b) for a in alternatives for b in pieces]
    for dim, value in _pinned(edge.condition, consumer.domain):
        alternatives = [(cond, {dim: Point(value), **index}) for cond, index in alternatives]
    result = []
    for condition, index in alternatives:
        if condition is FALSE:
            continue
        items = tuple(_clip(index.get(q, Range(as_expr(0), bounds[q])), bounds[q]) for q in consumer.domain)
        result.append((condition, items))
    return result


class _NotInvertible(Exception):
    pass


def _combine(left: Alternative, right: Alternative) -> Alternative:
    condition = conjunction(left[0], right[0])
    index = dict(left[1])
    for dim, item in right[1].items():
        if dim not in index:
            index[dim] = item
        elif isinstance(item, Point) and isinstance(index[dim], Point):
            condition = conjunction(condition, compare(index[dim].expr, "==", item.expr))
        else:
            raise _NotInvertible(f"dimension {dim.name} is read through a range in two places")
    return condition, index


def _pinned(condition: Cond, domain: tuple[Symbol, ...]) -> list[tuple[Symbol, Expr]]:
    """``q == k`` conjuncts of a branch condition: the branch only reads at that consumer point."""
    parts = condition.parts if isinstance(condition, And) else (condition,)
    pins = []
    for part in parts:
        if isinstance(part, Compare) and part.op == "==":
            for dim, other in ((part.left, part.right), (part.right, part.left)):
                if isinstance(dim, Symbol) and any(same(dim, d) for d in domain) and not _dims(other):
                    pins.append((dim, other))
                    break
    return pins


def _dims(expr: Expr) -> set[Symbol]:
    return {s for s in expr.symbols() if not s.is_bound}


def _invert_item(item: IndexItem, p: Symbol, bounds: dict[Symbol, Symbol]) -> list[Alternative]:
    if isinstance(item, Range):
        return _invert_range(item, p, bounds)
    expr = item.expr
    dims = _dims(expr)
    if not dims:
        return [(compare(p, "==", expr), {})]
    if len(dims) > 1:
        raise _NotInvertible(f"the index {expr} mixes several dimensions")
    (q,) = dims
    split = affine_coefficient(expr, q)
    if split is not None:
        coef, k = split
        if coef == 1:
            return [(TRUE, {q: Point(p - k)})]
        if coef == -1:
            return [(TRUE, {q: Point(k - p)})]
        gap, size = (p - k, coef) if coef > 0 else (k - p, -coef)
        return [(compare(gap % size, "==", 0), {q: Point(gap // size)})]
    if isinstance(expr, (Min, Max)):
        inner, limit = _shifted_and_limit(expr, q)
        k = inner - q
        if isinstance(expr, Min):
            return [(compare(p, "<", limit), {q: Point(p - k)}),
                    (compare(p, "==", limit), {q: Range(limit - k, bounds[q])})]
        return [(compare(p, ">", limit), {q: Point(p - k)}),
                (compare(p, "==", limit), {q: Range(as_expr(0), limit - k + 1)})]
    if isinstance(expr, (Mod, FloorDiv)) and expr.right.constant_value() is not None:
        size = expr.right.constant_value()
        k = _shift(expr.left, q)
        if isinstance(expr, Mod):
            first = p if k.constant_value() == 0 else (p - k) % size
            return [(compare(p, "<", size), {q: Range(first, bounds[q], size)})]
        return [(TRUE, {q: Range(p * size - k, p * size - k + size)})]
    raise _NotInvertible(f"the index {expr} is not one of the invertible forms (see timerl/rt/inversion.py)")


def _shift(expr: Expr, q: Symbol) -> Expr:
    """``k`` for ``expr == q + k`` (``k`` free of dimensions); otherwise not invertible."""
    split = affine_coefficient(expr, q)
    if split is None or split[0] != 1 or _dims(split[1]):
        raise _NotInvertible(f"{expr} is not {q.name} + constant")
    return split[1]


def _shifted_and_limit(expr: Min | Max, q: Symbol) -> tuple[Expr, Expr]:
    """``(q + k, B)`` for ``min/max(q + k, B)`` in either order."""
    for inner, limit in ((expr.left, expr.right), (expr.right, expr.left)):
        if q in inner.symbols() and not _dims(limit):
            _shift(inner, q)
            return inner, limit
    raise _NotInvertible(f"{expr} is not min/max({q.name} + constant, constant)")


def _invert_range(item: Range, p: Symbol, bounds: dict[Symbol, Symbol]) -> list[Alternative]:
    if item.step != 1:
        raise _NotInvertible("strided range reads are not differentiable")
    dims = _dims(item.start) | _dims(item.stop)
    if not dims:
        return [(conjunction(_at_least(p, item.start), _below(p, item.stop, bounds[p])), {})]
    if len(dims) > 1:
        raise _NotInvertible(f"the range {item} mixes several dimensions")
    (q,) = dims
    result = []
    for low_condition, low in _first_reaching(item.stop, p, q, bounds[p]):
        for high_condition, high in _last_starting(item.start, p, q, bounds[q]):
            result.append((conjunction(low_condition, high_condition), {q: Range(low, high)}))
    return result


def _first_reaching(stop: Expr, p: Symbol, q: Symbol, bound: Symbol) -> list[tuple[Cond, Expr]]:
    """Pieces of the least q with ``stop(q) > p``."""
    zero = as_expr(0)
    if q not in stop.symbols():
        return [(_below(p, stop, bound), zero)]
    if isinstance(stop, (Min, Max)):
        inner, limit = _shifted_and_limit(stop, q)
        first = p - (inner - q) + 1
        if isinstance(stop, Min):
            return [(_below(p, limit, bound), first)]
        return [(compare(p, "<", limit), zero), (compare(p, ">=", limit), first)]
    return [(TRUE, p - _shift(stop, q) + 1)]


def _last_starting(start: Expr, p: Symbol, q: Symbol, bound: Symbol) -> list[tuple[Cond, Expr]]:
    """Pieces of one past the greatest q with ``start(q) <= p``."""
    if q not in start.symbols():
        return [(_at_least(p, start), as_expr(bound))]
    if isinstance(start, (Min, Max)):
        inner, limit = _shifted_and_limit(start, q)
        after = p - (inner - q) + 1
        if isinstance(start, Max):
            return [(_at_least(p, limit), after)]
        return [(compare(p, ">=", limit), as_expr(bound)), (compare(p, "<", limit), after)]
    return [(TRUE, p - _shift(start, q) + 1)]


def _at_least(p: Symbol, value: Expr) -> Cond:
    constant = as_expr(value).constant_value()
    return TRUE if constant is not None and constant <= 0 else compare(p, ">=", value)


def _below(p: Symbol, value: Expr, bound: Symbol) -> Cond:
    return TRUE if as_expr(value).same(bound) else compare(p, "<", value)


def _clip(item: IndexItem, bound: Symbol) -> IndexItem:
    if isinstance(item, Point):
        return item
    start = item.start if _nonnegative(item.start) else maximum(item.start, 0)
    stop = item.stop if item.stop.same(bound) or _at_most(item.stop, bound) else minimum(item.stop, bound)
    return Range(start, stop, item.step)


def _nonnegative(expr: Expr) -> bool:
    if isinstance(expr, (Symbol, Mod)):
        return True
    if isinstance(expr, Affine):
        return expr.const >= 0 and all(c >= 0 and isinstance(a, (Symbol, Mod)) for a, c in expr.terms)
    return False


def _at_most(expr: Expr, bound: Symbol) -> bool:
    return isinstance(expr, Min) and (expr.left.same(bound) or expr.right.same(bound))
