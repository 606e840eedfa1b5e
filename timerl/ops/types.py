"""The types every layer above shares: a tensor's type at one point and an op's attributes.

They sit with the ops because the op rules are written in them (shape and dtype rules take `TensorType`s and
`Attrs`); the PDG's nodes carry them (`timerl.pdg.graph`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from timerl.symbolic import Expr

Dim = Union[int, Expr]


@dataclass(frozen=True)
class TensorType:
    shape: tuple[Dim, ...]
    dtype: str

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(str(d) for d in self.shape)}]"


@dataclass(frozen=True)
class Attrs:
    """An immutable bag of op attributes (may hold callables and arrays, so it is compared by identity)."""

    items: tuple[tuple[str, Any], ...] = ()

    @staticmethod
    def of(**values: Any) -> Attrs:
        return Attrs(tuple(sorted(values.items())))

    def as_dict(self) -> dict[str, Any]:
        return dict(self.items)

    def __getitem__(self, name: str) -> Any:
        for key, value in self.items:
            if key == name:
                return value
        raise KeyError(name)

    def get(self, name: str, default: Any = None) -> Any:
        for key, value in self.items:
            if key == name:
                return value
        return default

    def __str__(self) -> str:
        shown = [f"{k}={v}" for k, v in self.items if not callable(v) and getattr(v, "ndim", 0) == 0]
        return ", ".join(shown)
