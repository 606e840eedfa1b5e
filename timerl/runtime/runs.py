"""Run control: a program run in parts (``exe.execute(iterations=10)``, then ``exe.execute(resume=True)``), a
sink ending the run early (``raise trl.Stop``), and checkpoints of the state between parts.

A part runs the schedule's outermost loop (the training iterations) from ``RUN[0]`` to ``RUN[1]``
(`timerl.runtime.codegen`); the memory pool keeps every value a later iteration reads from one part to the
next, so running in parts computes what one run computes, value for value. A checkpoint is that pool at an
iteration boundary, written as an ``.npz`` file of plain arrays (no pickle) with a JSON header saying which
program, bounds, seed and iteration it belongs to: a new compile of the same program loads it and continues.
Random draws are keyed by the point they are drawn at (`timerl.runtime.rng`), so the resumed run draws what
the uninterrupted one would have.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import Any, Iterator

import numpy as np

from timerl.errors import FileFormatError, Stop, TimeRLError, user_location
from timerl.files import parse_json, read_npz
from timerl.ops.registry import UDF
from timerl.pdg.graph import Graph

_STOPS: list[list[bool]] = []  # the stop flags of the runs in progress, innermost last


@contextlib.contextmanager
def stop_flag(flag: list[bool]) -> Iterator[None]:
    """While a run is in progress, a sink's `trl.Stop` sets ``flag[0]``."""
    _STOPS.append(flag)
    try:
        yield
    finally:
        _STOPS.remove(flag)


def request_stop(error: Stop) -> None:
    """A sink raised `trl.Stop`: the run in progress ends after its current iteration."""
    if not _STOPS:
        raise error
    _STOPS[-1][0] = True


class RunState:
    """Where a run in parts stands: ``run[0]`` the next iteration of the outermost loop, ``run[1]`` where the
    current part ends; ``span`` the loop's range (None: the schedule cannot run in parts)."""

    def __init__(self, span: tuple[int, int] | None) -> None:
        self.span = span
        self.run = [0 if span is None else span[0], 0]
        self.stop = [False]
        self.started = False  # a pool holds a run's state (after a part, or a loaded checkpoint)

    def begin(self, iterations: Any, resume: bool) -> bool:
        """Sets the part to run; returns whether it starts a new run (a fresh pool)."""
        if iterations is not None and (isinstance(iterations, bool) or not isinstance(iterations, int)
                                       or iterations < 1):
            raise TimeRLError(f"{user_location()}: iterations= is a positive int (how many iterations of the "
                              f"outermost loop to run), got {iterations!r}")
        if (iterations is not None or resume) and self.span is None:
            raise TimeRLError(f"{user_location()}: this program cannot run in parts: its schedule has no single "
                              "outermost loop between run-once statements, runs that loop vectorized, or runs "
                              "under a device_memory budget")
        fresh = not (resume and self.started)
        if fresh:
            self.run[0] = 0 if self.span is None else self.span[0]
        elif self.finished:
            raise TimeRLError(f"{user_location()}: the run is complete (iteration {self.run[0]} of "
                              f"{self.span[1]}); execute() without resume=True starts a new one")
        stop = 0 if self.span is None else self.span[1]
        self.run[1] = stop if iterations is None else min(stop, self.run[0] + iterations)
        self.stop[0] = False
        self.started = True
        return fresh

    @property
    def finished(self) -> bool:
        return self.span is None or self.run[0] >= self.span[1]


def fingerprint(graph: Graph) -> str:
    """What a checkpoint must match: every op, domain, output type and read of the program."""
    text = "\n".join(f"{n.op}|{[d.name for d in n.domain]}|{n.outputs}|"
                     f"{[(e.producer, e.output, str(e.index)) for e in n.inputs]}" for n in graph.nodes)
    return hashlib.sha256(text.encode()).hexdigest()


def live_values(pool: Any, backend: Any) -> Iterator[tuple[tuple[int, tuple[int, ...]], list[Any]]]:
    """Every stored point of the pool with its outputs as NumPy arrays (None where an output is freed)."""
    keys = list(pool.device) + list(pool.host) + list(getattr(pool, "stacked", {}))
    for node_id, store in pool.blocks.items():
        for outer, row in store.rows.items():
            keys.extend((node_id, outer[:store.axis] + (k,) + outer[store.axis:]) for k in sorted(row.live))
    for key in dict.fromkeys(keys):
        values = pool.load(key)
        yield key, [None if value is None else backend.to_numpy(value) for value in values]


