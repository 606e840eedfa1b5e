"""`ctx.compile`: check the bounds and options, then run the compile steps in order, each reading the
`CompileOptions`: freeze and verify the PDG, the PDG passes (`timerl.pdg.pipeline`), dataflow grouping and
isl's schedule (`timerl.sched.schedule`), and lowering for the backend (`timerl.runtime.executor.Executable`,
which then chooses the swaps that run against the memory budget, `timerl.runtime.dryrun`: its dry run needs
each group's transient bytes as lowered). ``exe.stats["compile_phases"]`` has the
seconds of each step (and the scheduler's own steps, ``"schedule: isl"`` among them)."""

from __future__ import annotations

import time
from typing import Any, Mapping

import numpy as np

from timerl.backends.base import get_backend
from timerl.errors import TimeRLError, user_location
from timerl.options import FLAGS, CompileOptions, from_call
from timerl.pdg.graph import Graph
from timerl.pdg.pipeline import optimize_graph
from timerl.pdg.verify import verify
from timerl.symbolic import Symbol
from timerl.runtime.devices import check_devices, sharded_backend
from timerl.runtime.executor import Executable
from timerl.runtime.reference import ReferenceExecutable
from timerl.sched.demand import evaluable_everywhere
from timerl.sched import ast
from timerl.sched.schedule import schedule_graph

BACKENDS = ("reference", "torch", "jax")
_NOT_GIVEN: Any = type("NotGiven", (), {"__repr__": lambda self: "True"})()  # optimize's default, told apart


def resolve_bounds(ctx, bounds: dict) -> dict:
    resolved = {}
    by_name = {b.name: b for b in ctx.bounds}
    for key, value in bounds.items():
        symbol = by_name.get(key) if isinstance(key, str) else key
        if not isinstance(symbol, Symbol) or symbol not in set(ctx.bounds):
            raise TimeRLError(f"{user_location()}: {key!r} is not a bound of this context "
                              f"({', '.join(b.name for b in ctx.bounds)})")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TimeRLError(f"{user_location()}: bound {symbol.name} must be a positive int, got {value!r}")
        if symbol in resolved:
            raise TimeRLError(f"{user_location()}: bound {symbol.name} is given twice in bounds= (as the symbol and "
                              "as its name)")
        resolved[symbol] = int(value)
    used = set()
    for node in ctx.nodes:
        used |= {ctx.bound_of(d) for d in node.domain}
        for edge in node.inputs:
            for item in edge.index:
                used |= {s for s in item.symbols() if s.is_bound}
    missing = sorted(b.name for b in used if b not in resolved)
    if missing:
        raise TimeRLError(f"{user_location()}: compile needs a value for every bound the program uses; "
                          f"missing {', '.join(missing)}")
    for bound in ctx.bounds:
        resolved.setdefault(bound, 1)
    return resolved


