"""Symbolic integer expressions and conditions: canonical forms, folding, evaluation, truthiness."""

from __future__ import annotations

import itertools

import pytest

import timerl as trl
from timerl.symbolic import (
    FALSE,
    TRUE,
    Symbol,
    compile_function,
    conjunction,
    const,
    disjunction,
    negation,
    position,
    same,
    same_all,
)

t, i = Symbol("t"), Symbol("i")
T = Symbol("T", is_bound=True)


def test_affine_simplification():
    assert (t + 1 - 1).same(t) and (t + 1 - 1) is t
    assert (t + t - t).same(t)
    assert (2 * t - t).same(t)
    assert (t - t).constant_value() == 0
    assert (3 + t + 2).same(t + 5)
    assert (t + i).same(i + t)
    assert (T - (T - t)).same(t)
    assert (t * 3 * 2).same(6 * t)
    negated = -t
    assert (-negated).same(t)
    assert not (t + 1).same(t)
    assert (t + 0).same(t) and (t * 1).same(t)


def test_constant_folding():
    assert (trl.min(3, 5) if isinstance(trl.min(3, 5), int) else trl.min(3, 5).constant_value()) == 3
    assert trl.max(t + 2, t).same(t + 2)
    assert trl.min(t + 2, t).same(t)
    assert trl.min(T, T).same(T)
    assert trl.max(t - 3, t - 1).same(t - 1)
    assert (trl.min(t, T) - trl.min(T, t)).constant_value() == 0   # arguments are ordered canonically
    assert (t % 1).constant_value() == 0
    assert (t // 1).same(t)
    assert ((t - t + 17) % 5).constant_value() == 2
    assert ((t - t + 17) // 5).constant_value() == 3
    assert ((t - t - 7) // 2).constant_value() == -4              # floor, like Python
    assert ((t - t - 7) % 3).constant_value() == 2
    assert trl.min(t, T).constant_value() is None


def test_non_affine_atoms_merge_like_terms():
    assert (t % 8 + t % 8).same(2 * (t % 8))
    assert (t // 2 - t // 2).constant_value() == 0
    assert (trl.max(0, t - 3) + 1 - 1).same(trl.max(t - 3, 0))
    assert not (t // 2).same(t % 2)


EXPRESSIONS = {
    "t+1": (lambda: t + 1, lambda a, b, n: a + 1),
    "T-1-t": (lambda: T - 1 - t, lambda a, b, n: n - 1 - a),
    "3*t-2*i": (lambda: 3 * t - 2 * i, lambda a, b, n: 3 * a - 2 * b),
    "t%8": (lambda: t % 8, lambda a, b, n: a % 8),
    "(t-5)%3": (lambda: (t - 5) % 3, lambda a, b, n: (a - 5) % 3),
    "t//2": (lambda: t // 2, lambda a, b, n: a // 2),
    "(t-5)//2": (lambda: (t - 5) // 2, lambda a, b, n: (a - 5) // 2),
    "min": (lambda: trl.min(t + 5, T - 1), lambda a, b, n: min(a + 5, n - 1)),
    "max": (lambda: trl.max(0, t - 3), lambda a, b, n: max(0, a - 3)),
    "nested": (lambda: trl.min(trl.max(t - i, 0) * 2, T) // 3, lambda a, b, n: min(max(a - b, 0) * 2, n) // 3),
    "product": (lambda: t * i + 1, lambda a, b, n: a * b + 1),
}


@pytest.mark.parametrize("name", sorted(EXPRESSIONS))
def test_evaluation(name):
    build, reference = EXPRESSIONS[name]
    expr = build()
    function = compile_function((expr,), (t, i, T))
    for a, b, n in itertools.product(range(-3, 9), range(4), (4, 10)):
        env = {t: a, i: b, T: n}
        assert expr.evaluate(env) == reference(a, b, n)
        assert function(a, b, n)[0] == reference(a, b, n)
        assert expr.substitute({T: n}).substitute({t: a, i: b}).constant_value() == reference(a, b, n)


def test_substitution_shifts():
    assert (t + 1).substitute({t: t - 1}).same(t)
    assert (T - t).substitute({t: 0}).same(T)
    assert (t % 8).substitute({t: 10}).constant_value() == 2
    assert trl.min(t + 5, T).substitute({t: 2, T: 4}).constant_value() == 4


CONDITIONS = {
    "lt": (lambda: t < 3, lambda a, n: a < 3),
    "le": (lambda: t <= T - 2, lambda a, n: a <= n - 2),
    "gt": (lambda: t > 0, lambda a, n: a > 0),
    "ge": (lambda: t + 1 >= T, lambda a, n: a + 1 >= n),
    "eq": (lambda: (t + 1) % 10 == 0, lambda a, n: (a + 1) % 10 == 0),
    "ne": (lambda: t != 2, lambda a, n: a != 2),
    "and": (lambda: (t >= 1) & (t < T - 1), lambda a, n: 1 <= a < n - 1),
    "or": (lambda: (t == 0) | (t == T - 1), lambda a, n: a in (0, n - 1)),
    "not": (lambda: ~(t < 4), lambda a, n: not a < 4),
    "mixed": (lambda: ~((t % 2 == 0) | (t > 6)) & (t != 3), lambda a, n: not (a % 2 == 0 or a > 6) and a != 3),
}


@pytest.mark.parametrize("name", sorted(CONDITIONS))
def test_conditions(name):
    build, reference = CONDITIONS[name]
    cond = build()
    function = compile_function((cond,), (t, T))
    for a, n in itertools.product(range(-2, 12), (5, 9)):
        assert cond.evaluate({t: a, T: n}) == reference(a, n)
        assert bool(function(a, n)[0]) == reference(a, n)
        assert bool(cond.substitute({t: a, T: n})) == reference(a, n)   # folds to a constant


def test_conditions_fold():
    assert (t < t + 1) is TRUE
    assert (t + 1 <= t) is FALSE
    assert conjunction(TRUE, t < 3) == (t < 3)
    assert conjunction(FALSE, t < 3) is FALSE
    assert disjunction(TRUE, t < 3) is TRUE
    assert negation(negation(t < 3)) == (t < 3)
    assert ((t < 3) & (t < 3)) == (t < 3)
    assert ((t < 3) & True) == (t < 3)
    assert ((t < 3) | False) == (t < 3)


def test_equality_builds_a_condition_without_truth_value():
    # comparisons that fold to a constant are decided; every symbolic one refuses bool(), == and != included
    assert bool(t == t) and bool(t + 1 - 1 == t) and bool(T - t == T - t)  # noqa: PLR0124
    assert not bool(t != t) and not bool(t + 1 == t)  # noqa: PLR0124
    for cond in (t == 0, t != 0, t == i, t != i, t + 1 == t + 2 - 1 + i, t < 3, (t == 0) & (i == 1)):
        with pytest.raises(trl.TimeRLError, match="ctx.when"):
            bool(cond)
        with pytest.raises(TypeError):                         # (a TypeError too, for Python's protocols)
            bool(cond)
    with pytest.raises(trl.TimeRLError, match="trl.where"):
        if t == 0:
            pass
    assert (t == 3).key() == ("cmp", "==", t.key(), const(3).key())
    assert (t == 3) != (t == 4)


def test_structural_equality_and_dictionary_keys():
    assert same(t + 1 - 1, t) and not same(t, i) and same(3, const(3)) and not same(t, 0)
    assert same_all((t, T - 1), (t, T - 1)) and not same_all((t,), (t, i)) and not same_all((t, i), (i, t))
    assert position(i, (t, i)) == 1
    with pytest.raises(ValueError):
        position(T, (t, i))
    assert {t: 1, i: 2}[t + 0] == 1           # expressions work as dictionary keys
    assert {t - 1: "a", t - 2: "b"}[t + 1 - 2] == "a"
    assert {-t: "a", -2 * t: "b"}[-2 * t] == "b"   # tuple hashes of -1 and -2 agree; ours must not
    assert hash(t + 1 - 1) == hash(t)
    assert t in {i, t} and t not in {i, T}


def test_symbols_of_the_same_name_are_distinct():
    first, second = Symbol("t"), Symbol("t")
    assert not same(first, second) and first is not second
    assert len({first, second}) == 2
    assert not same(first - second, 0)


def test_bounds_and_dimensions_are_distinct():
    ctx = trl.Context(dims="b i t")
    t_, T_ = ctx.dims[2], ctx.bounds[2]
    assert [d.name for d in ctx.dims] == ["b", "i", "t"]
    assert [d.name for d in ctx.bounds] == ["B", "I", "T"]
    assert all(d.is_bound for d in ctx.bounds) and not any(d.is_bound for d in ctx.dims)
    assert not t_.same(T_)
    assert isinstance(t_, trl.Symbol) and isinstance(t_ + 1, trl.Expr) and isinstance(t_ < T_, trl.Cond)


def test_expressions_as_python_ints():
    assert int(t - t + 4) == 4
    assert list(range(10))[t - t + 3] == 3
    with pytest.raises(TypeError):
        int(t)


def test_strings_are_readable():
    assert str(t + 1) == "t + 1"
    assert str(T - 1 - t) in ("T - t - 1", "-t + T - 1", "T - 1 - t")
    assert "min" in str(trl.min(t + 5, T)) and "%" in str(t % 8)
