"""Symbolic integer and boolean expressions over dimensions and their bounds.

Integer expressions are kept in one canonical form, an affine sum ``const + sum(coef * atom)``, where an
atom is a `Symbol` or a non-affine node (`FloorDiv`, `Mod`, `Min`, `Max`, `Product`). Smart constructors
fold constants and merge like terms, so ``t + 1 - 1`` *is* ``t`` and structural equality is cheap.

Python's ``==`` on expressions builds a condition (``t == 0``), like every other comparison, and no
condition has a truth value (``if t == 0:`` would silently pick a branch while the program is recorded).
Internal code asks for structural equality explicitly: `same`, `same_all`, `position`. Expressions stay
usable as dictionary keys and set members: their hash is structural and collision-resistant, and two
structurally equal expressions compare to the constant `TRUE` (their difference folds to 0), so a lookup
never asks a symbolic condition for its truth value. Every `Symbol` is distinct from every other one, even
one of the same name (two contexts may both have a ``t``).
"""

from __future__ import annotations

import itertools
import numbers
from dataclasses import dataclass, field
from typing import Any, Mapping, Union

from timerl.errors import ArgumentError, TimeRLError, bool_argument, user_location

IntLike = Union[int, "Expr"]

_SYMBOL_IDS = itertools.count()


class SymbolicError(TimeRLError, TypeError):
    """A symbolic expression used where it has no meaning (``t % T``, ``if t > 0:``); a TypeError too, so
    Python's protocols (``operator.index``, ``bool``) keep working."""


_TENSOR_MAKER: list = []  # how an expression becomes a scalar tensor: registered by the tensor layer above


def register_tensor_maker(make) -> None:
    """Called once by `timerl.rt.apply` (which sits above this module): ``make(expr)`` is the scalar tensor of
    ``expr``'s value at each point, in the active context."""
    _TENSOR_MAKER[:] = [make]


def as_tensor(expr: Expr):
    """``expr`` as a scalar int64 tensor of its value at each point (``T - t`` at ``t = 3``, ``T = 10``: 7)."""
    if not _TENSOR_MAKER:
        raise SymbolicError(f"{user_location()}: {expr} is not a tensor here: import timerl first")
    return _TENSOR_MAKER[0](expr)


def _integral(value: object) -> bool:
    if isinstance(value, Expr) or isinstance(value, int) and not isinstance(value, bool):
        return True
    return type(value).__module__ == "numpy" and getattr(value, "dtype", None) is not None and \
        value.dtype.kind in "iu" and getattr(value, "ndim", 1) == 0


def _tensor_op(expr: Expr, name: str, other: object, integral: bool = False):
    """``expr <op> other`` with ``expr`` as a scalar tensor, where ``other`` is a Python or NumPy scalar (a float,
    or with ``integral`` an int or expression too); NotImplemented otherwise, so that a tensor's reflected
    operator runs (``T * loss``) and anything else fails as Python would."""
    if isinstance(other, (float, bool)) or integral and _integral(other) or \
            type(other).__module__ == "numpy" and getattr(other, "ndim", 1) == 0:
        return getattr(as_tensor(expr), name)(other)
    return NotImplemented


