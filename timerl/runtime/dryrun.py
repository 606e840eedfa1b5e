"""The device bytes a schedule needs, found by walking it without computing anything.

Every statement stores and frees the same number of bytes whenever it runs (when all shapes are static), so
replaying the loops with byte counts alone gives the exact peak of a real run without swapping. This is the
figure a `DeviceOutOfMemoryError` states: ``device_memory`` set to it fits.
"""

from __future__ import annotations

from typing import Any

from timerl.runtime.plan import static_bytes
from timerl.rt.symbolic import compile_function
from timerl.sched import ast


def required_device_bytes(schedule: ast.Schedule, graph: Any, groups: dict) -> int | None:
    """Peak device bytes of running ``schedule``; None when some size is only known at run time."""
    stored: dict[int, int] = {}
    transient: dict[int, int] = {}
    for group in groups.values():
        sizes = {n: static_bytes(graph.nodes[n]) for n in group.members if graph.nodes[n].outputs}
        if any(size is None for size in sizes.values()):
            return None
        stored[group.id] = sum(sizes[n] for n in group.freed_later)
        transient[group.id] = sum(sizes[n] for n in group.freed_inside)
    state = {"live": 0, "peak": 0}

    def build(node: ast.AstNode, scope: tuple):
        if isinstance(node, ast.Sequence):
            parts = [build(child, scope) for child in node.body]
            return lambda counters: [part(counters) for part in parts]
        if isinstance(node, ast.Loop):
            limits = compile_function((node.start, node.stop), scope)
            body = build(node.body, scope + (node.var,))

            def loop(counters: list) -> None:
                start, stop = limits(*counters)
                for value in range(start, stop, node.step):
                    body(counters + [value])

            return loop
        if isinstance(node, ast.If):
            test = compile_function((node.cond,), scope)
            then = build(node.then, scope)
            orelse = build(node.orelse, scope) if node.orelse is not None else None

            def branch(counters: list) -> None:
                if test(*counters)[0]:
                    then(counters)
                elif orelse is not None:
                    orelse(counters)

            return branch
        if isinstance(node, ast.Execute):
            adds, passing = stored[node.node], transient[node.node]

            def execute(counters: list) -> None:
                state["live"] += adds
                state["peak"] = max(state["peak"], state["live"] + passing)

            return execute
        if isinstance(node, ast.Deallocate):
            frees = stored[node.node]

            def deallocate(counters: list) -> None:
                state["live"] -= frees

            return deallocate
        return lambda counters: None

    build(schedule.root, ())([])
    return state["peak"]
