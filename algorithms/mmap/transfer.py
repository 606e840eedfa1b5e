"""Copy windows and supply accounting: Equations 5 and 6 of Appendix A.

A copy interval is a set of consecutive logical times. Eq. 6 lets two copy intervals share at most one
time step; for runs of consecutive integers that is the same as never sharing an *edge* (a pair t, t+1 of
neighbouring times). So the game keeps one boolean per edge (`copy_edges[t]` covers t and t+1) and a copy
may use time steps freely as long as its edges are unused. Eq. 5 is checked against the *current* supply
vector W.

Choices where the paper is vague:
- A prefetch (input Copy) may not start before the buffer's live range: the data does not exist earlier.
  An eviction (output Copy) must finish within the buffer's live range, symmetric with prefetches.
- Supply is consumed from the step nearest the target outward until the demand is met, and exactly the
  demand is subtracted: every step strictly inside the copy interval is drained to zero and the farthest
  step gives only the remainder. That remainder stays usable by a neighbouring copy that shares this one
  step, which is precisely the sharing Eq. 6 allows.
- A zero demand (zero-size buffer) needs an empty copy interval.
"""

from __future__ import annotations

import numpy as np


def latest_prefetch_start(supply: np.ndarray, copy_edges: np.ndarray, live_start: int, target: int, demand: int):
    """Latest s >= live_start with sum(W[s..target-1]) >= demand and no used edge in [s, target-1]; None if none."""
    if demand == 0:
        return target
    last = target - 1
    if last < live_start:
        return None
    if supply[last] >= demand:
        return last
    first = live_start
    if last > first:
        used = np.flatnonzero(copy_edges[first:last])
        if used.size:
            first += int(used[-1]) + 1
    sums = np.cumsum(supply[first:last + 1][::-1])
    steps = int(np.searchsorted(sums, demand))
    return None if steps == len(sums) else last - steps


def earliest_eviction_end(supply: np.ndarray, copy_edges: np.ndarray, target: int, live_end: int, demand: int):
    """Earliest e <= live_end with sum(W[target+1..e]) >= demand and no used edge in [target+1, e]; None if none."""
    if demand == 0:
        return target
    first = target + 1
    if first > live_end:
        return None
    if supply[first] >= demand:
        return first
    last = live_end
    used = np.flatnonzero(copy_edges[first:last])
    if used.size:
        last = first + int(used[0])
    sums = np.cumsum(supply[first:last + 1])
    steps = int(np.searchsorted(sums, demand))
    return None if steps == len(sums) else first + steps


def consume(supply: np.ndarray, copy_edges: np.ndarray, first: int, last: int, demand: int, toward_last: bool):
    """Take `demand` from W over [first, last], nearest-target first, mark the interval's edges.

    `toward_last` says where the target is: True for a prefetch (target right after `last`), False for an
    eviction (target right before `first`). Returns the overwritten slice of W for undo.
    """
    previous = supply[first:last + 1].copy()
    if toward_last:
        drained, partial = slice(first + 1, last + 1), first
    else:
        drained, partial = slice(first, last), last
    remainder = demand - int(supply[drained].sum())
    supply[drained] = 0
    supply[partial] -= remainder
    copy_edges[first:last] = True
    return previous


def restore(supply: np.ndarray, copy_edges: np.ndarray, first: int, last: int, previous: np.ndarray) -> None:
    supply[first:last + 1] = previous
    copy_edges[first:last] = False
