"""The device bytes a schedule needs, found by walking it without computing anything.

Every statement stores and frees the same number of bytes whenever it runs (when all shapes are static), so
replaying the loops with byte counts alone gives the exact peak of a real run without swapping. This is the
figure a `DeviceOutOfMemoryError` states: ``device_memory`` set to it fits. With scheduled swaps, the same
replay decides at compile time which offloads and fetches to keep (`choose_swaps`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from timerl.runtime.plan import output_bytes, static_bytes
from timerl.runtime.walk import AstInterpreter, Run
from timerl.sched import ast


def required_device_bytes(schedule: ast.Schedule, graph: Any, groups: dict) -> int | None:
    """Peak device bytes of running ``schedule``; None when some size is only known at run time."""
    counter = _counter(graph, groups)
    if counter is None:
        return None
    counter.build(schedule.root, ())([])
    return counter.peak


def choose_swaps(schedule: ast.Schedule, graph: Any, groups: dict, budget: int) -> ast.Schedule:
    """Keep the scheduled offloads and fetches (paper §6.2) of the fewest groups, largest points first, that
    bring the schedule's peak within ``budget``; all of them when even that does not fit (the pool's reactive
    swapping is the fallback), none when it fits without. Decided at compile time by dry runs."""
    counter = _counter(graph, groups)
    if counter is None:
        return schedule
    swapped = sorted(_swapped_groups(schedule.root), key=lambda g: (-counter.stored[g], g))
    if not swapped:
        return schedule

    def peak(kept: int) -> int:
        trial = _counter(graph, groups)
        trial.swapping = set(swapped[:kept])
        trial.build(schedule.root, ())([])
        return trial.peak

    if peak(0) <= budget:
        kept = 0
    elif peak(len(swapped)) > budget:
        kept = len(swapped)
    else:  # the peak only falls as more groups swap: the smallest prefix that fits, by bisection
        low, high = 0, len(swapped)
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if peak(middle) <= budget else (middle, high)
        kept = high
    return ast.Schedule(_only_swaps_of(schedule.root, set(swapped[:kept])), schedule.labels)


def _swapped_groups(node: ast.AstNode) -> set[int]:
    if isinstance(node, (ast.Offload, ast.Fetch)):
        return {node.node}
    children = _children(node)
    return set().union(*(_swapped_groups(child) for child in children)) if children else set()


def _children(node: ast.AstNode) -> tuple:
    if isinstance(node, ast.Sequence):
        return node.body
    if isinstance(node, ast.Loop):
        return (node.body,)
    if isinstance(node, ast.If):
        return (node.then,) if node.orelse is None else (node.then, node.orelse)
    return ()


def _only_swaps_of(node: ast.AstNode, kept: set[int]) -> ast.AstNode:
    """The program without the offloads and fetches of groups outside ``kept``."""
    if isinstance(node, ast.Sequence):
        body = tuple(_only_swaps_of(child, kept) for child in node.body
                     if not isinstance(child, (ast.Offload, ast.Fetch)) or child.node in kept)
        return replace(node, body=body)
    if isinstance(node, ast.Loop):
        return replace(node, body=_only_swaps_of(node.body, kept))
    if isinstance(node, ast.If):
        orelse = None if node.orelse is None else _only_swaps_of(node.orelse, kept)
        return replace(node, then=_only_swaps_of(node.then, kept), orelse=orelse)
    if isinstance(node, (ast.Offload, ast.Fetch)) and node.node not in kept:
        return ast.Sequence(())
    return node


def _counter(graph: Any, groups: dict) -> _ByteCounter | None:
    stored: dict[int, int] = {}
    transient: dict[int, int] = {}
    for group in groups.values():
        sizes = {n: static_bytes(graph.nodes[n]) for n in group.members if graph.nodes[n].outputs}
        if any(size is None for size in sizes.values()):
            return None
        stored[group.id] = sum(sizes[n] for n in group.freed_later)
        transient[group.id] = sum(sizes[n] for n in group.freed_inside)
    return _ByteCounter(stored, transient, graph)


class _ByteCounter(AstInterpreter):
    """Statements add and remove their groups' bytes; loops and conditionals run as the executor's do."""

    def __init__(self, stored: dict[int, int], transient: dict[int, int], graph: Any) -> None:
        self.stored, self.transient, self.graph = stored, transient, graph
        self.live = self.peak = 0
        self.swapping: set[int] | None = None  # groups whose offloads and fetches count (None: all)

    def _execute(self, node: ast.Execute, scope) -> Run:
        adds, passing = self.stored[node.node], self.transient[node.node]

        def execute(counters: list) -> None:
            self.live += adds
            self.peak = max(self.peak, self.live + passing)

        return execute

    def _deallocate(self, node: ast.Deallocate, scope) -> Run:
        """Whole members, or (`timeline.Freed`) some of their outputs: static, as every size here."""
        frees = self.stored[node.node] if node.parts is None else sum(
            output_bytes(self.graph.nodes[member], k) for member, outputs in node.parts for k in outputs)

        def deallocate(counters: list) -> None:
            self.live -= frees

        return deallocate

    def _offload(self, node: ast.Offload, scope) -> Run:
        if self.swapping is not None and node.node not in self.swapping:
            return lambda counters: None
        moved = self.stored[node.node]

        def offload(counters: list) -> None:
            self.live -= moved

        return offload

    def _fetch(self, node: ast.Fetch, scope) -> Run:
        if self.swapping is not None and node.node not in self.swapping:
            return lambda counters: None
        moved = self.stored[node.node]

        def fetch(counters: list) -> None:
            self.live += moved
            self.peak = max(self.peak, self.live)

        return fetch