def save(path: str, graph: Graph, bounds: dict, seed: int, backend_name: str, run: RunState, pool: Any,
         backend: Any) -> None:
    if any(node.category is UDF for node in graph.nodes):
        raise TimeRLError(f"{user_location()}: a checkpoint holds the program's own state only; this program "
                          "calls user functions with state of their own (gymnasium environments), which it "
                          "cannot save: use simulator='rt' environments, or run in parts without saving")
    if not run.started or run.span is None or run.run[0] <= run.span[0] or run.finished:
        raise TimeRLError(f"{user_location()}: a checkpoint is taken between the parts of a run (after "
                          "exe.execute(iterations=...) or a trl.Stop), not before it starts or after it ends")
    arrays: dict[str, np.ndarray] = {}
    entries = []
    for (node_id, point), values in live_values(pool, backend):
        names = []
        for k, value in enumerate(values):
            name = None if value is None else f"a{len(arrays)}"
            if name is not None:
                arrays[name] = np.ascontiguousarray(value)
            names.append(name)
        entries.append([node_id, list(point), names])
    header = {"format": "timerl checkpoint 1", "program": fingerprint(graph), "seed": seed,
              "bounds": {s.name: v for s, v in bounds.items()}, "iteration": run.run[0], "backend": backend_name,
              "values": entries,
              "freed_outputs": [[key[0], list(key[1]), list(outputs)] for key, outputs in pool.freed_outputs.items()]}
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    with open(path, "wb") as file:
        np.savez(file, **arrays)


def load(path: str, graph: Graph, bounds: dict, seed: int, run: RunState, pool: Any, backend: Any) -> None:
    """Fills a fresh ``pool`` from the checkpoint at ``path`` and sets ``run`` to continue from it."""
    try:
        arrays = read_npz(path, "checkpoint")
        if "header" not in arrays:
            raise FileFormatError(f"{path}: the checkpoint has no header (not saved by timerl)")
        header = parse_json(arrays.pop("header").tobytes(), path, "checkpoint's header")
        _check_header(header, arrays, path)
    except FileFormatError as error:
        raise FileFormatError(f"{user_location()}: cannot read checkpoint: {error}") from error
    mismatch = [what for what, ours, theirs in (
        ("program", fingerprint(graph), header["program"]), ("seed", seed, header["seed"]),
        ("bounds", {s.name: v for s, v in bounds.items()}, header["bounds"])) if ours != theirs]
    if mismatch:
        raise TimeRLError(f"{user_location()}: checkpoint {path!r} belongs to another {' and '.join(mismatch)}; "
                          "a checkpoint resumes the program, bounds and seed it was saved from")
    if run.span is None:
        raise TimeRLError(f"{user_location()}: this program cannot run in parts, so it cannot resume a checkpoint")
    for node_id, point, names in header["values"]:
        values = tuple(None if name is None else backend.from_numpy(arrays[name]) for name in names)
        pool.store((node_id, tuple(point)), values, sum(backend.nbytes(v) for v in values if v is not None))
    for node_id, point, outputs in header["freed_outputs"]:
        pool.freed_outputs[(node_id, tuple(point))] = tuple(outputs)
    run.run[0] = header["iteration"]
    run.started = True


def _check_header(header: Any, arrays: dict, path: str) -> None:
    """The fields `load` reads, of the types it reads them as, naming arrays the archive holds."""
    fields = {"format": str, "program": str, "seed": int, "bounds": dict, "iteration": int, "values": list,
              "freed_outputs": list}
    if not isinstance(header, dict) or any(not isinstance(header.get(k), t) for k, t in fields.items()):
        raise FileFormatError(f"{path}: the checkpoint's header lacks or mistypes one of {', '.join(fields)}")
    for entry in header["values"]:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], int) and isinstance(entry[1], list)
                and isinstance(entry[2], list) and all(n is None or n in arrays for n in entry[2])):
            raise FileFormatError(f"{path}: the checkpoint's header names a value the archive does not hold")
    if not all(isinstance(e, list) and len(e) == 3 for e in header["freed_outputs"]):
        raise FileFormatError(f"{path}: the checkpoint's header has malformed freed outputs")


__all__ = ["RunState", "Stop", "load", "request_stop", "save", "stop_flag"]
