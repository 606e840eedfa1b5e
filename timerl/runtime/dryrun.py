"""The device bytes a schedule needs, found by walking it without computing anything.

Every statement stores and frees the same number of bytes whenever it runs (when all shapes are static), so
replaying the loops with byte counts alone gives the exact peak of a real run without swapping. This is the
figure a `DeviceOutOfMemoryError` states: ``device_memory`` set to it fits.
"""

from __future__ import annotations

from typing import Any

from timerl.runtime.plan import static_bytes
from timerl.runtime.walk import AstInterpreter, Run
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
    counter = _ByteCounter(stored, transient)
    counter.build(schedule.root, ())([])
    return counter.peak


class _ByteCounter(AstInterpreter):
    """Statements add and remove their groups' bytes; loops and conditionals run as the executor's do."""

    def __init__(self, stored: dict[int, int], transient: dict[int, int]) -> None:
        self.stored, self.transient = stored, transient
        self.live = self.peak = 0

    def _execute(self, node: ast.Execute, scope) -> Run:
        adds, passing = self.stored[node.node], self.transient[node.node]

        def execute(counters: list) -> None:
            self.live += adds
            self.peak = max(self.peak, self.live + passing)

        return execute

    def _deallocate(self, node: ast.Deallocate, scope) -> Run:
        frees = self.stored[node.node]

        def deallocate(counters: list) -> None:
            self.live -= frees

        return deallocate

    def _offload(self, node: ast.AstNode, scope) -> Run:
        return lambda counters: None

    _fetch = _offload
