"""Errors a user can cause, each naming the file and line of the user's code that created the tensor."""

from __future__ import annotations

import numbers
import os
import sys
from typing import Any

_PACKAGE_ROOT = os.path.dirname(os.path.abspath(__file__))


class Stop(BaseException):
    """Raised by a sink (``raise trl.Stop``) to end the run after the current iteration of the program's outermost
    loop; ``exe.execute(resume=True)`` continues from there. A BaseException, like KeyboardInterrupt, so that
    code catching Exception lets it through."""


class TimeRLError(Exception):
    """Base class of every error a timerl user can cause."""


class ShapeError(TimeRLError):
    """Shapes or dtypes that do not fit together."""


class DomainError(TimeRLError):
    """A read outside the points where a tensor is defined."""


class ScheduleError(TimeRLError):
    """No valid execution order exists (a dependence cycle)."""


class IndexOutOfRangeError(TimeRLError, IndexError):
    """A data index (gather, index_select, one_hot) outside the dimension it indexes, found at run time."""


class ArgumentError(TimeRLError, TypeError):
    """An argument of the wrong type, named in the message; a TypeError too, as Python's own would be."""


class DeviceOutOfMemoryError(TimeRLError):
    """The program cannot fit the device memory, even with swapping."""


class UserCodeError(TimeRLError):
    """An exception raised by the user's own code (a source, sink, UDF or environment) while the program ran;
    the original exception is its ``__cause__``."""


class FileFormatError(TimeRLError, ValueError):
    """A file handed to timerl (weights, a workload, a log) that is missing, truncated or malformed."""


def user_location() -> str:
    """``file:line`` of the innermost stack frame outside the timerl package."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        generated = frame.f_code.co_filename == "<string>" and frame.f_code.co_name == "__init__"  # a dataclass's
        if not filename.startswith(_PACKAGE_ROOT + os.sep) and not generated:
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


def raised_at(error: BaseException) -> str:
    """``file:line`` of the innermost frame of ``error``'s traceback outside the timerl package (where the
    user's code raised it), or ``""``."""
    found = ""
    traceback = error.__traceback__
    while traceback is not None:
        filename = os.path.abspath(traceback.tb_frame.f_code.co_filename)
        if not filename.startswith(_PACKAGE_ROOT + os.sep):
            found = f"{traceback.tb_frame.f_code.co_filename}:{traceback.tb_lineno}"
        traceback = traceback.tb_next
    return found


def user_code_error(what: str, error: BaseException) -> UserCodeError:
    """``error``, raised by user code that ``what`` names (an RT and the line that created it, a point), as a
    `UserCodeError`; raise it ``from error`` so the original stays chained."""
    where = raised_at(error)
    return UserCodeError(f"{what}: {type(error).__name__}: {error}" + (f" (raised at {where})" if where else ""))


# ---- argument checks of the public API: each names the argument and the user's line ----------------------------


def _refuse(name: str, expected: str, value: Any) -> ArgumentError:
    return ArgumentError(f"{user_location()}: {name} must be {expected}, got {value!r}")


def int_argument(name: str, value: Any, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or (
            minimum is not None and value < minimum):
        raise _refuse(name, "an int" + (f" >= {minimum}" if minimum is not None else ""), value)
    return int(value)


def float_argument(name: str, value: Any, optional: bool = False) -> float | None:
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _refuse(name, "a number" + (" or None" if optional else ""), value)
    return float(value)


def bool_argument(name: str, value: Any) -> bool:
    if not isinstance(value, bool) and type(value).__name__ != "bool_":  # NumPy's bool too
        raise _refuse(name, "True or False", value)
    return bool(value)


def str_argument(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _refuse(name, "a string", value)
    return value


def callable_argument(name: str, value: Any) -> Any:
    if not callable(value):
        raise _refuse(name, "a callable", value)
    return value
