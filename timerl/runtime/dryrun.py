"""The device bytes a schedule needs, found by walking it without computing anything.

A statement stores and frees bytes that depend at most on its point (a window ``r[t:T]`` has ``T - t`` rows):
sizes are symbolic expressions of the point and the bounds, evaluated as the loops are replayed, so replaying
the loops with byte counts alone gives the exact peak of a real run without swapping. This is the
figure a `DeviceOutOfMemoryError` states: ``device_memory`` set to it fits. With scheduled swaps, the same
replay decides at compile time which offloads and fetches to keep (`choose_swaps`).
"""

from __future__ import annotations

import functools
import operator
from dataclasses import replace
from typing import Any, Mapping

import numpy as np

from timerl.symbolic import Expr, Symbol, compile_function
from timerl.runtime.lifetimes import Candidates
from timerl.runtime.walk import AstInterpreter, Run
from timerl.sched import ast

Size = int | Expr  # bytes, possibly depending on a statement's point


Transient = Mapping[int, Candidates]  # `timerl.runtime.plan.GroupLowering.transient`


def required_device_bytes(schedule: ast.Schedule, graph: Any, groups: dict, bounds: Mapping[Symbol, int],
                          transient: Transient) -> int:
    """Peak device bytes of running ``schedule`` (without the pool's reactive swapping)."""
    counter = _ByteCounter(graph, groups, bounds, transient)
    counter.build(schedule.root, ())([])
    return counter.peak


SWAP_FRACTION = 4096  # points smaller than budget / SWAP_FRACTION bytes are never swapped (paper §6.2's threshold)


def choose_swaps(schedule: ast.Schedule, graph: Any, groups: dict, budget: int, bounds: Mapping[Symbol, int],
                 transient: Transient) -> ast.Schedule:
    """Keep the scheduled offloads and fetches (paper §6.2) of the fewest swap units that bring the schedule's
    peak within ``budget``, none when it fits without, and every unit that lowers the peak alone when even all
    of them do not fit (the pool's reactive swapping is the fallback). Units are tried in the order of how much
    each one alone lowers the peak (then the others, largest points first); the smallest prefix that fits is
    found by bisection. Units of points smaller than
    ``budget / SWAP_FRACTION`` bytes are dropped (copies cost more than they save). Decided at compile time by
    dry runs, so a program whose swapped peak fits never runs out of device memory.

    The units are chosen with each fetch right before its reader; then every fetch moves as far ahead of its
    reader as the budget allows (`ast.Fetch.distance`): the largest candidate distance whose dry run, with
    the fetched bytes resident from the earlier fetch on, still fits (0 where none does)."""

    counter = _ByteCounter(graph, groups, bounds, transient)
    every_unit = set(_swap_units(schedule.root))
    at_readers = counter.build(_only_swaps_of(schedule.root, every_unit, 0), ())  # built once, run per trial

    def peak(kept: set[int], replay: Run = at_readers) -> int:
        counter.swapping, counter.live, counter.peak = kept, 0, 0
        counter.freed.clear()
        counter.away.clear()
        replay([])
        return counter.peak

    base = peak(set())
    if base <= budget:
        return ast.Schedule(_only_swaps_of(schedule.root, set(), 0), schedule.labels)
    sizes = counter
    units = {unit: group for unit, group in _swap_units(schedule.root).items()
             if sizes.largest(group) * SWAP_FRACTION >= budget}
    gains = {unit: base - peak({unit}) for unit in units}
    helping = sorted((unit for unit in units if gains[unit] > 0), key=lambda unit: (-gains[unit], unit))
    order = helping + sorted((unit for unit in units if gains[unit] <= 0),
                             key=lambda unit: (-sizes.largest(units[unit]), unit))  # may help together
    if peak(set(order)) > budget:
        kept = len(helping) if helping else len(order)
    else:  # the peak falls as more units swap: the smallest prefix that fits, by bisection
        low, high = 0, len(order)
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if peak(set(order[:middle])) <= budget else (middle, high)
        kept = high
    chosen = set(order[:kept])
    fits = peak(chosen) <= budget
    distances = sorted(_fetch_distances(schedule.root) - {0}, reverse=True) if chosen and fits else []
    for distance in distances:
        program = _only_swaps_of(schedule.root, chosen, distance)
        if peak(chosen, counter.build(program, ())) <= budget:
            return ast.Schedule(program, schedule.labels)
    return ast.Schedule(_only_swaps_of(schedule.root, chosen, 0), schedule.labels)