class Expr:
    """An integer expression. Subclasses are frozen; build them with the operators and helpers here."""

    __slots__ = ()

    # ---- construction -------------------------------------------------------------------------------
    # With ints and expressions the result is an expression; with a float (or a tensor, through its reflected
    # operator) it is a scalar tensor of the expression's value at each point, as are ``/`` and ``**``
    # (``loss / T``, ``gamma ** (T - t)``): `as_tensor`.
    def __add__(self, other: IntLike) -> Expr:
        return add(self, other) if _integral(other) else _tensor_op(self, "__add__", other)

    def __radd__(self, other: IntLike) -> Expr:
        return add(other, self) if _integral(other) else _tensor_op(self, "__radd__", other)

    def __sub__(self, other: IntLike) -> Expr:
        return add(self, mul(other, -1)) if _integral(other) else _tensor_op(self, "__sub__", other)

    def __rsub__(self, other: IntLike) -> Expr:
        return add(other, mul(self, -1)) if _integral(other) else _tensor_op(self, "__rsub__", other)

    def __neg__(self) -> Expr:
        return mul(self, -1)

    def __mul__(self, other: IntLike) -> Expr:
        return mul(self, other) if _integral(other) else _tensor_op(self, "__mul__", other)

    def __rmul__(self, other: IntLike) -> Expr:
        return mul(other, self) if _integral(other) else _tensor_op(self, "__rmul__", other)

    def __truediv__(self, other):
        return _tensor_op(self, "__truediv__", other, integral=True)

    def __rtruediv__(self, other):
        return _tensor_op(self, "__rtruediv__", other, integral=True)

    def __pow__(self, other):
        return _tensor_op(self, "__pow__", other, integral=True)

    def __rpow__(self, other):
        return _tensor_op(self, "__rpow__", other, integral=True)

    def astype(self, dtype: str):
        """The expression as a scalar tensor of ``dtype``: ``(t + 1).astype("float32")``."""
        return as_tensor(self).astype(dtype)

    def __floordiv__(self, other: int) -> Expr:
        return floordiv(self, other)

    def __mod__(self, other: int) -> Expr:
        return mod(self, other)

    def __lt__(self, other: IntLike) -> Cond:
        return compare(self, "<", other)

    def __le__(self, other: IntLike) -> Cond:
        return compare(self, "<=", other)

    def __gt__(self, other: IntLike) -> Cond:
        return compare(self, ">", other)

    def __ge__(self, other: IntLike) -> Cond:
        return compare(self, ">=", other)

    def __eq__(self, other: object) -> Cond:  # type: ignore[override]
        if isinstance(other, numbers.Integral) and not isinstance(other, int):
            other = int(other)  # a NumPy integer
        if not isinstance(other, (int, Expr)):
            return _not_comparable(other)
        return compare(self, "==", other)

    def __ne__(self, other: object) -> Cond:  # type: ignore[override]
        if isinstance(other, numbers.Integral) and not isinstance(other, int):
            other = int(other)  # a NumPy integer
        if not isinstance(other, (int, Expr)):
            return _not_comparable(other)
        return compare(self, "!=", other)

    def __hash__(self) -> int:
        cached = self.__dict__.get("_hash")
        if cached is None:
            # repr, not the key tuple: CPython hashes -1 and -2 alike, so ``-t`` and ``-2*t`` would collide
            # and a dict lookup would then need the truth value of ``-t == -2*t``
            cached = hash(repr(self.key()))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict:
        return {name: value for name, value in self.__dict__.items() if name != "_hash"}  # str hash is per process

    def __index__(self) -> int:
        value = self.constant_value()
        if value is None:
            raise SymbolicError(f"{user_location()}: symbolic expression {self} has no concrete integer value")
        return value

    __int__ = __index__

    # ---- queries --------------------------------------------------------------------------------------
    def key(self) -> tuple:
        raise NotImplementedError

    def same(self, other: IntLike) -> bool:
        """Structural equality (the canonical form makes it semantic for affine expressions)."""
        return as_expr(other).key() == self.key()

    def constant_value(self) -> int | None:
        return None

    def symbols(self) -> frozenset[Symbol]:
        raise NotImplementedError

    def evaluate(self, env: Mapping[Symbol, int]) -> int:
        raise NotImplementedError

    def substitute(self, mapping: Mapping[Symbol, IntLike]) -> Expr:
        raise NotImplementedError

    def python(self) -> str:
        """Python source computing the expression from variables named like its symbols."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return str(self)


@dataclass(frozen=True, eq=False, repr=False)
class Symbol(Expr):
    """A dimension (``t``) or the bound of one (``T``): ``0 <= t < T``."""

    name: str
    is_bound: bool = False
    uid: int = field(default_factory=lambda: next(_SYMBOL_IDS))

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ArgumentError(f"{user_location()}: a symbol's name must be an identifier, got {self.name!r}")
        bool_argument("is_bound", self.is_bound)

    def key(self) -> tuple:
        return ("sym", self.name, self.is_bound, self.uid)

    def symbols(self) -> frozenset[Symbol]:
        return frozenset((self,))

    def evaluate(self, env: Mapping[Symbol, int]) -> int:
        try:
            return env[self]
        except KeyError:
            raise KeyError(f"no value for symbol {self.name}") from None

    def substitute(self, mapping: Mapping[Symbol, IntLike]) -> Expr:
        replacement = mapping.get(self)
        return self if replacement is None else as_expr(replacement)

    def python(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False, repr=False)
class Affine(Expr):
    """``const + sum(coef * atom)``; atoms sorted by key, no zero coefficients."""

    const: int
    terms: tuple[tuple[Expr, int], ...]

    def key(self) -> tuple:
        return ("aff", self.const, tuple((atom.key(), coef) for atom, coef in self.terms))

    def constant_value(self) -> int | None:
        return self.const if not self.terms else None

    def symbols(self) -> frozenset[Symbol]:
        out: frozenset[Symbol] = frozenset()
        for atom, _ in self.terms:
            out |= atom.symbols()
        return out

    def evaluate(self, env: Mapping[Symbol, int]) -> int:
        return self.const + sum(coef * atom.evaluate(env) for atom, coef in self.terms)

    def substitute(self, mapping: Mapping[Symbol, IntLike]) -> Expr:
        result: Expr = Affine(self.const, ())
        for atom, coef in self.terms:
            result = add(result, mul(atom.substitute(mapping), coef))
        return result

    def python(self) -> str:
        parts = [f"{coef}*{atom.python()}" for atom, coef in self.terms]
        return "(" + " + ".join(parts + [str(self.const)]) + ")"

    def __str__(self) -> str:
        parts = []
        for atom, coef in self.terms:
            text = str(atom) if coef == 1 else f"-{atom}" if coef == -1 else f"{coef}*{atom}"
            parts.append(text)
        if self.const or not parts:
            parts.append(str(self.const))
        text = " + ".join(parts).replace("+ -", "- ")
        return text


@dataclass(frozen=True, eq=False, repr=False)
class _Binary(Expr):
    left: Expr
    right: Expr
    tag = ""

    def key(self) -> tuple:
        return (self.tag, self.left.key(), self.right.key())

    def symbols(self) -> frozenset[Symbol]:
        return self.left.symbols() | self.right.symbols()

    def substitute(self, mapping: Mapping[Symbol, IntLike]) -> Expr:
        return _BUILDERS[self.tag](self.left.substitute(mapping), self.right.substitute(mapping))


class FloorDiv(_Binary):
    tag = "//"

    def python(self) -> str:
        return f"({self.left.python()} // {self.right.python()})"

    def evaluate(self, env: Mapping[Symbol, int]) -> int:
        return self.left.evaluate(env) // self.right.evaluate(env)

    def __str__(self) -> str:
        return f"({self.left}) // {self.right}"


class Mod(_Binary):
    tag = "%"

    def python(self) -> str:
        return f"({self.left.python()} % {self.right.python()})"

    def evaluate(self, env: Mapping[Symbol, int]) -> int:
        return self.left.evaluate(env) % self.right.evaluate(env)

    def __str__(self) -> str:
        return f"({self.left}) % {self.right}"


class Min(_Binary):
    tag = "min"

    def python(self) -> str:
        return f"min({self.left.python()}, {self.right.python()})"

    def evaluate(self, env: Mapping[Symbol, int]) -> int:
        return min(self.left.evaluate(env), self.right.evaluate(env))

    def __str__(self) -> str:
        return f"min({self.left}, {self.right})"


class Max(_Binary):
    tag = "max"

    def python(self) -> str:
        return f"max({self.left.python()}, {self.right.python()})"

    def evaluate(self, env: Mapping[Symbol, int]) -> int:
        return max(self.left.evaluate(env), self.right.evaluate(env))

    def __str__(self) -> str:
        return f"max({self.left}, {self.right})"


class Product(_Binary):
    tag = "*"

    def python(self) -> str:
        return f"({self.left.python()} * {self.right.python()})"

    def evaluate(self, env: Mapping[Symbol, int]) -> int:
        return self.left.evaluate(env) * self.right.evaluate(env)

    def __str__(self) -> str:
        return f"({self.left}) * ({self.right})"


# ---- smart constructors ---------------------------------------------------------------------------------


def _not_comparable(other: object) -> Any:
    """``t == 2.0``: a float is refused, as by ``<`` (Python's fallback would make it silently False);
    other objects (None, strings) are left to Python, which compares them unequal."""
    if isinstance(other, numbers.Number):
        raise SymbolicError(f"{user_location()}: a dimension compares with integers and integer expressions, got "
                            f"{other!r}")
    return NotImplemented


def as_expr(value: IntLike) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import numpy as np

            if isinstance(value, np.integer):
                return Affine(int(value), ())
        except ImportError:  # pragma: no cover
            pass
        raise SymbolicError(f"{user_location()}: expected an integer or a symbolic expression, got {value!r}")
    return Affine(value, ())


def const(value: int) -> Expr:
    return Affine(int(value), ())


def _linear_parts(expr: Expr) -> tuple[int, dict[tuple, tuple[Expr, int]]]:
    if isinstance(expr, Affine):
        return expr.const, {atom.key(): (atom, coef) for atom, coef in expr.terms}
    return 0, {expr.key(): (expr, 1)}


def _from_parts(constant: int, terms: dict[tuple, tuple[Expr, int]]) -> Expr:
    kept = sorted(((atom, coef) for atom, coef in terms.values() if coef), key=lambda item: item[0].key())
    if constant == 0 and len(kept) == 1 and kept[0][1] == 1:
        return kept[0][0]
    return Affine(constant, tuple(kept))


def add(left: IntLike, right: IntLike) -> Expr:
    left_const, left_terms = _linear_parts(as_expr(left))
    right_const, right_terms = _linear_parts(as_expr(right))
    for key, (atom, coef) in right_terms.items():
        old = left_terms.get(key, (atom, 0))[1]
        left_terms[key] = (atom, old + coef)
    return _from_parts(left_const + right_const, left_terms)


def mul(left: IntLike, right: IntLike) -> Expr:
    left, right = as_expr(left), as_expr(right)
    factor = right.constant_value()
    if factor is None:
        factor, left, right = left.constant_value(), right, left
    if factor is None:
        return Product(*sorted((left, right), key=lambda e: e.key()))
    constant, terms = _linear_parts(left)
    return _from_parts(constant * factor, {k: (a, c * factor) for k, (a, c) in terms.items()})


def floordiv(left: IntLike, right: IntLike) -> Expr:
    left, right = as_expr(left), as_expr(right)
    a, b = left.constant_value(), right.constant_value()
    if b is None or b <= 0:
        raise SymbolicError(f"{user_location()}: floor division needs a positive integer divisor, got {right} "
                            "(divisors and moduli must be constants for the polyhedral scheduler)")
    if a is not None:
        return const(a // b)
    if b == 1:
        return left
    return FloorDiv(left, right)


def mod(left: IntLike, right: IntLike) -> Expr:
    left, right = as_expr(left), as_expr(right)
    a, b = left.constant_value(), right.constant_value()
    if b is None or b <= 0:
        raise SymbolicError(f"{user_location()}: modulo needs a positive integer divisor, got {right} "
                            "(divisors and moduli must be constants for the polyhedral scheduler)")
    if a is not None:
        return const(a % b)
    if b == 1:
        return const(0)
    return Mod(left, right)


def minimum(left: IntLike, right: IntLike) -> Expr:
    left, right = as_expr(left), as_expr(right)
    difference = (left - right).constant_value()
    if difference is not None:
        return left if difference <= 0 else right
    return Min(*sorted((left, right), key=lambda e: e.key()))


def maximum(left: IntLike, right: IntLike) -> Expr:
    left, right = as_expr(left), as_expr(right)
    difference = (left - right).constant_value()
    if difference is not None:
        return left if difference >= 0 else right
    return Max(*sorted((left, right), key=lambda e: e.key()))


_BUILDERS = {"//": floordiv, "%": mod, "min": minimum, "max": maximum, "*": mul}


from timerl.symbolic_structure import (  # noqa: E402  (structural queries build on the expressions above)
    affine_coefficient,
    exact_division,
    non_affine_part,
    position,
    same,
    same_all,
)
from timerl.symbolic_conditions import (  # noqa: E402  (conditions build on the expressions above)
    FALSE,
    TRUE,
    And,
    BoolConst,
    Compare,
    Cond,
    Not,
    Or,
    as_cond,
    compare,
    conjunction,
    disjunction,
    negation,
    non_affine_in,
)



__all__ = [
    "SymbolicError", "Expr", "Symbol", "Affine", "FloorDiv", "Mod", "Min", "Max", "Product", "Cond", "BoolConst",
    "Compare", "And", "Or", "Not", "TRUE", "FALSE", "as_expr", "as_cond", "const", "add", "mul", "floordiv", "mod",
    "minimum", "maximum", "compare", "conjunction", "disjunction", "negation", "affine_coefficient", "same",
    "same_all", "position", "exact_division", "non_affine_part",
    "non_affine_in",
]


_COMPILED: dict[tuple, object] = {}


def compile_function(exprs: tuple, args: tuple[Symbol, ...]):
    """A Python function of ``args`` (positionally) returning the tuple of ``exprs`` (Expr or Cond)."""
    key = (tuple(e.key() for e in exprs), tuple(a.key() for a in args))
    function = _COMPILED.get(key)
    if function is None and not exprs:
        function = _COMPILED[key] = lambda *values: ()
    if function is None:
        names = ", ".join(a.python() for a in args)
        body = ", ".join(e.python() for e in exprs)
        function = eval(f"lambda {names}: ({body}{',' if len(exprs) == 1 else ''})", {"min": min, "max": max})
        _COMPILED[key] = function
    return function
