"""timerl's symbolic algebra against sympy as an independent oracle (property tests).

Random integer expressions over three symbols are built twice, once with timerl's operators and once as sympy
expressions (``floor``, ``Mod``, ``Min``, ``Max``). timerl's canonical forms must mean what sympy says they mean:
the same values at every point, the same constant where sympy folds to a number, `same` exactly when sympy's
difference of two affine expressions expands to zero, substitution as sympy's ``subs``, and conditions (with
their folding to TRUE/FALSE) deciding as sympy's relations do.
"""

from __future__ import annotations

import operator

import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from timerl.symbolic import FALSE, TRUE, Symbol, compare, conjunction, disjunction, maximum, minimum, negation, same

NAMES = ("a", "b", "c")
OURS = {name: Symbol(name) for name in NAMES}
THEIRS = {name: sympy.Symbol(name, integer=True) for name in NAMES}
SETTINGS = settings(max_examples=150, deadline=None)


def _binary(pair):
    """Both sides of one binary node over a pair of (timerl, sympy) operands."""
    (left, left_sym), (right, right_sym), op, constant = pair
    divisor = abs(constant) or 1
    if op == "+":
        return left + right, left_sym + right_sym
    if op == "-":
        return left - right, left_sym - right_sym
    if op == "*k":
        return left * constant, left_sym * constant
    if op == "//":
        return left // divisor, sympy.floor(left_sym / divisor)
    if op == "%":
        return left % divisor, sympy.Mod(left_sym, divisor)
    if op == "min":
        return minimum(left, right), sympy.Min(left_sym, right_sym)
    return maximum(left, right), sympy.Max(left_sym, right_sym)


LEAVES = st.one_of(
    st.sampled_from(NAMES).map(lambda name: (OURS[name], THEIRS[name])),
    st.integers(-6, 6).map(lambda k: (OURS["a"] * 0 + k, sympy.Integer(k))),
)
EXPRESSIONS = st.recursive(
    LEAVES,
    lambda inner: st.tuples(inner, inner, st.sampled_from(["+", "-", "*k", "//", "%", "min", "max"]),
                            st.integers(-4, 4)).map(_binary),
    max_leaves=8,
)
AFFINE = st.recursive(
    LEAVES,
    lambda inner: st.tuples(inner, inner, st.sampled_from(["+", "-", "*k"]), st.integers(-4, 4)).map(_binary),
    max_leaves=10,
)
POINTS = st.fixed_dictionaries({name: st.integers(-20, 20) for name in NAMES})


def _at(point):
    return {OURS[name]: value for name, value in point.items()}, {THEIRS[name]: value for name, value in point.items()}


@SETTINGS
@given(EXPRESSIONS, POINTS)
def test_values_agree_with_sympy_at_every_point(pair, point):
    ours, theirs = pair
    env, subs = _at(point)
    assert ours.evaluate(env) == int(theirs.subs(subs)), (ours, theirs)


@SETTINGS
@given(EXPRESSIONS)
def test_folded_constants_are_sympys(pair):
    ours, theirs = pair
    folded = ours.constant_value()
    if folded is not None:  # timerl folded: sympy must agree on the number
        assert sympy.simplify(theirs - folded) == 0, (ours, theirs)
    if not ours.symbols():  # no symbol left: timerl must have folded it, to sympy's number
        assert folded == int(theirs), (ours, theirs)


@SETTINGS
@given(AFFINE, AFFINE)
def test_affine_expressions_are_the_same_exactly_when_sympy_says_so(left, right):
    (ours_left, theirs_left), (ours_right, theirs_right) = left, right
    assert same(ours_left, ours_right) == (sympy.expand(theirs_left - theirs_right) == 0)


@SETTINGS
@given(EXPRESSIONS, AFFINE, POINTS)
def test_substitution_is_sympys_subs(pair, replacement, point):
    (ours, theirs), (ours_with, theirs_with) = pair, replacement
    substituted = ours.substitute({OURS["a"]: ours_with})
    expected = theirs.subs(THEIRS["a"], theirs_with)
    env, subs = _at(point)
    assert substituted.evaluate(env) == int(expected.subs(subs))


RELATIONS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
             "!=": operator.ne}
SYMPY_RELATIONS = {"<": sympy.Lt, "<=": sympy.Le, ">": sympy.Gt, ">=": sympy.Ge, "==": sympy.Eq, "!=": sympy.Ne}


def _condition(draw_pairs, ops, joins):
    """Both sides of ``(l0 op0 r0) join0 (l1 op1 r1) ...``, with negations where ``joins`` says."""
    ours_all, theirs_all = [], []
    for ((left, left_sym), (right, right_sym)), op in zip(draw_pairs, ops):
        ours_all.append(compare(left, op, right))
        theirs_all.append(SYMPY_RELATIONS[op](left_sym, right_sym))
    ours, theirs = ours_all[0], theirs_all[0]
    for join, nxt, nxt_sym in zip(joins, ours_all[1:], theirs_all[1:]):
        if join == "and":
            ours, theirs = conjunction(ours, nxt), sympy.And(theirs, nxt_sym)
        elif join == "or":
            ours, theirs = disjunction(ours, nxt), sympy.Or(theirs, nxt_sym)
        else:
            ours, theirs = conjunction(ours, negation(nxt)), sympy.And(theirs, sympy.Not(nxt_sym))
    return ours, theirs


CONDITIONS = st.integers(1, 3).flatmap(lambda n: st.tuples(
    st.lists(st.tuples(EXPRESSIONS, AFFINE), min_size=n, max_size=n),
    st.lists(st.sampled_from(sorted(RELATIONS)), min_size=n, max_size=n),
    st.lists(st.sampled_from(["and", "or", "and not"]), min_size=n - 1, max_size=n - 1),
)).map(lambda drawn: _condition(*drawn))


@SETTINGS
@given(CONDITIONS, POINTS)
def test_conditions_decide_as_sympys_relations(pair, point):
    ours, theirs = pair
    env, subs = _at(point)
    assert ours.evaluate(env) == bool(theirs.subs(subs)), (ours, theirs)


@SETTINGS
@given(CONDITIONS)
def test_conditions_fold_only_when_sympy_can_decide_them(pair):
    ours, theirs = pair
    if ours is TRUE or ours is FALSE:  # timerl decided it while building: it must hold at every point
        for point in ({"a": 0, "b": 0, "c": 0}, {"a": 7, "b": -3, "c": 11}, {"a": -13, "b": 5, "c": -2}):
            env, subs = _at(point)
            assert bool(theirs.subs(subs)) == (ours is TRUE), (ours, theirs)
