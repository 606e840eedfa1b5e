"""Errors a user can cause, each naming the file and line of the user's code that created the tensor."""

from __future__ import annotations

import os
import sys

_PACKAGE_ROOT = os.path.dirname(os.path.abspath(__file__))


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


class DeviceOutOfMemoryError(TimeRLError):
    """The program cannot fit the device memory, even with swapping."""


def user_location() -> str:
    """``file:line`` of the innermost stack frame outside the timerl package."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(_PACKAGE_ROOT + os.sep):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"
