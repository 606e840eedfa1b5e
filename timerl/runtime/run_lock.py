"""One run at a time per executable: `execute()` from several threads runs the calls one after another.

An executable's run state (its memory pool, the namespace its generated code reads, its stats) belongs to one
run, so a second thread's call waits for the running one to finish instead of sharing that state. A call
from inside a running one on the same thread (a source, sink or UDF calling ``execute()`` of its own
executable) could never proceed, so it is a `TimeRLError` instead of a deadlock.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable

from timerl.errors import TimeRLError, user_location


class RunLock:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None

    def __enter__(self) -> None:
        if self._owner == threading.get_ident():
            raise TimeRLError(f"{user_location()}: execute() called while the same executable runs on this thread "
                              "(from one of its sources, sinks or UDFs); it cannot run inside itself")
        self._lock.acquire()
        self._owner = threading.get_ident()

    def __exit__(self, *exc: Any) -> None:
        self._owner = None
        self._lock.release()


def one_run_at_a_time(execute: Callable[..., Any]) -> Callable[..., Any]:
    """Decorates an executable's ``execute``: calls from several threads run one after another."""

    @functools.wraps(execute)
    def serialized(self, *args: Any, **kwargs: Any) -> Any:
        lock = self.__dict__.setdefault("_run_lock", RunLock())  # dict.setdefault: one lock even if two race
        with lock:
            return execute(self, *args, **kwargs)

    return serialized
