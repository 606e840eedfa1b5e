"""Windows that share an end or a start, computed as scans (paper §5.3's incrementalization inside a vectorized
statement, `timerl.runtime.batch`).

A batched statement computes a window read at every point of its loop, e.g. Monte Carlo returns
``g[t] = (r[t:T] * m[t:T]).discounted_sum(gamma)`` for every ``t`` at once. Padded, that is N windows of up to N
positions each: N * N values where the reverse recurrence ``g[t] = r[t] * m[t] + gamma * g[t + 1]`` touches N.
When every window of the statement ends at the same position (``x[t:T]``: suffixes of one run of positions) or
starts at the same one (``x[0:t + 1]``: prefixes), and the ops between the read and the reduction are
elementwise (a position's value does not depend on which window holds it), those ops run once on the run, and
the reduction is one scan of it (the op's `WindowScan` rule in the registry), read at each window's start (or
end). Anything else (windows of other shapes, a running sum along the window, which restarts at each window's
start, a window combined with a value that differs between points) keeps the padded windows.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from timerl.ops.registry import CONST, OPS, POSITIONWISE, WindowScan
from timerl.pdg.graph import Graph, Node

SUFFIX, PREFIX = "suffix", "prefix"


def window_scan_rules(graph: Graph, members: Sequence[Node], windowed: set[int], kinds: dict,
                      inside: str, window: str) -> tuple[dict[int, WindowScan], list[tuple[Node, int]]] | None:
    """The reductions of windows in a statement, each with its `WindowScan` rule, when every op between a window
    read and its reduction is computed position by position from windows and constants alone; else None.
    ``kinds``: member -> how it reads each input (``inside``: a member of the statement, ``window``: a range,
    else a read of another statement's points). Also returned: the (member, input) reads of other statements
    by ops on windows, which must read one value for every point (`same_value_reads`)."""
    rules: dict[int, WindowScan] = {}
    outside: list[tuple[Node, int]] = []
    for node in members:
        reads = kinds.get(node.id, ())
        from_window = [kind is window or (kind is inside and edge.producer in windowed)
                       for kind, edge in zip(reads, node.inputs)]
        if not any(from_window):
            continue
        rule = OPS[node.op].window_scan
        if node.id in windowed:
            if rule != POSITIONWISE:
                return None
            for slot, (edge, kind, windowy) in enumerate(zip(node.inputs, reads, from_window)):
                if windowy or (kind is inside and graph.nodes[edge.producer].category is CONST):
                    continue
                if kind is inside:
                    return None  # a member's value may differ between points: the windows would differ too
                outside.append((node, slot))
            continue
        if not isinstance(rule, WindowScan) or not all(from_window) or not rule.applies(node.attrs.as_dict()):
            return None
        rules[node.id] = rule
    return (rules, outside) if rules else None


def window_geometry(coordinates: Sequence[Sequence[Any]]) -> tuple[int, tuple, np.ndarray, np.ndarray]:
    """One range read at every point, from each point's coordinates (one of them a range): (the range's axis,
    the other coordinates, which every point must share, the windows' starts, their lengths)."""
    axis = next(k for k, c in enumerate(coordinates[0]) if isinstance(c, range))
    outer = coordinates[0][:axis] + coordinates[0][axis + 1:]
    for c in coordinates:
        if c[:axis] + c[axis + 1:] != outer:
            raise ValueError("windows over different rows of the producer")
    starts = np.array([c[axis].start for c in coordinates], dtype=np.int64)
    lengths = np.array([len(c[axis]) for c in coordinates], dtype=np.int64)
    return axis, tuple(outer), starts, lengths


def scan_rows(starts: np.ndarray, lengths: np.ndarray) -> tuple[str, int, int, np.ndarray] | None:
    """How windows with these starts and lengths are read from scans of the run they cover: (SUFFIX or PREFIX,
    the run's first and last + 1 positions, each window's row of the scan); None when they neither share their
    end nor their start (or all are empty)."""
    present = lengths > 0
    if not present.any():
        return None
    low = int(starts[present].min())
    high = int((starts + lengths)[present].max())
    if np.all((starts + lengths)[present] == high):
        return SUFFIX, low, high, np.where(present, starts - low, high - low)
    if np.all(starts[present] == low):
        return PREFIX, low, high, np.where(present, lengths, 0)
    return None


def scan_kernel(rule: WindowScan, shape: str, attrs: dict, dtype: str, backend: Any):
    """The reduction at every point: the scan of the runs of its inputs (in the reduction's dtype: episode ends
    too), read at the rows of its windows."""
    xp = backend.xp
    scan = rule.suffix if shape == SUFFIX else rule.prefix

    def every_point(*runs_and_rows: Any) -> Any:  # the runs of the reduction's inputs, then the windows' rows
        runs, rows = runs_and_rows[:-1], runs_and_rows[-1]
        return xp.take(scan(xp, *(backend.cast(run, dtype) for run in runs), attrs), rows, axis=0)

    return every_point
