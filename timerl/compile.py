"""`ctx.compile`: check the bounds and options, freeze and verify the PDG, hand it to a backend."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from timerl.errors import TimeRLError, user_location
from timerl.pdg.verify import verify
from timerl.rt.symbolic import Symbol

BACKENDS = ("reference", "torch", "jax")


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
                    swap: bool = False, optimize: bool = True, vectorize: bool | None = None,
                    incrementalize: bool | None = None, scan_loops: bool | None = None, recompute: bool = False,
                    **options: Any):
    """``vectorize`` (default: ``optimize``) runs loops statement by statement with batched kernels where the
    dependences allow (`timerl.runtime.batch`); results are the same either way. ``incrementalize`` (default:
    ``optimize`` with ``device_memory`` set) turns sums over a whole dimension into running sums
    (`timerl.pdg.incrementalize`): memory then follows ``n``-step windows, not ``T``, but the loops holding a
    running sum no longer batch, so without a memory budget it is off unless asked for. ``scan_loops`` (default:
    ``optimize``; jax only, without ``device_memory``) compiles a loop whose statements are all array kernels
    into one `jax.lax.scan` (`timerl.runtime.jax_scan`); results are the same either way. ``recompute``
    (default off; with ``optimize``) computes values that wait for a late reader again before it, where the
    flops are few for the bytes freed (`timerl.pdg.recompute`); results are the same either way."""
    if backend not in BACKENDS:
        raise TimeRLError(f"{user_location()}: unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if options:
        raise TimeRLError(f"{user_location()}: unknown compile options {sorted(options)}")
    device_memory = _check_options(bounds, seed, device_memory, swap, optimize, vectorize, incrementalize,
                                   scan_loops, recompute)
    if incrementalize is None:
        incrementalize = optimize and device_memory is not None
    started = time.perf_counter()
    resolved = resolve_bounds(ctx, bounds)
    graph = ctx.graph()
    verify(graph, resolved)
    if backend == "reference":
        from timerl.runtime.reference import ReferenceExecutable

        return ReferenceExecutable(graph, resolved, seed, time.perf_counter() - started)
    from timerl.runtime.executor import build_executable

    return build_executable(graph, resolved, backend, seed=seed, device_memory=device_memory, swap=swap,
                            optimize=optimize, vectorize=optimize if vectorize is None else vectorize,
                            incrementalize=bool(incrementalize), recompute=bool(recompute), started=started,
                            scan_loops=optimize if scan_loops is None else bool(scan_loops))


def _check_options(bounds: Any, seed: Any, device_memory: Any, swap: Any, optimize: Any,
                   vectorize: Any = None, incrementalize: Any = None, scan_loops: Any = None,
                   recompute: Any = False) -> int | None:
    """Options are checked when compiling, so a bad one names the user's `compile` line, not a later run."""
    if not isinstance(bounds, dict):
        raise TimeRLError(f"{user_location()}: bounds= is a dict from bound (or its name) to int, got {bounds!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TimeRLError(f"{user_location()}: seed= is an int, got {seed!r}")
    flags = (("swap", swap), ("optimize", optimize), ("recompute", recompute)) + tuple(
        (name, flag) for name, flag in (("vectorize", vectorize), ("incrementalize", incrementalize),
                                        ("scan_loops", scan_loops))
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