def fitting_budget(schedule: ast.Schedule, graph: Any, groups: dict, bounds: Mapping[Symbol, int],
                   transient: Transient, too_small: int) -> int:
    """A device budget with which ``schedule`` (its swaps not yet chosen) runs, swapping as `choose_swaps`
    decides for that budget: what a `DeviceOutOfMemoryError` under ``swap=True`` states, so that following it
    succeeds. The least such budget above ``too_small``, by bisection; the peak without any swap always fits
    (`choose_swaps` then keeps none)."""

    def fits(budget: int) -> bool:
        chosen = choose_swaps(schedule, graph, groups, budget, bounds, transient)
        return required_device_bytes(chosen, graph, groups, bounds, transient) <= budget

    high = required_device_bytes(ast.Schedule(_only_swaps_of(schedule.root, set(), 0), schedule.labels), graph,
                                 groups, bounds, transient)
    low = min(too_small, high - 1)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if fits(middle) else (middle, high)
    return high


def _fetch_distances(node: ast.AstNode) -> set[int]:
    """The distances of the fetches in the program (`ast.Fetch.distance`)."""
    if isinstance(node, ast.Fetch):
        return {node.distance}
    return set().union(*(_fetch_distances(child) for child in _children(node)))


def _swap_units(node: ast.AstNode) -> dict[int, int]:
    """Swap unit -> its group, for every offload and fetch in the program."""
    if isinstance(node, (ast.Offload, ast.Fetch)):
        return {node.unit: node.node}
    found: dict[int, int] = {}
    for child in _children(node):
        found.update(_swap_units(child))
    return found


def _children(node: ast.AstNode) -> tuple:
    if isinstance(node, ast.Sequence):
        return node.body
    if isinstance(node, ast.Loop):
        return (node.body,)
    if isinstance(node, ast.If):
        return (node.then,) if node.orelse is None else (node.then, node.orelse)
    return ()


def _only_swaps_of(node: ast.AstNode, kept: set[int], distance: int) -> ast.AstNode:
    """The program without the offloads and fetches of swap units outside ``kept``, without the fetches of
    other distances than ``distance``, and without the loops and conditionals left empty."""
    if isinstance(node, ast.Sequence):
        body = tuple(_only_swaps_of(child, kept, distance) for child in node.body if _kept(child, kept, distance))
        return replace(node, body=tuple(child for child in body if child != _EMPTY))
    if isinstance(node, ast.Loop):
        body = _only_swaps_of(node.body, kept, distance)
        return _EMPTY if body == _EMPTY else replace(node, body=body)
    if isinstance(node, ast.If):
        then = _only_swaps_of(node.then, kept, distance)
        orelse = None if node.orelse is None else _only_swaps_of(node.orelse, kept, distance)
        if orelse == _EMPTY:
            orelse = None
        return _EMPTY if then == _EMPTY and orelse is None else replace(node, then=then, orelse=orelse)
    if not _kept(node, kept, distance):
        return _EMPTY
    return node


_EMPTY = ast.Sequence(())


def _kept(node: ast.AstNode, kept: set[int], distance: int) -> bool:
    if isinstance(node, ast.Fetch):
        return node.unit in kept and node.distance == distance
    return not isinstance(node, ast.Offload) or node.unit in kept


