"""Lifetimes of the values a generated group function keeps in local variables (`timerl.runtime.plan`): each
is deleted after the last line that reads it, and the most bytes alive at once are what the group adds to the
pool's peak; which ops return a fresh buffer, so that another op may write into it (donation, paper §6.2)."""

from __future__ import annotations

import re

LOCAL_NAME = re.compile(r"\bv\d+_\d+\b")


# ops whose kernels always return a new array (never a view or the input itself): their values may be donated
FRESH = frozenset({"add", "sub", "mul", "div", "neg", "exp", "log", "tanh", "sigmoid", "sqrt", "abs", "sin", "cos",
                    "maximum", "minimum", "matmul", "sum", "mean", "softmax", "log_softmax", "cumsum"})


def free_after_last_use(body: list[str], sizes: dict[str, int],
                         donors: dict[str, str] | None = None) -> tuple[list[str], int]:
    """``body`` with each value only the group reads (``sizes``: local variable -> bytes) deleted after the last
    line that mentions it, so the array library frees it there instead of when the group returns; and the
    most bytes of such values alive at once, which the group adds to the pool's peak. A folded matmul's
    product (`GroupLowering._matmul_adds`) is never assigned, so it is never counted. ``donors``: output -> the input whose
    buffer it was written into (`GroupLowering._donations`); the input's bytes stop counting where the output starts."""
    donors = donors or {}
    last: dict[str, int] = {}
    for k, line in enumerate(body):
        for name in LOCAL_NAME.findall(line):
            if name in sizes:
                last[name] = k
    dying: dict[int, list[str]] = {}
    for name, k in last.items():
        dying.setdefault(k, []).append(name)
    result: list[str] = []
    live = peak = 0
    seen: set[str] = set()
    released: set[str] = set()  # donors whose buffer now holds another value
    for k, line in enumerate(body):
        result.append(line)
        for name in LOCAL_NAME.findall(line):
            donor = donors.get(name)
            if donor is not None and donor in last and donor in seen and donor not in released:
                released.add(donor)
                live -= sizes[donor]
        for name in LOCAL_NAME.findall(line):
            if name in last and name not in seen:
                seen.add(name)
                live += sizes[name]
        peak = max(peak, live)
        if k in dying:
            result.append(f"del {', '.join(sorted(dying[k]))}")
            live -= sum(sizes[name] for name in dying[k] if name not in released)
    return result, peak
