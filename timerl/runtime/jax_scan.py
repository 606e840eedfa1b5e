"""Whole loops compiled into one `jax.lax.scan` (issue 8, item 4): a loop whose statements are all array kernels
runs as one XLA computation per run of its iterations, instead of one jitted call per group and point.

A loop of the schedule, e.g. the acting loop of REINFORCE with an environment written as RT ops

    for t in 0 .. T:
      o[i, t]   = t == 0 ? reset[i] : next[i, t - 1]      (a merge)
      a[i, t]   = sample(policy(o[i, t]))
      next[i, t] = step(o[i, t], a[i, t])

becomes a scan over ``t`` whose carry is every value read one iteration later (``next[i, t - 1]``), whose
arguments are the values read from before the loop (``reset[i]``, the parameters at ``i``), and whose outputs,
one row per iteration, are the values read after the loop. Those are stored in the pool as stacks
(`timerl.runtime.stacks`), so the learning phase that follows reads them as the batched arrays they are.

Checks of input values (``gather``'s indices) run inside the scan: each iteration returns the first check that
failed there, and the host raises that check's error, at its member's point, before storing the segment's values.

A statement at a point the loop does not change runs before the scans, or after them when it reads a value of
the loop (isl may place a consumer of the loop's last value at its last iteration; nothing of the loop may read it).

Conditions are resolved before tracing, not traced: at each run, the conditions of the body are evaluated at
every iteration (plain Python over the counters), and consecutive iterations with the same outcomes form a
segment, one scan each (``t == 0``, ``1 <= t < T - 1``, ``t == T - 1``). Each distinct segment compiles once
(per length); the outer counters are traced arguments, so every iteration of an outer loop reuses it.

The loop qualifies when: it is not vectorized (`timerl.runtime.batch` runs such loops statement by statement);
its body has no inner loops; every member of every statement is a pure jax kernel with static shapes (no
source, sink, UDF or range read), a merge or a constant; each group runs in no other statement
of the program; each statement's point is the outer point and the loop's counter plus a shift, or minus it
(isl runs a backward recurrence, GAE's ``adv[t] = delta[t] + c * adv[t + 1]``, with a counter going up while
``t`` goes down: such loops run forwards over the counter and store their rows in the order of ``t``); and
every read of a value the loop computes is made at the same iteration or the one before, at the same outer
point (a statement isl shifted by one, ``f[t + 2] = f[t] + f[t + 1]``, reads the previous iteration's). Values
computed before the loop are read either at one point for the whole loop (a parameter) or at one point per
iteration along the loop's dimension (the rollout's values, read by GAE): those are stacked and become the
scan's ``xs``. At run time,
a read that would need a value the loop never computed (an error the point-by-point program reports with its
own message) sends the whole run to the point-by-point program. Only without a device budget (the pool then
sees the loop's stored values as they are after the loop).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from timerl.errors import TimeRLError
from timerl.ops.registry import CONST, DRAW, MERGE
from timerl.ops.special import draws_normal
from timerl.pdg.graph import Node
from timerl.pdg.sizes import static_bytes
from timerl.runtime import jax_rng
from timerl.runtime.evaluate import bound_kernel, find_violation, first_violation, raise_violation
from timerl.runtime.jax_plan import checked
from timerl.runtime.jax_scan_loop import CARRIED, INVARIANT, LOCAL, SLICED, LoopAnalysis, Read, RunPlan, Statement

_FALLBACK = object()


class ScannedLoop:
    """The segment runner: a `LoopAnalysis`'s loop run as scans, one jitted call per run of iterations (each
    distinct sequence of segments compiles once); the analysis is its only input."""

    def __init__(self, analysis: LoopAnalysis) -> None:
        self.analysis = analysis
        # what the runner reads of the analysis, named here
        self.executable, self.graph, self.backend, self.seed = (analysis.executable, analysis.graph,
                                                                analysis.backend, analysis.seed)
        self.limits, self.fallback, self.slope = analysis.limits, analysis.fallback, analysis.slope
        self.statements, self.tests, self.carried, self.frees = (analysis.statements, analysis.tests,
                                                                 analysis.carried, analysis.frees)
        self.hoisted, self.after, self.hoisted_members = analysis.hoisted, analysis.after, analysis.hoisted_members
        self.group_of, self.deciding = analysis.group_of, analysis.deciding
        self.compiled: dict = {}  # (outcome, count) -> one segment's function, its reads
        self.runs_compiled: dict = {}  # (a run's (outcome, count)s, its reads' slots, constants) -> one jitted function
        self.plans: dict = {}
        self.runs = 0
        self.schedules: dict = {}  # (deciding counters, start, stop) -> (segments, frees' iterations)
        self.reads_of: dict = {}  # (outcome, kind) -> the active reads of that kind
        self._last_outer: tuple | None = None  # the outer counters of the last run planned, and its plan
        self._last_plan: RunPlan | None = None

    def run(self, counters: list) -> None:
        outer = tuple(counters)
        plan = self._last_plan if self._last_outer == outer else None
        if plan is None:
            plan = self._run_plan(outer)
            if plan is None:
                return
            if plan is _FALLBACK:  # a run of segments whose reads do not all find their values
                self.fallback(counters)
                return
            self._last_outer, self._last_plan = outer, plan
        pool = self.executable.pool
        has = pool.has
        for key in plan.checked:
            if not has(key):
                self.fallback(counters)
                return
        for function, point in plan.hoisted:
            function(point)
        try:
            loaded = tuple(pool.load(key)[output] for key, output in plan.loads)
        except KeyError as missing:
            raise TimeRLError(f"internal error: a compiled loop read {missing}, never stored (a scheduling bug)")
        self.runs += 1
        rows_of = tuple(tuple(self._stacked(keys, output) for keys, output in reads) for reads in plan.sliced)
        stacks, founds = plan.function(plan.traced, loaded, rows_of)
        for (outcome, first), found in zip(plan.outcomes, founds):
            if found is not None:
                self._raise_first(outcome, plan.prefixes, first, found)
        if hasattr(pool, "store_stack"):
            for (member, points, size), value in zip(plan.stores, stacks):
                pool.store_stack(member, points, (value,), size)
        else:
            for (member, points, size), value in zip(plan.stores, stacks):
                for row, point in zip(self.backend.unstack(value), points):
                    pool.store((member, point), (row,), size)
        for function, point in plan.after:
            function(point)
        for keys, outputs, count in plan.frees:
            if outputs is None:
                pool.free_many(keys)
            else:
                pool.free_outputs_many(keys, outputs, count)

    def _run_plan(self, outer: tuple) -> RunPlan | None:
        """What a run at the outer counters ``outer`` does that depends only on them (STYLE 14: planned at its
        first run, kept for the next runs at the same counters, e.g. every execution of a program whose loop
        is outermost): the keys it checks and reads, the statements run before and after the scans at their
        points, the scans' function and arguments that do not change, the stored points and the frees. None:
        the loop runs no iteration there; `_FALLBACK`: the run's reads do not all find their values."""
        start, stop = self.limits(*outer)
        if stop <= start:
            return None
        segments, free_iterations = self._schedule(outer, start, stop)
        shape = tuple((o, n) for o, _, n in segments)
        if self._plan(shape) is None:
            return _FALLBACK
        checked: list[tuple] = []
        loads: dict[tuple, int] = {}  # (pool key, output) -> its slot among the loaded invariants
        for outcome, _, _ in segments:
            for read in self._active_invariants(outcome):
                key = (read.producer, tuple(read.key(*outer)))
                if read.producer not in self.hoisted_members:
                    checked.append(key)
                loads.setdefault((key, read.output), len(loads))
        sliced: list[tuple] = []  # per segment, per active sliced read: (its keys, one per iteration; its output)
        for outcome, first, count in segments:
            reads = tuple(([(read.producer, tuple(read.key(*outer, c))) for c in range(first, first + count)],
                           read.output) for read in self._active_sliced(outcome))
            checked += [key for keys, _ in reads for key in keys]
            sliced.append(reads)
        segment_reads = [self._compiled(outcome, count)[1] for outcome, count in shape]
        arguments = tuple(tuple(loads[((r.producer, tuple(r.key(*outer))), r.output)] for r in reads)
                          for reads in segment_reads)
        # a constant's value is the program's, at every point and execution: a constant of the traced function,
        # not an argument (each argument costs the call its conversion); the other invariants are passed once each
        # however many segments read them
        constants = tuple((slot, key[0]) for (key, _), slot in loads.items()
                          if self.graph.nodes[key[0]].category is CONST)
        fixed = {slot for slot, _ in constants}
        passed = tuple(load for load, slot in loads.items() if slot not in fixed)
        prefixes = [tuple(s.prefix(*outer)) for s in self.statements]  # (outer coordinates..., origin)
        function, stored = self._whole_run(shape, arguments, constants, tuple(len(prefix) for prefix in prefixes))
        prefix_of = {m: prefix for s, prefix in zip(self.statements, prefixes) for m in s.stored}
        slope = self.slope
        stored_in = [set(self._stored(outcome)) for outcome, _, _ in segments]
        points_of: dict[tuple, list] = {}  # (prefix, the segments storing) -> the points: one list per run, shared
        stores = []
        for member in stored:
            storing = tuple(k for k, members in enumerate(stored_in) if member in members)
            points = points_of.get((prefix_of[member], storing))
            if points is None:
                *before, origin = prefix_of[member]
                points = [tuple(before) + (slope * c + origin,) for k in storing
                          for c in range(segments[k][1], segments[k][1] + segments[k][2])]
                if slope < 0:  # a backward loop: its stack in the order of the points, as later reads take it
                    points = points[::-1]
                points_of[(prefix_of[member], storing)] = points
            stores.append((member, points, static_bytes(self.graph.nodes[member])))
        freed: dict[tuple, list] = {}  # (member, outputs, count) -> its points, freed in one pool call each
        for (_, where, parts), iterations in zip(self.frees, free_iterations):
            points = [tuple(where(*outer, c)) for c in iterations]
            for part in parts:
                freed.setdefault(part, []).extend((part[0], point) for point in points)
        # whole points (every output) leave the pool in one call; points losing some outputs, one call per part
        whole = [key for (_, outputs, _), keys in freed.items() if outputs is None for key in keys]
        frees = ((whole, None, 0),) if whole else ()
        frees += tuple((keys, outputs, count) for (_, outputs, count), keys in freed.items() if outputs is not None)
        return RunPlan(
            checked=tuple(dict.fromkeys(checked)), hoisted=self._hoisted_points(self.hoisted, outer, start, stop),
            loads=passed, arguments=arguments, sliced=tuple(sliced), function=function,
            traced=self.backend.from_numpy(np.array([c for prefix in prefixes for c in prefix] +
                                                    [first for _, first, _ in segments], dtype=np.int64)),
            prefixes=prefixes,
            outcomes=tuple((outcome, first) for outcome, first, _ in segments), stores=tuple(stores),
            after=self._hoisted_points(self.after, outer, start, stop),
            frees=frees)

    @staticmethod
    def _hoisted_points(statements: list, outer: tuple, start: int, stop: int) -> tuple:
        """Each statement run at the outer point, with its point: once, at the first iteration its conditions
        hold (none: it does not run)."""
        found = []
        for test, function, where in statements:
            first = next((c for c in range(start, stop) if test is None or all(test(*outer, c))), None)
            if first is not None:
                found.append((function, tuple(where(*outer, first))))
        return tuple(found)

    def _schedule(self, outer: tuple, start: int, stop: int) -> tuple[list, list]:
        """The segments of a run, ``(outcomes, first iteration, count)``, and the iterations at which each
        free runs; computed once per value of the outer counters the conditions read (and bounds)."""
        key = (tuple(outer[k] for k in self.deciding), start, stop)
        found = self.schedules.get(key)
        if found is not None:
            return found
        segments: list[list] = []  # [outcomes, first iteration, count]
        for c in range(start, stop):
            outcome = tuple(all(test(*outer, c)) for test in self.tests)
            if segments and segments[-1][0] == outcome:
                segments[-1][2] += 1
            else:
                segments.append([outcome, c, 1])
        frees = [[c for c in range(start, stop) if test is None or all(test(*outer, c))] for test, _, _ in self.frees]
        found = self.schedules[key] = ([tuple(segment) for segment in segments], frees)
        return found

    def _raise_first(self, outcome: tuple, prefixes: list[tuple], first: int, found: tuple) -> None:
        """Raise the error of the first check of input values that failed in a segment (`first_violation`'s
        rows, one per iteration), at its member's point, before the segment's values are stored."""
        codes = np.asarray(found[0])
        if not codes.any():
            return
        k = int(np.argmax(codes != 0))
        checks = [(member, statement) for statement in self._executed(outcome) for member in statement.members
                  if checked(member)]
        member, statement = checks[int(codes[k]) - 1]
        *before, origin = prefixes[self.statements.index(statement)]
        point = tuple(before) + (self.slope * (first + k) + origin,)
        raise_violation(member, point, np.asarray(found[1])[k])

    def _executed(self, outcome: tuple) -> list[Statement]:
        return [s for s in self.statements if s.guard is None or outcome[s.guard]]

    def _stored(self, outcome: tuple) -> list[int]:
        return [m for s in self._executed(outcome) for m in s.stored]

    def _active(self, read: Read, outcome: tuple) -> bool:
        return read.test is None or outcome[read.test]

    def _active_invariants(self, outcome: tuple, kind: str = INVARIANT) -> list[Read]:
        """The reads of ``kind`` (``INVARIANT`` or ``SLICED``) made at iterations with these outcomes."""
        cached = self.reads_of.get((outcome, kind))
        if cached is not None:
            return cached
        found: list[Read] = []
        seen: set = set()
        self.reads_of[(outcome, kind)] = found
        for statement in self._executed(outcome):
            for member, reads in zip(statement.members, statement.reads):
                for read in self._inputs(member, reads, outcome):
                    if read.kind == kind and (read.producer, read.output, read.key) not in seen:
                        seen.add((read.producer, read.output, read.key))
                        found.append(read)
        return found

    def _active_sliced(self, outcome: tuple) -> list[Read]:
        return self._active_invariants(outcome, SLICED)

    def _stacked(self, keys: list[tuple], output: int) -> Any:
        """A sliced read's points as one array, a row per iteration (a slice of a stack where they are one)."""
        pool = self.executable.pool
        batch = getattr(pool, "batch", None)
        stacked = None if batch is None else batch(keys, output)
        if stacked is None and self.slope < 0 and batch is not None:  # a backward loop reads a stack backwards
            stacked = batch(keys[::-1], output)
            stacked = None if stacked is None else self.backend.xp.flip(stacked, axis=0)
        if stacked is None:
            stacked = self.backend.stack([pool.load(key)[output] for key in keys])
        return stacked

    def _inputs(self, member: Node, reads: tuple[Read, ...], outcome: tuple) -> list[Read]:
        """The reads a member makes at an iteration with these outcomes (a merge: its first active input)."""
        active = [r for r in reads if self._active(r, outcome)]
        return active[:1] if member.category is MERGE else active

    def _plan(self, shape: tuple) -> bool | None:
        """Whether every read of a run of segments finds its value (checked once per sequence of outcomes)."""
        if shape in self.plans:
            return self.plans[shape]
        ok, previous = True, None
        for outcome, count in shape:
            executed = {s.group for s in self._executed(outcome)}
            for statement in self._executed(outcome):
                for member, reads in zip(statement.members, statement.reads):
                    inputs = self._inputs(member, reads, outcome)
                    if member.category is MERGE and not inputs or member.category not in (MERGE, CONST) and len(
                            inputs) != len(reads):
                        ok = False  # a kernel missing an input: the point-by-point program says what is wrong
                    for read in inputs:
                        writer = self.group_of.get(read.producer)
                        if read.kind == LOCAL and writer not in executed:
                            ok = False
                        if read.kind == CARRIED:  # at the segment's first iteration, then at the others
                            before = {s.group for s in self._executed(previous)} if previous is not None else set()
                            if writer not in before or count > 1 and writer not in executed:
                                ok = False
            previous = outcome
        self.plans[shape] = ok or None
        return self.plans[shape]

    def _whole_run(self, shape: tuple, arguments: tuple, constants: tuple,
                   lengths: tuple) -> tuple[Callable, list[int]]:
        """A run's segments, ``shape`` their (outcome, count)s in order, as one jitted function ``(counters, the
        loaded invariants, each segment's sliced rows) -> (each stored member's rows over the whole run, in the
        order of its points, each segment's checks)`` (not the last carry: nothing reads it, and each of its arrays
        would be one more output buffer per call): one XLA call per run, the segments' rows joined inside it.
        ``counters``: one int64 vector, every statement's prefix (``lengths``: their lengths) then each segment's
        first iteration (one argument, not one per number: each argument costs the call its conversion); the carry
        starts as zeros made inside. ``arguments``: per segment, its invariants' slots among the run's invariants;
        ``constants``: (slot, constant member) for those that are the program's constants, traced as constants,
        the others are the loaded invariants in slot order. Also the stored members in the order of the stacks.
        Compiled once per (shape, arguments, constants, lengths)."""
        cache_key = (shape, arguments, constants, lengths)
        found = self.runs_compiled.get(cache_key)
        if found is not None:
            return found

        xp, slope = self.backend.xp, self.slope
        segments = [self._compiled(outcome, count)[0] for outcome, count in shape]
        stored: list[int] = []
        for outcome, _ in shape:
            stored += [m for m in self._stored(outcome) if m not in stored]
        where = [{m: k for k, m in enumerate(self._stored(outcome))} for outcome, _ in shape]
        slots = 1 + max((slot for reads in arguments for slot in reads), default=-1)
        fixed = {slot: np.asarray(self.graph.nodes[member].attrs["value"]) for slot, member in constants}
        passed = [slot for slot in range(slots) if slot not in fixed]

        carried = [self.graph.nodes[p].outputs[o] for p, o in self.carried]

        def run(counters, loaded, sliced):
            prefixes, at = [], 0
            for length in lengths:
                prefixes.append(tuple(counters[at + k] for k in range(length)))
                at += length
            firsts = [counters[at + k] for k in range(len(segments))]
            carry = tuple(xp.zeros(tuple(output.shape), output.dtype) for output in carried)
            table: list[Any] = [None] * slots
            for slot, value in zip(passed, loaded):
                table[slot] = value
            for slot, value in fixed.items():
                table[slot] = xp.asarray(value)
            pieces: dict[int, list] = {}
            founds = []
            for segment, first, reads, rows_of, position in zip(segments, firsts, arguments, sliced, where):
                carry, rows, found = segment(tuple(prefixes), first, carry, tuple(table[k] for k in reads), rows_of)
                founds.append(found)
                for member, k in position.items():
                    pieces.setdefault(member, []).append(rows[k])
            stacks = []
            for member in stored:
                value = pieces[member][0] if len(pieces[member]) == 1 else xp.concatenate(pieces[member])
                stacks.append(xp.flip(value, axis=0) if slope < 0 else value)
            return tuple(stacks), tuple(founds)

        found = self.runs_compiled[cache_key] = (self.backend.jit(run), stored)
        return found

    def _compiled(self, outcome: tuple, count: int) -> tuple[Callable, list[Read], list[Read]]:
        key = (outcome, count)
        found = self.compiled.get(key)
        if found is None:
            found = self.compiled[key] = self._build(outcome, count)
        return found

    def _build(self, outcome: tuple, count: int) -> tuple[Callable, list[Read], list[Read]]:
        """One segment as a function to trace ``(each statement's point without the loop's coordinate and its
        origin, first iteration, carry, invariants, sliced reads' rows) -> (carry, stored rows, checks)``."""
        import jax

        xp = self.backend.xp
        arguments = self._active_invariants(outcome)
        slot = {(r.producer, r.output, r.key): k for k, r in enumerate(arguments)}
        sliced_reads = self._active_sliced(outcome)
        sliced_slot = {(r.producer, r.output, r.key): k for k, r in enumerate(sliced_reads)}
        slope = self.slope
        executed = self._executed(outcome)
        carried = {key: k for k, key in enumerate(self.carried)}
        kernels = {m.id: self._kernel(m) for s in executed for m in s.members}
        stored = self._stored(outcome)
        position = {s.group: k for k, s in enumerate(self.statements)}

        def body(state, step):
            prefixes, carry, invariants = state
            c, rows = step
            values: dict[tuple[int, int], Any] = {}
            found = []  # the members' checks of input values, in the order they run
            for statement in executed:
                *before, origin = prefixes[position[statement.group]]
                point = tuple(before) + (slope * c + origin,)
                for member, reads in zip(statement.members, statement.reads):
                    inputs = []
                    for read in self._inputs(member, reads, outcome):
                        if read.kind == LOCAL:
                            inputs.append(values[(read.producer, read.output)])
                        elif read.kind == CARRIED:
                            inputs.append(carry[carried[(read.producer, read.output)]])
                        elif read.kind == SLICED:
                            inputs.append(rows[sliced_slot[(read.producer, read.output, read.key)]])
                        else:
                            inputs.append(invariants[slot[(read.producer, read.output, read.key)]])
                    if member.category is MERGE:
                        value = xp.asarray(inputs[0], member.outputs[0].dtype)
                    elif member.category is DRAW:
                        value = kernels[member.id](*point)
                    else:
                        value = kernels[member.id](*inputs)
                        if checked(member):
                            found.append(find_violation(member, xp, inputs))
                    values[(member.id, 0)] = value
            following = tuple(xp.asarray(values[key], carry[k].dtype) if key in values else carry[k]
                              for key, k in carried.items())
            return (prefixes, following, invariants), (tuple(values[(m, 0)] for m in stored),
                                                       first_violation(xp, found))

        def segment(prefixes, first, carry, invariants, sliced):
            (_, carry, _), (rows, found) = jax.lax.scan(body, (prefixes, carry, invariants),
                                                        (first + xp.arange(count), sliced))
            return carry, rows, found

        return segment, arguments, sliced_reads

    def _kernel(self, member: Node) -> Callable:
        if member.category is CONST:
            value = np.asarray(member.attrs["value"])
            return lambda: self.backend.xp.asarray(value)
        if member.category is MERGE:
            return lambda *inputs: inputs[0]
        if member.category is DRAW:
            attrs = member.attrs
            return jax_rng.drawer(self.backend.xp, self.seed, attrs["stream"], attrs["shape"], attrs["dtype"],
                                  draws_normal(member.op))
        return bound_kernel(member, self.backend)
