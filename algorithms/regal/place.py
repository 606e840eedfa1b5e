"""``python -m algorithms.regal place graph.json``: place and schedule a user's computation graph on two
devices with REGAL (the trained policy's proposal inside BRKGA), print the placement and each device's
schedule, and draw a Gantt chart and memory over time.

The graph file is JSON: an object with ``"ops"``, a list of ``{"name", "runtime", "output_size",
"inputs": [names of ops it reads]}`` (one output tensor per op), and optionally ``"name"`` and
``"memory_limit"`` (bytes per device, for the runtime objective; default: none). A malformed file is a
`GraphFileError` naming the file (and the line, for JSON syntax).

`trace` replays the performance model (`perfmodel`) on one chromosome in its decoded order and returns
every op's and transfer's interval and each device's memory after each event; its makespan and peak are the
model's (tested).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

from algorithms.regal import brkga, features, paper, train
from algorithms.regal.graph import CompGraph, GraphError, from_edges
from algorithms.regal.perfmodel import DEVICES, LIMIT_TOLERANCE, schedule_positions, split
from timerl.errors import TimeRLError

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen before pyplot loads)


class GraphFileError(TimeRLError):
    """A graph file that cannot be read as a computation graph."""


def read_graph(path: str | Path) -> tuple[CompGraph, list[str]]:
    """The graph of a JSON file and its op names."""
    path = Path(path)
    try:
        document = json.loads(path.read_text())
    except OSError as error:
        raise GraphFileError(f"{path}: cannot read the graph file ({error.strerror})") from error
    except json.JSONDecodeError as error:
        raise GraphFileError(f"{path}:{error.lineno}: not JSON ({error.msg})") from error
    ops = document.get("ops") if isinstance(document, dict) else None
    if not isinstance(ops, list) or not ops:
        raise GraphFileError(f"{path}: needs an object with a non-empty list \"ops\"")
    names = [op.get("name") if isinstance(op, dict) else None for op in ops]
    if any(not isinstance(name, str) for name in names) or len(set(names)) != len(names):
        raise GraphFileError(f"{path}: every op needs a distinct string \"name\"")
    index = {name: k for k, name in enumerate(names)}
    runtimes, sizes, edges = [], [], []
    for op in ops:
        for field in ("runtime", "output_size"):
            if not isinstance(op.get(field), (int, float)) or op[field] < 0:
                raise GraphFileError(f"{path}: op {op['name']!r} needs a non-negative number \"{field}\"")
        runtimes.append(float(op["runtime"]))
        sizes.append(float(op["output_size"]))
        for source in op.get("inputs", []):
            if source not in index:
                raise GraphFileError(f"{path}: op {op['name']!r} reads {source!r}, which is not an op")
            edges.append((index[source], index[op["name"]]))
    limit = document.get("memory_limit", np.inf)
    if not isinstance(limit, (int, float)) or limit <= 0:
        raise GraphFileError(f"{path}: \"memory_limit\" must be a positive number")
    try:
        graph = from_edges(runtimes, edges, sizes, str(document.get("name", path.stem)), memory_limit=float(limit))
    except GraphError as error:
        raise GraphFileError(f"{path}: {error}") from error
    return graph, names


@dataclasses.dataclass(frozen=True)
class Trace:
    device: np.ndarray  # (ops,) where each op runs
    start: np.ndarray  # (ops,)
    finish: np.ndarray  # (ops,)
    order: list[list[int]]  # each device's ops in schedule order
    transfers: list[tuple[int, int, int, float]]  # (tensor, from device, to device, time)
    memory: list[list[tuple[float, float]]]  # per device: (time, bytes held) after each event
    makespan: float
    peak: float


def trace(graph: CompGraph, chromosome: np.ndarray, devices: int = DEVICES) -> Trace:
    """The model's schedule of one chromosome, event by event (see the module docstring)."""
    affinity = split(graph, chromosome[None, :], devices)[0][0]
    place = affinity.argmax(axis=1)
    position = schedule_positions(graph, chromosome, devices)[0]
    ops, tensors = graph.num_ops, graph.num_tensors
    source = place[graph.producer]
    readers = np.stack([graph.uses[place == j].sum(axis=0) for j in range(devices)])  # (d, tensors)
    active = (readers > 0) & (source[None, :] != np.arange(devices)[:, None])
    left = readers + (source[None, :] == np.arange(devices)[:, None]) * active.sum(axis=0)
    free, memory, peak = np.zeros(devices), np.zeros(devices), np.zeros(devices)
    present = np.zeros((devices, tensors))
    start, finish = np.zeros(ops), np.zeros(ops)
    order: list[list[int]] = [[] for _ in range(devices)]
    transfers, timeline = [], [[(0.0, 0.0)] for _ in range(devices)]
    for node in np.argsort(position)[np.sort(position) >= 0]:
        if node < ops:
            j, reads, writes = place[node], np.flatnonzero(graph.uses[node]), np.flatnonzero(graph.produces[node])
            start[node] = max([free[j]] + [present[j, k] for k in reads])
            finish[node] = free[j] = start[node] + graph.runtimes[node]
            present[j, writes] = finish[node]
            memory[j] += graph.sizes[writes].sum()
            peak[j] = max(peak[j], memory[j])
            timeline[j].append((start[node], memory[j]))
            left[j, reads] -= 1
            memory[j] -= sum(graph.sizes[k] for k in sorted(set(reads) | set(writes)) if left[j, k] == 0)
            timeline[j].append((finish[node], memory[j]))
            order[j].append(int(node))
        else:
            k, j = (node - ops) % tensors, (node - ops) // tensors
            origin = source[k]
            when = free[origin] = free[j] = present[j, k] = max(free[origin], free[j], present[origin, k])
            memory[j] += graph.sizes[k]
            peak[j] = max(peak[j], memory[j])
            left[origin, k] -= 1
            memory[origin] -= graph.sizes[k] if left[origin, k] == 0 else 0.0
            timeline[j].append((when, memory[j]))
            timeline[origin].append((when, memory[origin]))
            transfers.append((int(k), int(origin), int(j), float(when)))
    return Trace(place, start, finish, order, transfers, timeline, float(free.max()), float(peak.max()))


