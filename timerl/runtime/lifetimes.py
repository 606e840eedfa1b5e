"""Lifetimes of the values a generated group function keeps in local variables (`timerl.runtime.plan`): each
is deleted after the last line that reads it, and the most bytes alive at once are what the group adds to the
pool's peak; which ops return a fresh buffer, so that another op may write into it (donation, paper §6.2)."""

from __future__ import annotations

import re

LOCAL_NAME = re.compile(r"\bv\d+_\d+\b")


# ops whose kernels always return a new array (never a view or the input itself): their values may be donated
FRESH = frozenset({"add", "sub", "mul", "div", "neg", "exp", "log", "tanh", "sigmoid", "sqrt", "abs", "sin", "cos",
                    "maximum", "minimum", "matmul", "sum", "mean", "softmax", "log_softmax", "cumsum"})


Candidates = tuple[tuple[int, tuple[int, ...]], ...]  # (static bytes, members whose bytes are known only at run time)


def free_after_last_use(body: list[str], sizes: dict[str, int], donors: dict[str, str] | None = None,
                        stored: dict[str, int] | None = None,
                        dynamic: dict[str, int] | None = None) -> tuple[list[str], Candidates]:
    """``body`` with each value only the group reads (``sizes``: local variable -> bytes; ``dynamic``: local
    variable -> its member, for values whose bytes are known only at run time) deleted after the last line
    that mentions it, so the array library frees it there instead of when the group returns; and what the
    group adds to the pool's peak: the most bytes alive at once is the largest of the returned candidates,
    each some static bytes plus the run-time bytes of some members (the set alive at one line), less the
    bytes the group stores. A folded matmul's product (`timerl.runtime.fusions.matmul_adds`) is never assigned,
    so it is never counted. ``donors``: output -> the input whose buffer it was written into
    (`timerl.runtime.fusions.buffer_donations`); the input's bytes stop counting where the output starts.
    ``stored``: the group's outputs that go to the pool (local variable -> bytes): the pool counts them once
    the group has stored all of them, so each is counted here from the line that computes it and all of them
    are taken off at the end (a group whose intermediates die before its big outputs are computed adds nothing)."""
    donors, stored, dynamic = donors or {}, stored or {}, dynamic or {}
    last: dict[str, int] = {}
    for k, line in enumerate(body):
        for name in LOCAL_NAME.findall(line):
            if name in sizes or name in dynamic:
                last[name] = k
    dying: dict[int, list[str]] = {}
    for name, k in last.items():
        dying.setdefault(k, []).append(name)
    result: list[str] = []
    live = stored_so_far = 0
    alive: dict[int, int] = {}  # member with run-time bytes -> how many of its outputs are alive
    peaks: dict[frozenset, int] = {}  # members alive at once -> the most static bytes alive with them
    seen: set[str] = set()
    released: set[str] = set()  # donors whose buffer now holds another value

    def release(name: str) -> None:
        nonlocal live
        if name in dynamic:
            alive[dynamic[name]] -= 1
            if not alive[dynamic[name]]:
                del alive[dynamic[name]]
        else:
            live -= sizes[name]

    for k, line in enumerate(body):
        result.append(line)
        for name in LOCAL_NAME.findall(line):
            donor = donors.get(name)
            if donor is not None and donor in last and donor in seen and donor not in released:
                released.add(donor)
                release(donor)
        for name in LOCAL_NAME.findall(line):
            if name in seen:
                continue
            if name in last:
                seen.add(name)
                if name in dynamic:
                    alive[dynamic[name]] = alive.get(dynamic[name], 0) + 1
                else:
                    live += sizes[name]
            elif name in stored:
                seen.add(name)
                stored_so_far += stored[name]
        members = frozenset(alive)
        peaks[members] = max(peaks.get(members, 0), live + stored_so_far)
        if k in dying:
            result.append(f"del {', '.join(sorted(dying[k]))}")
            for name in dying[k]:
                if name not in released:
                    release(name)
    total = sum(stored.values())
    kept = [(bytes_ - total, members) for members, bytes_ in peaks.items()
            if not any(other >= bytes_ and members < bigger for bigger, other in peaks.items())]
    return result, tuple(sorted((bytes_, tuple(sorted(members))) for bytes_, members in kept))
