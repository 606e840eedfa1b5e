"""Symbolic boolean conditions over dimensions and bounds: comparisons, and, or, not.

Split from `timerl.symbolic` (integer expressions), which re-exports every name here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from timerl.errors import user_location
from timerl.symbolic import Expr, IntLike, Symbol, SymbolicError, as_expr, non_affine_part

# ---- conditions -------------------------------------------------------------------------------------------


class Cond:
    """A boolean condition over symbols."""

    __slots__ = ()

    def __and__(self, other: Cond | bool) -> Cond:
        return conjunction(self, as_cond(other))

    __rand__ = __and__

    def __or__(self, other: Cond | bool) -> Cond:
        return disjunction(self, as_cond(other))

    __ror__ = __or__

    def __invert__(self) -> Cond:
        return negation(self)

    def __bool__(self) -> bool:
        raise SymbolicError(
            f"{user_location()}: the symbolic condition `{self}` has no truth value while the program is being "
            "defined; use `with ctx.when(cond):` or `trl.where(cond, a, b)` instead of `if`"
        )

    def __hash__(self) -> int:
        return hash(self.key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cond) and other.key() == self.key()

    def key(self) -> tuple:
        raise NotImplementedError

    def symbols(self) -> frozenset[Symbol]:
        raise NotImplementedError

    def evaluate(self, env: Mapping[Symbol, int]) -> bool:
        raise NotImplementedError

    def substitute(self, mapping: Mapping[Symbol, IntLike]) -> Cond:
        raise NotImplementedError

    def python(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return str(self)


@dataclass(frozen=True, eq=False, repr=False)
class BoolConst(Cond):
    value: bool

    def key(self) -> tuple:
        return ("bool", self.value)

    def __bool__(self) -> bool:
        return self.value

    def symbols(self) -> frozenset[Symbol]:
        return frozenset()

    def evaluate(self, env: Mapping[Symbol, int]) -> bool:
        return self.value

    def substitute(self, mapping: Mapping[Symbol, IntLike]) -> Cond:
        return self

    def python(self) -> str:
        return str(self.value)

    def __str__(self) -> str:
        return str(self.value)


TRUE = BoolConst(True)
FALSE = BoolConst(False)

_COMPARE = {
    "<": lambda d: d < 0,
    "<=": lambda d: d <= 0,
    ">": lambda d: d > 0,
    ">=": lambda d: d >= 0,
    "==": lambda d: d == 0,
    "!=": lambda d: d != 0,
}


@dataclass(frozen=True, eq=False, repr=False)
class Compare(Cond):
    """``left op right``; kept as written for readable messages, decided on ``left - right``."""

    left: Expr
    op: str
    right: Expr

    def key(self) -> tuple:
        return ("cmp", self.op, self.left.key(), self.right.key())

    def symbols(self) -> frozenset[Symbol]:
        return self.left.symbols() | self.right.symbols()

    def evaluate(self, env: Mapping[Symbol, int]) -> bool:
        return _COMPARE[self.op](self.left.evaluate(env) - self.right.evaluate(env))

    def substitute(self, mapping: Mapping[Symbol, IntLike]) -> Cond:
        return compare(self.left.substitute(mapping), self.op, self.right.substitute(mapping))

    def python(self) -> str:
        return f"({self.left.python()} {self.op} {self.right.python()})"

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True, eq=False, repr=False)
class _Junction(Cond):
    """``And`` and ``Or``: the same structure, told apart by their tag, Python word and symbol."""

    parts: tuple[Cond, ...]
    tag = ""
    word = ""
    sign = ""

    def key(self) -> tuple:
        return (self.tag,) + tuple(p.key() for p in self.parts)

    def symbols(self) -> frozenset[Symbol]:
        return frozenset().union(*(p.symbols() for p in self.parts))

    def evaluate(self, env: Mapping[Symbol, int]) -> bool:
        decide = all if self.tag == "and" else any
        return decide(p.evaluate(env) for p in self.parts)

    def substitute(self, mapping: Mapping[Symbol, IntLike]) -> Cond:
        combine = conjunction if self.tag == "and" else disjunction
        return combine(*(part.substitute(mapping) for part in self.parts))

    def python(self) -> str:
        return "(" + f" {self.word} ".join(p.python() for p in self.parts) + ")"

    def __str__(self) -> str:
        return f" {self.sign} ".join(f"({p})" for p in self.parts)


class And(_Junction):
    tag, word, sign = "and", "and", "&"


class Or(_Junction):
    tag, word, sign = "or", "or", "|"


@dataclass(frozen=True, eq=False, repr=False)
class Not(Cond):
    part: Cond

    def key(self) -> tuple:
        return ("not", self.part.key())

    def symbols(self) -> frozenset[Symbol]:
        return self.part.symbols()

    def evaluate(self, env: Mapping[Symbol, int]) -> bool:
        return not self.part.evaluate(env)

    def substitute(self, mapping: Mapping[Symbol, IntLike]) -> Cond:
        return negation(self.part.substitute(mapping))

    def python(self) -> str:
        return f"(not {self.part.python()})"

    def __str__(self) -> str:
        return f"~({self.part})"


def as_cond(value: Cond | bool) -> Cond:
    if isinstance(value, Cond):
        return value
    if isinstance(value, bool):
        return TRUE if value else FALSE
    raise SymbolicError(f"{user_location()}: expected a symbolic condition or a bool, got {value!r}")


def compare(left: IntLike, op: str, right: IntLike) -> Cond:
    left, right = as_expr(left), as_expr(right)
    difference = (left - right).constant_value()
    if difference is not None:
        return as_cond(_COMPARE[op](difference))
    return Compare(left, op, right)


def conjunction(*conds: Cond) -> Cond:
    parts: list[Cond] = []
    for cond in conds:
        if isinstance(cond, BoolConst):
            if not cond.value:
                return FALSE
            continue
        for part in cond.parts if isinstance(cond, And) else (cond,):
            if all(part.key() != kept.key() for kept in parts):
                parts.append(part)
    if not parts:
        return TRUE
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def disjunction(*conds: Cond) -> Cond:
    parts: list[Cond] = []
    for cond in conds:
        if isinstance(cond, BoolConst):
            if cond.value:
                return TRUE
            continue
        for part in cond.parts if isinstance(cond, Or) else (cond,):
            if all(part.key() != kept.key() for kept in parts):
                parts.append(part)
    if not parts:
        return FALSE
    return parts[0] if len(parts) == 1 else Or(tuple(parts))


def negation(cond: Cond) -> Cond:
    if isinstance(cond, BoolConst):
        return as_cond(not cond.value)
    if isinstance(cond, Not):
        return cond.part
    return Not(cond)


def non_affine_in(cond: Cond) -> Expr | None:
    """The first product of symbols (``t*t``) in a condition's comparisons; None when it is quasi-affine."""
    if isinstance(cond, Compare):
        found = [non_affine_part(cond.left), non_affine_part(cond.right)]
    elif isinstance(cond, _Junction):
        found = [non_affine_in(part) for part in cond.parts]
    elif isinstance(cond, Not):
        found = [non_affine_in(cond.part)]
    else:
        found = []
    return next((product for product in found if product is not None), None)