def solve(graph: CompGraph, kind: str, budget: int = 5000, seed: int = 0, policy: bool = True,
          weights: Path = paper.WEIGHTS) -> tuple[np.ndarray, float, str]:
    """BRKGA with the trained policy's proposal (``policy``) or uniform: (best chromosome, its cost, method)."""
    proposal, method = None, f"uniform BRKGA-{budget}"
    if policy:
        trained = train.load(weights / f"paper_{kind}.npy", paper.RECIPES[kind].sizes, graph.num_ops)
        actions = train.propose(trained, [graph], batch=1)[0]
        proposal, method = features.proposal(graph, actions), f"REGAL-{budget} ({paper.RECIPES[kind].label})"
    result = brkga.optimize(graph, kind, budget, proposal, seed)
    return result.best, result.best_cost, method


def report(graph: CompGraph, names: list[str], schedule: Trace) -> str:
    limit = ""
    if np.isfinite(graph.memory_limit):
        fits = schedule.peak <= graph.memory_limit * (1 + LIMIT_TOLERANCE)
        limit = f" (limit {graph.memory_limit:g}: {'fits' if fits else 'exceeds'})"
    lines = [f"graph {graph.name!r}: {graph.num_ops} ops; makespan {schedule.makespan:g}, peak memory "
             f"{schedule.peak:g}{limit}", "", "| op | device | start | finish |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {names[v]} | {schedule.device[v]} | {schedule.start[v]:g} | {schedule.finish[v]:g} |"
              for v in range(graph.num_ops)]
    lines.append("")
    for j, ops in enumerate(schedule.order):
        lines.append(f"device {j}: " + " -> ".join(names[v] for v in ops))
    for k, origin, target, when in schedule.transfers:
        lines.append(f"transfer {names[graph.producer[k]]}'s output: device {origin} -> {target} at {when:g}")
    return "\n".join(lines)


def plot(graph: CompGraph, names: list[str], schedule: Trace, out: str) -> tuple[str, str]:
    """``<out>_gantt.png`` and ``<out>_memory.png``."""
    devices = len(schedule.order)
    figure, axis = plt.subplots(figsize=(10, 1.2 + 0.8 * devices), dpi=120)
    for v in range(graph.num_ops):
        j = schedule.device[v]
        axis.broken_barh([(schedule.start[v], schedule.finish[v] - schedule.start[v])], (j - 0.4, 0.8),
                         facecolors=f"C{v % 10}", edgecolor="black", linewidth=0.3)
        if graph.num_ops <= 40:
            axis.text((schedule.start[v] + schedule.finish[v]) / 2, j, names[v], ha="center", va="center", fontsize=7)
    for _, origin, target, when in schedule.transfers:
        axis.annotate("", (when, target), (when, origin), arrowprops={"arrowstyle": "->", "color": "gray"})
    axis.set_yticks(range(devices), [f"device {j}" for j in range(devices)])
    axis.set_xlabel("time")
    axis.set_title(f"{graph.name}: makespan {schedule.makespan:g}", fontsize=9)
    figure.tight_layout()
    gantt = f"{out}_gantt.png"
    figure.savefig(gantt)
    plt.close(figure)
    figure, axis = plt.subplots(figsize=(10, 3), dpi=120)
    for j, events in enumerate(schedule.memory):
        times, held = zip(*sorted(events, key=lambda event: event[0]))
        axis.step(times, held, where="post", label=f"device {j}")
    if np.isfinite(graph.memory_limit):
        axis.axhline(graph.memory_limit, color="red", linestyle="--", linewidth=0.8, label="memory limit")
    axis.set_xlabel("time")
    axis.set_ylabel("memory held")
    axis.set_title(f"{graph.name}: peak memory {schedule.peak:g}", fontsize=9)
    axis.legend(fontsize=7)
    figure.tight_layout()
    memory = f"{out}_memory.png"
    figure.savefig(memory)
    plt.close(figure)
    return gantt, memory


def main(args: Any) -> None:
    graph, names = read_graph(args.graph)
    best, cost, method = solve(graph, args.objective, args.budget, args.seed, args.policy)
    schedule = trace(graph, best)
    print(f"{method}, objective {args.objective}: cost {cost:g}")
    print(report(graph, names, schedule))
    out = args.out or str(Path(args.graph).with_suffix(""))
    print("wrote", *plot(graph, names, schedule, out))
