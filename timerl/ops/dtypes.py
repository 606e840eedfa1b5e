"""PyTorch's type promotion, for the op rules: `promote_types` (two dtypes), `result_type` (an op's operands,
with zero-dimensional tensors and Python scalars weaker than dimensioned tensors of their category) and
`Promotion` (which inputs of an op meet in one dtype, converted to it before the kernel, so that every backend
computes in the dtype torch would, whatever its own promotion table says)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from typing import Any, Callable, Sequence

import ml_dtypes  # noqa: F401  (gives NumPy bfloat16, whatever is imported first)
import numpy as np

from timerl.errors import ShapeError
from timerl.ops.types import Attrs, TensorType

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8")
DTYPE_ORDER = ("bool",) + INT_DTYPES + FLOAT_DTYPES
DEFAULT_FLOAT = "float32"  # torch's default dtype: what a Python float and an integer division become

_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "uint8": 8,
         "float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def category(dtype: str) -> int:
    """bool < integer < floating point: an operand of a higher category decides the result's category."""
    return 2 if dtype in FLOAT_DTYPES else 0 if dtype == "bool" else 1


def promote_types(a: str, b: str) -> str:
    """``torch.promote_types``: the smallest dtype both convert to (uint8 with int8 is int16, float16 with
    bfloat16 is float32)."""
    if a == b:
        return a
    if category(a) != category(b):
        return a if category(a) > category(b) else b
    if category(a) == 2:
        if {a, b} == {"float16", "bfloat16"}:
            return "float32"
        return a if _BITS[a] > _BITS[b] else b
    if "uint8" in (a, b):
        signed = b if a == "uint8" else a
        return "int16" if signed == "int8" else signed
    return a if _BITS[a] > _BITS[b] else b


def promote(*dtypes: str) -> str:
    """The promotion of tensors that all count alike (dimensioned tensors, or ``cat``'s inputs)."""
    return reduce(promote_types, dtypes)


def scalar_dtype(value: Any) -> str:
    """The dtype a Python (or NumPy) scalar stands for in promotion: bool, int64, or the default float."""
    kind = np.asarray(value).dtype.kind
    return "bool" if kind == "b" else "int64" if kind in "iu" else DEFAULT_FLOAT


def _combine(higher: str | None, lower: str | None) -> str | None:
    """A stronger class of operands (``higher``) against a weaker one: the weaker counts only where it brings a
    higher category (an int tensor and a Python float give a float; int8 and a zero-dim int64 give int8)."""
    if higher is None:
        return lower
    if lower is None or is_float(higher):
        return higher
    if higher == "bool" or category(lower) > category(higher):
        return promote_types(higher, lower)
    return higher


def result_type(tensors: Sequence[TensorType], scalars: Sequence[Any] = ()) -> str:
    """``torch.result_type`` of tensors (those of spatial shape ``()`` count as zero-dimensional: an RT is a
    scalar at each point of its domain) and Python scalars."""
    dimensioned = [t.dtype for t in tensors if len(t.shape)]
    zero_dim = [t.dtype for t in tensors if not len(t.shape)]
    wrapped = [scalar_dtype(s) for s in scalars]
    classes = [promote(*c) if c else None for c in (dimensioned, zero_dim, wrapped)]
    result = _combine(classes[0], _combine(classes[1], classes[2]))
    if result is None:
        raise ValueError("result_type of no operands")
    return result


def same(dtype: str) -> str:
    return dtype


def floating(dtype: str) -> str:
    """Ops computed in floating point (``/``, ``exp``, ``mean``): integers and bools become the default float."""
    return dtype if is_float(dtype) else DEFAULT_FLOAT


def accumulated(dtype: str) -> str:
    """Sums of bools and integers are int64, as in torch."""
    return dtype if is_float(dtype) else "int64"


@dataclass(frozen=True)
class Promotion:
    """The inputs at ``positions`` (None: all) and the attributes named in ``scalars`` (Python numbers, weak)
    meet in `result_type`; ``compute`` maps it to the dtype those inputs are converted to before the kernel
    (`timerl.rt.apply` inserts the conversions), so the op computes in the dtype torch would."""

    positions: tuple[int, ...] | None = None
    scalars: tuple[str, ...] = ()
    compute: Callable[[str], str] = same
    no_bools: str | None = None  # "result": refused where it is bool; "operands": where any operand is

    def members(self, count: int) -> tuple[int, ...]:
        return tuple(range(count)) if self.positions is None else tuple(p for p in self.positions if p < count)

    def dtype(self, inputs: Sequence[TensorType | None], attrs: Attrs, scalars: Sequence[Any] = ()) -> str:
        """The dtype the promoted inputs are computed in; ``scalars``: Python numbers given in place of inputs
        (None in ``inputs``)."""
        weak = [*scalars, *(attrs.get(name) for name in self.scalars if attrs.get(name) is not None)]
        tensors = [inputs[k] for k in self.members(len(inputs)) if inputs[k] is not None]
        dtype = self.compute(result_type(tensors, weak))
        given = [t.dtype for t in tensors] + [scalar_dtype(s) for s in weak]
        if self.no_bools == "result" and dtype == "bool" or self.no_bools == "operands" and "bool" in given:
            raise ShapeError("not defined for bool tensors (as in torch); use ~, &, | or convert with .astype()")
        return dtype


def integer_limits(dtype: str) -> tuple[int, int]:
    bits = _BITS[dtype]
    return (0, 2**bits - 1) if dtype == "uint8" else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