class _ByteCounter(AstInterpreter):
    """Statements add and remove their groups' bytes; loops and conditionals run as the executor's do."""

    def __init__(self, graph: Any, groups: dict, bounds: Mapping[Symbol, int], transient: Transient) -> None:
        self.graph, self.groups, self.transient = graph, groups, transient
        self.bounds = {bound: int(value) for bound, value in bounds.items()}
        self.live = self.peak = 0
        # the pool's state of each stored point that the byte counts depend on, keys (member, point): bytes
        # freed already (some outputs, each after its own last reader), and the points on the host
        self.freed: dict[tuple, int] = {}
        self.away: set[tuple] = set()
        self.swapping: set[int] | None = None  # swap units whose offloads and fetches count (None: all),
        # read as the replay runs: one built replay serves every trial of `choose_swaps`

    # ---- sizes --------------------------------------------------------------------------------------------
    def _bytes(self, parts: tuple[tuple[int, tuple[int, ...]], ...]) -> tuple[tuple[Symbol, ...], Size]:
        """The bytes of these (member, outputs) of one point, as an expression of the members' dimensions."""
        total: Size = 0
        dims: tuple[Symbol, ...] = ()
        for member_id, outputs in parts:
            node = self.graph.nodes[member_id]
            dims = dims or node.domain
            for k in outputs:
                produced = node.outputs[k]
                elements = functools.reduce(operator.mul, produced.shape, 1)
                total = total + elements * np.dtype(produced.dtype).itemsize
        if isinstance(total, Expr):
            total = total.substitute(self.bounds)
            value = total.constant_value()
            total = total if value is None else value
        return dims, total

    def _whole(self, members: tuple[int, ...]) -> tuple[tuple[Symbol, ...], Size]:
        return self._bytes(tuple((m, tuple(range(len(self.graph.nodes[m].outputs)))) for m in members))

    def _at(self, size: tuple[tuple[Symbol, ...], Size], point: tuple[Expr, ...], scope):
        """A function of the loop counters giving the bytes at the statement's point."""
        dims, total = size
        if isinstance(total, int):
            return lambda counters: total
        at_point = total.substitute(dict(zip(dims, point)))
        function = compile_function((at_point,), scope)
        return lambda counters: function(*counters)[0]

    def largest(self, group: int) -> int:
        """The most bytes a point of ``group`` stores (to order the groups that may swap)."""
        dims, total = self._whole(self.groups[group].freed_later)
        if isinstance(total, int):
            return total
        extents = {dim: self.bounds[self.graph.bound_of(dim)] - 1 for dim in dims}
        return max(total.substitute({d: 0 for d in dims}).constant_value() or 0,
                   total.substitute(extents).constant_value() or 0)

    # ---- statements ---------------------------------------------------------------------------------------
    def _execute(self, node: ast.Execute, scope) -> Run:
        group = self.groups[node.node]
        adds = self._at(self._whole(group.freed_later), node.point, scope)
        passing = []  # the group's candidates (`timerl.runtime.lifetimes.free_after_last_use`): the most counts
        for static, dynamic in self.transient[node.node]:
            dims, dynamic_bytes = self._whole(dynamic)
            passing.append(self._at((dims, static + dynamic_bytes), node.point, scope))

        def execute(counters: list) -> None:
            self.live += adds(counters)
            self.peak = max(self.peak, self.live + max([0] + [candidate(counters) for candidate in passing]))

        return execute

    def _deallocate(self, node: ast.Deallocate, scope) -> Run:
        """Whole members, or (`timeline.Freed`) some of their outputs, as the pool frees them: bytes of a member
        on the host leave the host, and a member leaves the pool when its last outputs are freed."""
        where = compile_function(node.point, scope)
        parts = (tuple((m, None) for m in self.groups[node.node].freed_later) if node.parts is None
                 else node.parts)
        sizes = [(member, self._at(self._whole((member,)), node.point, scope),
                  None if outputs is None else self._at(self._bytes(((member, outputs),)), node.point, scope))
                 for member, outputs in parts]
        freed, away = self.freed, self.away

        def deallocate(counters: list) -> None:
            point = where(*counters)
            for member, whole, part in sizes:
                key = (member, point)
                before = freed.pop(key, 0)
                size = whole(counters) - before if part is None else part(counters)
                if part is not None and before + size < whole(counters):
                    freed[key] = before + size
                if key in away:
                    if part is None or key not in freed:
                        away.discard(key)
                else:
                    self.live -= size

        return deallocate

    def _offload(self, node: ast.Offload, scope) -> Run:
        """What is left of each member (outputs freed after their own last reader do not move) goes to the
        host; members there already stay (as in the pool)."""
        return self._move(node, scope, -1)

    def _fetch(self, node: ast.Fetch, scope) -> Run:
        return self._move(node, scope, 1)

    def _move(self, node: ast.Offload | ast.Fetch, scope, sign: int) -> Run:
        where = compile_function(node.point, scope)
        members = node.members or self.groups[node.node].freed_later
        sizes = [(member, self._at(self._whole((member,)), node.point, scope)) for member in members]
        unit, freed, away = node.unit, self.freed, self.away

        def move(counters: list) -> None:
            if self.swapping is not None and unit not in self.swapping:
                return
            point = where(*counters)
            for member, whole in sizes:
                key = (member, point)
                if (key in away) == (sign < 0):  # already there: the pool moves nothing
                    continue
                if sign < 0:
                    away.add(key)
                else:
                    away.discard(key)
                self.live += sign * (whole(counters) - freed.get(key, 0))
            self.peak = max(self.peak, self.live)

        return move
