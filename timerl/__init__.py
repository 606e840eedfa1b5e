"""timerl: deep reinforcement learning programs as recurrent tensors, scheduled with the polyhedral model."""

from timerl.errors import (  # noqa: F401
    DeviceOutOfMemoryError,
    DomainError,
    IndexOutOfRangeError,
    ScheduleError,
    ShapeError,
    Stop,
    TimeRLError,
    UserCodeError,
)
from timerl.options import CompileOptions  # noqa: F401
from timerl.symbolic import Cond, Expr, Symbol  # noqa: F401
from timerl.symbolic import maximum as max  # noqa: F401
from timerl.symbolic import minimum as min  # noqa: F401
from timerl.rt.tensor import Context, RecurrentTensor  # noqa: F401
from timerl.rt.functional import (  # noqa: F401
    arange, cat, full, gather, index_select, one_hot, ones, rand, randn, source, stack, tensor, where, zeros,
)
from timerl.rt.placeholder import param, placeholder  # noqa: F401

_SUBMODULES = ("nn", "optim", "distributions", "rl")


def __getattr__(name: str):
    """``trl.nn``, ``trl.optim``, ``trl.distributions`` and ``trl.rl`` load on first use."""
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f"timerl.{name}")
    raise AttributeError(f"module 'timerl' has no attribute {name!r}")

__all__ = [
    "Context", "CompileOptions", "RecurrentTensor", "Stop", "Symbol", "Expr", "Cond", "TimeRLError", "ShapeError",
    "DomainError", "ScheduleError", "DeviceOutOfMemoryError", "IndexOutOfRangeError", "UserCodeError", "min", "max",
    "tensor", "zeros", "ones", "full", "arange", "rand",
    "randn", "source", "placeholder", "param", "cat", "stack", "where", "gather", "index_select", "one_hot",
]
