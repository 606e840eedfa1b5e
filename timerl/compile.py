"""`ctx.compile`: check the bounds and options, freeze and verify the PDG, hand it to a backend."""

from __future__ import annotations

import time
from typing import Any

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
                    swap: bool = False, optimize: bool = True, **options: Any):
    if backend not in BACKENDS:
        raise TimeRLError(f"{user_location()}: unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if options:
        raise TimeRLError(f"{user_location()}: unknown compile options {sorted(options)}")
    started = time.perf_counter()
    resolved = resolve_bounds(ctx, bounds)
    graph = ctx.graph()
    verify(graph, resolved)
    if backend == "reference":
        from timerl.runtime.reference import ReferenceExecutable

        return ReferenceExecutable(graph, resolved, seed, time.perf_counter() - started)
    from timerl.runtime.executor import build_executable

    return build_executable(graph, resolved, backend, seed=seed, device_memory=device_memory, swap=swap,
                            optimize=optimize, started=started)
