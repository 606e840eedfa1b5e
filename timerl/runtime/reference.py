"""The reference interpreter: the oracle every backend and every transformation is tested against.

It evaluates points straight from the PDG with NumPy, on demand from the sinks, memoizing every point
(an explicit stack rather than recursion, so a recurrence over T = 100,000 steps works). There is no
scheduling and no optimization here, on purpose: the simpler this is, the more it can be trusted.
"""

from __future__ import annotations

import itertools
import sys
import time
from typing import Any, Mapping


import timerl.ops  # noqa: F401
from timerl.ops.registry import ACCUMULATE, MERGE
from timerl.errors import DomainError, ScheduleError, TimeRLError, user_location
from timerl.pdg.graph import Graph, Node
from timerl.backends.numpy_backend import NumpyBackend
from timerl.runtime.evaluate import evaluate
from timerl.runtime.run_lock import one_run_at_a_time
from timerl.runtime.runs import stop_flag
from timerl.runtime.access import EdgeReader, condition_function, empty_stats, point_dict, stack_range
from timerl.symbolic import Symbol

_EXPANDING = 1
Key = tuple[int, tuple[int, ...]]


class ReferenceInterpreter:
    def __init__(self, graph: Graph, bounds: Mapping[Symbol, int], seed: int = 0) -> None:
        self.graph = graph
        self.bounds = dict(bounds)
        self.seed = seed
        self.memo: dict[Key, tuple[Any, ...]] = {}
        self.readers = {n.id: [EdgeReader(e, n.domain, self.bounds) for e in n.inputs] for n in graph.nodes}
        self.sizes = {n.id: tuple(self.bounds[graph.bound_of(d)] for d in n.domain) for n in graph.nodes}
        self.defined = {n.id: condition_function(n.definition_condition(), n.domain, self.bounds)
                        for n in graph.nodes}
        self._evaluable: dict[Key, bool] = {}
        self.arrays = NumpyBackend()  # one per program: its kernel cache is keyed by node id

    # ---- driving ----------------------------------------------------------------------------------------------
    def run(self) -> None:
        """Every point of every root (sink, UDF), in the program's lexicographic order of points (a dimension
        a root does not vary over counts as 0), ties in the order the roots were created: side effects
        happen in the order of the loop nest a user would write, whatever they read."""
        position_of = {id(d): k for k, d in enumerate(self.graph.dims)}
        work = []
        for node in self.graph.nodes:
            if node.category.root:
                where = [position_of[id(d)] for d in node.domain]
                for point in self.points(node):
                    full = [0] * len(position_of)
                    for position, coordinate in zip(where, point):
                        full[position] = coordinate
                    work.append((tuple(full), node.id, point))
        for _, node_id, point in sorted(work):
            self.value(node_id, point)
        # then every defined point of every placeholder the sinks use, read or not: the compiled backends compute
        # a placeholder whole, so a branch that fails at a point nothing reads fails on every backend alike
        done: set[int] = set()
        while used := {n for n, _ in self.memo if self.graph.nodes[n].category is MERGE} - done:
            for node_id in sorted(used):
                for point in self.points(self.graph.nodes[node_id]):
                    self.value(node_id, point)
            done |= used

    def points(self, node: Node):
        check = self.defined[node.id]
        for point in itertools.product(*(range(s) for s in self.sizes[node.id])):
            if check is None or check(point):
                yield point

    # ---- evaluation ---------------------------------------------------------------------------------------------
    def value(self, node_id: int, point: tuple[int, ...]) -> tuple[Any, ...]:
        root: Key = (node_id, tuple(point))
        memo = self.memo
        if root in memo:
            return memo[root]
        self._check_defined(root, None)
        state: dict[Key, int] = {}
        stack: list[Key] = [root]
        while stack:
            key = stack[-1]
            if key in memo:
                stack.pop()
                continue
            node = self.graph.nodes[key[0]]
            plan = self._plan(node, key[1])
            if state.get(key) != _EXPANDING:
                state[key] = _EXPANDING
                for child in _children(plan):
                    if child in memo:
                        continue
                    if state.get(child) == _EXPANDING:
                        raise self._cycle_error(stack, child)
                    self._check_defined(child, key)
                    stack.append(child)
                continue
            memo[key] = self._compute(node, key[1], plan)
            stack.pop()
        return memo[root]

    def _plan(self, node: Node, point: tuple[int, ...]) -> list[tuple[int, list[Key], tuple[int, ...], bool]]:
        """For each input read at ``point``: (slot, producer keys, range lengths, masked)."""
        readers = self.readers[node.id]
        if node.category is MERGE:
            active = [k for k, r in enumerate(readers) if r.active(point)]
            if not active:
                raise DomainError(f"{node.label()}: no branch defines the point "
                                  f"{point_dict(node.domain, point)}")
            if len(active) > 1:
                raise DomainError(f"{node.label()}: branches {active} overlap at {point_dict(node.domain, point)}")
            readers_used = [(active[0], readers[active[0]])]
        else:
            readers_used = [(k, r) for k, r in enumerate(readers) if r.active(point)]
        plan = []
        if node.category is ACCUMULATE:  # an inactive read contributes nothing, in its slot (windows align)
            used = {slot for slot, _ in readers_used}
            plan = [(slot, [], (), True) for slot in range(len(readers)) if slot not in used]
        for slot, reader in readers_used:
            producer = reader.edge.producer
            points, lengths = reader.points(point)
            masked_by = reader.edge.masked_by
            if masked_by is not None:
                points = [q for q in points if self.evaluable(masked_by, q)]
            plan.append((slot, [(producer, q) for q in points], lengths, masked_by is not None))
        return sorted(plan, key=lambda entry: entry[0])

    def _check_defined(self, key: Key, reader: Key | None) -> None:
        node_id, point = key
        sizes = self.sizes[node_id]
        check = self.defined[node_id]
        inside = all(0 <= c < s for c, s in zip(point, sizes))
        if inside and (check is None or check(point) or self.graph.nodes[node_id].category is MERGE):
            return
        node = self.graph.nodes[node_id]
        where = point_dict(node.domain, point)
        by = f", read by {self.graph.nodes[reader[0]].label()}" if reader else ""
        raise DomainError(f"read of {node.label()} at {where}, outside its domain{by}")

    def _compute(self, node: Node, point: tuple[int, ...], plan) -> tuple[Any, ...]:
        inputs = []
        for slot, keys, lengths, masked in plan:
            values = [self.memo[k][self.graph.nodes[node.id].inputs[slot].output] for k in keys]
            if masked:
                inputs.append([(k[1], v) for k, v in zip(keys, values)])
            elif lengths:
                inputs.append(stack_range(values, lengths, self.graph, node.inputs[slot], self.arrays))
            else:
                inputs.append(values[0])
        return evaluate(node, point, inputs, self.seed, self.bounds, self.arrays)

    def evaluable(self, node_id: int, point: tuple[int, ...]) -> bool:
        """Whether ``node_id`` can be evaluated at ``point``: inside its definition domain, and (for ops that
        are not merges) every non-masked read is evaluable too. Gradient contributions from points that are
        not evaluable are zero (they do not influence any objective)."""
        key = (node_id, tuple(point))
        known = self._evaluable.get(key)
        if known is not None:
            return known
        node = self.graph.nodes[node_id]
        check = self.defined[node_id]
        result = all(0 <= c < s for c, s in zip(point, self.sizes[node_id])) and (check is None or check(point))
        if result and node.category is not MERGE:
            for reader in self.readers[node_id]:
                if reader.edge.masked_by is not None or not reader.active(point):
                    continue
                if not all(self.evaluable(reader.edge.producer, q) for q in reader.points(point)[0]):
                    result = False
                    break
        self._evaluable[key] = result
        return result

    def _cycle_error(self, stack: list[Key], child: Key) -> ScheduleError:
        cycle = stack[stack.index(child):] if child in stack else stack[-3:]
        names = []
        for node_id, point in cycle:
            node = self.graph.nodes[node_id]
            names.append(f"{node.label()} at {point_dict(node.domain, point)}")
        return ScheduleError("dependence cycle: " + " -> ".join(names) + " -> back to the first")


def _children(plan) -> list[Key]:
    out: list[Key] = []
    for _, keys, _, _ in plan:
        out.extend(keys)
    return out


sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))


class ReferenceExecutable:
    """`ctx.compile(..., backend="reference")`."""

    def __init__(self, graph: Graph, bounds: Mapping[Symbol, int], seed: int, compile_seconds: float) -> None:
        self.graph = graph
        self.bounds = dict(bounds)
        self.seed = seed
        self.stats = empty_stats(compile_seconds)
        self.schedule = "reference interpreter: every sink point evaluated on demand, memoized"

    @one_run_at_a_time
    def execute(self, iterations: int | None = None, resume: bool = False) -> None:
        """The whole program; the reference has no loop to run in parts, and runs every sink even after a
        `trl.Stop`."""
        if iterations is not None or resume:
            raise TimeRLError(f"{user_location()}: the reference interpreter runs whole programs only "
                              "(iterations= and resume= need a compiled backend)")
        started = time.perf_counter()
        interpreter = ReferenceInterpreter(self.graph, self.bounds, self.seed)
        with stop_flag([False]):
            interpreter.run()
        self.stats["execute_seconds"] = time.perf_counter() - started
        self.stats["points_evaluated"] = len(interpreter.memo)