def compile_program(ctx, bounds: dict, backend: str, *, seed: int = 0, device_memory: int | None = None,
                    swap: bool = False, optimize: bool = _NOT_GIVEN, vectorize: bool | None = None,
                    incrementalize: bool | None = None, scan_loops: bool | None = None,
                    recompute: bool | None = None, options: CompileOptions | None = None, devices: int = 1,
                    split: str | int = "envs", **unknown: Any):
    """``options``: a `CompileOptions` (every switch documented there). The loose flags are shorthands for
    it: ``optimize=False`` is the "unoptimized" preset, ``vectorize``, ``incrementalize``, ``scan_loops`` and
    ``recompute`` set their fields (and override ``optimize``); a flag that contradicts ``options=`` is an
    error."""
    if backend not in BACKENDS:
        raise TimeRLError(f"{user_location()}: unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if unknown:
        raise TimeRLError(f"{user_location()}: unknown compile options {sorted(unknown)}")
    flags = dict(zip(FLAGS, (vectorize, incrementalize, scan_loops, recompute)))
    device_memory = _check_options(bounds, seed, device_memory, swap, True if optimize is _NOT_GIVEN else optimize,
                                   **flags)
    flags = {name: None if flag is None else bool(flag) for name, flag in flags.items()}
    optimize = None if optimize is _NOT_GIVEN else bool(optimize)
    chosen = from_call(options, optimize, flags).resolved(device_memory)
    started = time.perf_counter()
    phases: dict[str, float] = {}
    resolved = resolve_bounds(ctx, bounds)
    graph = ctx.graph()
    verify(graph, resolved)
    batch = check_devices(graph, backend, devices, split, device_memory)
    phases["graph"] = time.perf_counter() - started
    if backend == "reference":
        return ReferenceExecutable(graph, resolved, seed, time.perf_counter() - started)
    clock = time.perf_counter()
    graph = optimize_pdg(graph, resolved, chosen)
    phases["pdg passes"] = time.perf_counter() - clock
    clock = time.perf_counter()
    scheduled_swaps = swap and device_memory is not None
    result = schedule_graph(graph, resolved, fuse=chosen.fusion, memory_aware=chosen.memory_aware,
                            swaps=scheduled_swaps, per_iteration=chosen.per_iteration_fusion,
                            split_tails=chosen.distributes(backend), absorb_state=chosen.state_fusion)
    schedule = result.schedule  # which of its swaps run is chosen by `Executable`, after lowering
    phases["schedule"] = time.perf_counter() - clock
    phases.update((f"schedule: {step}", seconds) for step, seconds in result.phases.items())  # CPU seconds
    clock = time.perf_counter()
    array_backend = get_backend(backend) if batch is None else sharded_backend(devices, batch)
    phases["backend"] = time.perf_counter() - clock
    clock = time.perf_counter()
    executable = Executable(graph, resolved, array_backend, schedule, result.groups, seed, device_memory, swap,
                            chosen, 0.0)
    phases["lowering"] = time.perf_counter() - clock
    executable.stats.update(compile_seconds=time.perf_counter() - started, compile_phases=phases,
                            memory_choices=memory_choices(chosen, executable.schedule, device_memory, swap))
    if batch is not None:
        executable.stats["devices"] = {"devices": devices, "batch": batch, "placed": array_backend.placed}
    return executable


def memory_choices(options: CompileOptions, schedule: ast.Schedule, device_memory: int | None,
                   swap: bool) -> dict[str, Any]:
    """What the compiler chose for memory (``exe.stats["memory_choices"]``): running sums (``incrementalize``,
    on by itself under a ``device_memory`` budget), the memory-aware schedule, recomputation, vectorized loops,
    and the offloads it kept against the budget (with ``swap=True``)."""
    return {"device_memory": device_memory, "incrementalize": options.incrementalize,
            "memory_aware": options.memory_aware, "recompute": options.recompute,
            "vectorize": options.vectorize, "swap": swap, "offloads_kept": schedule.count(ast.Offload)}


def optimize_pdg(graph: Graph, bounds: Mapping[Symbol, int], options: CompileOptions = CompileOptions()) -> Graph:
    """The PDG passes of ``options`` (`timerl.pdg.pipeline`), with the scheduler's answer to which ops can be
    evaluated everywhere for the contributions pass (the PDG layer does not import the scheduler)."""
    return optimize_graph(graph, bounds, options,
                          evaluable_everywhere=lambda g, ops: evaluable_everywhere(g, bounds, ops))


def _check_options(bounds: Any, seed: Any, device_memory: Any, swap: Any, optimize: Any,
                   vectorize: Any = None, incrementalize: Any = None, scan_loops: Any = None,
                   recompute: Any = None) -> int | None:
    """Options are checked when compiling, so a bad one names the user's `compile` line, not a later run."""
    if not isinstance(bounds, dict):
        raise TimeRLError(f"{user_location()}: bounds= is a dict from bound (or its name) to int, got {bounds!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TimeRLError(f"{user_location()}: seed= is an int, got {seed!r}")
    flags = (("swap", swap), ("optimize", optimize)) + tuple(
        (name, flag) for name, flag in (("vectorize", vectorize), ("incrementalize", incrementalize),
                                        ("scan_loops", scan_loops), ("recompute", recompute))
        if flag is not None)
    for name, flag in flags:
        if not isinstance(flag, (bool, np.bool_)):
            raise TimeRLError(f"{user_location()}: {name}= is True or False, got {flag!r}")
    if device_memory is None:
        return None
    if isinstance(device_memory, bool) or not isinstance(device_memory, (int, np.integer)) or device_memory < 0:
        raise TimeRLError(f"{user_location()}: device_memory= is a number of bytes (an int >= 0) or None for "
                          f"unlimited, got {device_memory!r}")
    return int(device_memory)
