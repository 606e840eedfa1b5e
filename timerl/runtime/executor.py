"""The scheduled executor (paper §7): an interpreter over the frozen loop AST, one method per node kind.

Each AST node is translated once into a Python closure (loop bounds, conditions and points become compiled
functions of the loop counters), so running the program does no tree walking and no symbolic evaluation.
Values live in the memory pool, keyed by (op, point); an `Execute` gathers its inputs by evaluating the
edges' dependence expressions at its point, a `Deallocate` frees a point after its last reader.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any, Callable, Mapping

from timerl.errors import DeviceOutOfMemoryError, TimeRLError
from timerl.ops.registry import ACCUMULATE, SINK, SOURCE, UDF
from timerl.options import CompileOptions
from timerl.pdg.graph import Graph, Node, Range
from timerl.runtime.access import EdgeReader, empty_stats, point_dict, stack_range
from timerl.runtime.dryrun import choose_swaps, fitting_budget, required_device_bytes
from timerl.runtime.evaluate import StackedContributions
from timerl.runtime.batch import BatchedGroup, chunk_points, point_bytes
from timerl.runtime.batched_loop import batched_loop
from timerl.runtime.distribute import distribute
from timerl.runtime.explain import EXPLAIN_VARIABLE, POINTS, SCANNED, Decisions, explain
from timerl.runtime.explain import counts as statement_counts
from timerl.runtime.statements import freed_parts, statement_dependences
from timerl.runtime.codegen import LoopProgram
from timerl.runtime.walk import AstInterpreter, Run
from timerl.runtime.jax_plan import JaxGroupLowering
from timerl.runtime.torch_plan import TorchCompiledLowering
from timerl.runtime.jax_scan import ScannedLoop
from timerl.runtime.jax_scan_loop import LoopAnalysis, Unscannable
from timerl.runtime.generated import SKIP, namespace
from timerl.runtime.plan import GroupLowering
from timerl.runtime import runs
from timerl.runtime.run_lock import one_run_at_a_time
from timerl.runtime.blocks import BlockStore
from timerl.runtime.memory import MemoryPool
from timerl.runtime.stacks import StackedPool
from timerl.symbolic import Symbol, compile_function
from timerl.sched import ast

_log = logging.getLogger(__name__)


class Executable:
    """A scheduled program lowered for a backend (the last step of `timerl.compile`): ``options`` are the
    resolved `CompileOptions` (`CompileOptions.resolved`), which choose how groups are lowered and loops run."""

    def __init__(self, graph: Graph, bounds: Mapping[Symbol, int], backend: Any, schedule: ast.Schedule, groups,
                 seed: int, device_memory: int | None, swap: bool, options: CompileOptions,
                 compile_seconds: float) -> None:
        self.graph = graph
        self.bounds = dict(bounds)
        self.backend = backend
        self.schedule = schedule
        self.seed = seed
        self.device_memory = device_memory
        self.swap = swap
        self.options = options
        self.stats = empty_stats(compile_seconds)
        self.readers = {n.id: [EdgeReader(e, n.domain, self.bounds) for e in n.inputs] for n in graph.nodes}
        self.groups = {g.id: g for g in groups}
        # jax arrays cannot be sliced without a compiled computation per (start, stop): stacking is cheaper there
        self.block_axes = block_axes(graph) if backend.slices_are_views and not swap else {}
        # a budget asks for isl's memory-aware order: running loops statement by statement keeps more alive
        self.vectorize = options.vectorize and device_memory is None
        self.scan_loops = options.scan_loops and backend.name == "jax" and device_memory is None
        self.dependences = statement_dependences(graph, self.groups)
        self.namespace = namespace(graph, self.bounds, backend, seed)
        compiled_torch = backend.name == "torch" and options.compile_groups  # TorchInductor, one function a group
        lowering_class = (JaxGroupLowering if backend.name == "jax" else  # bigger jits, shared
                          TorchCompiledLowering if compiled_torch else GroupLowering)
        lowering = lowering_class(graph, self.bounds, backend, self.namespace, self._reader,
                                  jit_groups=(backend.name == "jax" and options.jit_groups) or compiled_torch,
                                  prefetch_draws=options.prefetch_draws and backend.name != "jax",
                                  matmul_add=options.matmul_add, donation=options.donation)
        self.group_functions = {g.id: lowering.lower(g) for g in groups}
        self.transient = lowering.transient
        self.scheduled = schedule  # before its swaps are chosen (`fitting_budget`)
        if swap and device_memory is not None:  # which scheduled swaps run: against the budget, by dry runs
            self.schedule = schedule = choose_swaps(schedule, graph, self.groups, device_memory, self.bounds,
                                                    self.transient)
        self.prefetchers = lowering.prefetchers
        self.constants = lowering.constants
        self.constants_moved = False  # into the backend, in the namespace: at the first execution
        # a memory-aware schedule (running sums) keeps what it asked for when its loops run batched: each batched
        # loop runs in chunks of points whose values stay within `CHUNK_BYTES`, as isl's order keeps only a few
        # points of them alive (not on jax, whose compiled statements want one shape; there `scan_loops` runs them)
        chunks = self.vectorize and options.memory_aware and backend.name != "jax"
        split = options.distributes(backend.name)
        if not split and self.scan_loops and options.distribute and self.vectorize:
            # jax: a loop that becomes one lax.scan stays whole; one that cannot (it calls the host, or sums
            # gradient contributions, which no scan computes) is distributed, so that what does not recur batches
            unscannable = {g.id for g in groups if any(graph.nodes[m].category.calls_user
                                                       or graph.nodes[m].category is ACCUMULATE for m in g.members)}
            split = lambda executed: any(g in unscannable for g in executed)  # noqa: E731
        if device_memory is None and (split or chunks):
            supported = {g.id: BatchedGroup.supported(graph, g) for g in groups}
            host_calls = {}  # group -> (hands the host a value: a sink or UDF, takes one: a source or UDF)
            for g in groups:
                calls = {graph.nodes[m].category for m in g.members if graph.nodes[m].category.calls_user}
                if calls:
                    host_calls[g.id] = (bool(calls & {SINK, UDF}), bool(calls & {SOURCE, UDF}))
            sizes = {g.id: point_bytes(graph, g) for g in groups}
            chunk = (lambda batched: chunk_points([sizes[g] for g in batched])) if chunks else (lambda batched: None)
            self.schedule = schedule = ast.Schedule(distribute(
                schedule.root, self.dependences, supported.get, host_calls, split,
                chunk), schedule.labels)
        self.decisions = Decisions()  # how each statement runs and why (`explain`), noted as loops are built
        interpreter = _Interpreter(self)
        if device_memory is None:  # plain Python loops; with a budget, each statement first clears the pins
            loops = scanned_or_batched if self.scan_loops else batched_loop  # jax: whole loops as lax.scan
            self._program = LoopProgram(interpreter, loops).generate(schedule.root)
        else:
            self._program = interpreter.build(schedule.root, ())
        self.run = runs.RunState(getattr(self._program, "span", None))  # where a run in parts stands
        self.namespace.update(RUN=self.run.run, STOP=self.run.stop)
        self.pool: Any = None

    @property
    def iteration(self) -> int:
        """The next iteration of the outermost loop a resumed run starts at."""
        return self.run.run[0]

    @property
    def finished(self) -> bool:
        """Whether the last run (or part) reached the end of the program."""
        return self.run.finished

    @property
    def stopped(self) -> bool:
        """Whether a sink ended the last run or part early (`trl.Stop`)."""
        return self.run.stop[0]

    def save(self, path: str) -> None:
        """A checkpoint of the run between two parts (`timerl.runtime.runs`), as an ``.npz`` file."""
        runs.save(path, self.graph, self.bounds, self.seed, self.backend.name, self.run, self.pool, self.backend)

    def load(self, path: str) -> None:
        """Continue from a checkpoint of this program (same bounds and seed): ``exe.execute(resume=True)``."""
        self._fresh_pool()
        runs.load(path, self.graph, self.bounds, self.seed, self.run, self.pool, self.backend)

    def _fresh_pool(self) -> None:
        blocks = {node_id: BlockStore(axis, self.graph.nodes[node_id].outputs, self.backend)
                  for node_id, axis in self.block_axes.items()}
        pool_class = StackedPool if self.vectorize else MemoryPool  # batched results stay batched
        self.pool = pool = pool_class(self.device_memory, self.backend, self.swap, blocks)
        pool.describe, pool.describe_group = self._describe, self._describe_group
        self.namespace.update(load=pool.load, store=pool.store, transient=pool.transient, nbytes_of=pool.nbytes_of,
                              free=pool.free, free_outputs=pool.free_outputs, free_many=pool.free_many,
                              store_many=pool.store_many)

    @one_run_at_a_time
    def execute(self, iterations: int | None = None, resume: bool = False) -> None:
        """Run the program. ``iterations``: only that many iterations of its outermost loop (a part);
        ``resume``: continue from where the last part, a `trl.Stop` or a loaded checkpoint left it (the
        state in between is kept), instead of starting over."""
        started = time.perf_counter()
        if self.run.begin(iterations, resume):
            self._fresh_pool()
        pool = self.pool
        # batched statement calls; those that scanned their windows; chunks run by statements that pad them
        self.batched_runs = self.window_scans = self.padded_chunks = 0
        for prefetch in self.prefetchers:
            prefetch.reset(pool.hold)
        with self.backend.session(), runs.stop_flag(self.run.stop):
            if not self.constants_moved:  # once (STYLE 14): no kernel writes into a constant's buffer (`FRESH`)
                self.namespace.update({name: self.backend.from_numpy(v) for name, v in self.constants.items()})
                self.constants_moved = True
            try:
                self._program([])
            except DeviceOutOfMemoryError as error:
                if not hasattr(error, "in_use"):
                    raise
                if self.swap:  # the budget to state is one whose chosen swaps fit, not the bytes in use here
                    fits = fitting_budget(self.scheduled, self.graph, self.groups, self.bounds, self.transient,
                                          self.device_memory)
                    raise DeviceOutOfMemoryError(
                        f"{str(error).split(': the program needs')[0]}: with swapping, the program needs at least "
                        f"{fits} bytes of device memory (device_memory={fits} fits), device_memory is "
                        f"{self.device_memory}"
                    ) from None
                required = required_device_bytes(self.schedule, self.graph, self.groups, self.bounds, self.transient)
                if required <= self.device_memory:  # the count disagrees with the pool's: keep its message
                    raise
                raise DeviceOutOfMemoryError(
                    f"{str(error).split(': the program needs')[0]}: the program needs at least {required} bytes of "
                    f"device memory (the peak of its schedule; device_memory={required} fits), device_memory is "
                    f"{self.device_memory} (swap=True may help)") from None
        self.stats.update(
            peak_device_bytes=pool.peak_device_bytes, peak_host_bytes=pool.peak_host_bytes,
            bytes_offloaded=pool.bytes_offloaded, bytes_fetched=pool.bytes_fetched, donated_bytes=pool.donated_bytes,
            execute_seconds=time.perf_counter() - started, leaked_points=pool.live_points(),
            memory_timeline=pool.timeline, batched_statements=self.batched_runs,
            window_scans=self.window_scans, padded_chunks=self.padded_chunks, statements=statement_counts(self),
            **pool.swaps)
        if os.environ.get(EXPLAIN_VARIABLE):  # `timerl explain script.py`
            print(self.explain(), file=sys.stderr)

    def explain(self) -> str:
        """Per statement: the user's lines it holds, what it runs as (batched over which loop, scanned, point by
        point) and, where not batched, the rule that refused (`timerl.runtime.explain`)."""
        return explain(self)

    def _describe(self, key) -> str:
        node = self.graph.nodes[key[0]]
        return f"{node.label()} at {point_dict(node.domain, key[1])}"

    def _describe_group(self, group_id: int | None) -> str:
        """The ops whose intermediate values a group holds while it runs (the first few, with their lines)."""
        members = [self.graph.nodes[m] for m in self.groups[group_id].members] if group_id in self.groups else []
        kernels = [node for node in members if node.category.kernel] or members
        shown = ", ".join(node.label() for node in kernels[:3])
        more = f" and {len(kernels) - 3} more ops" if len(kernels) > 3 else ""
        return f"the intermediate values of {shown}{more}" if shown else "a dataflow group's intermediate values"

    # ---- reads the generated code does not inline ---------------------------------------------------------------
    def _reader(self, node: Node, slot: int) -> Callable[[tuple], Any]:
        """Input ``slot`` of ``node`` at a point, for conditioned, masked or range reads; `SKIP` where the
        edge's condition does not hold."""
        reader = self.readers[node.id][slot]

        def read(point: tuple[int, ...]) -> Any:
            if not reader.active(point):
                return SKIP
            return self._read(node, reader, point)

        return read

    def _read(self, node: Node, reader: EdgeReader, point: tuple[int, ...]) -> Any:
        pool = self.pool
        edge = reader.edge
        if reader.has_ranges and edge.masked_by is None and edge.producer in pool.blocks:
            window = self._slice(reader, point, edge)  # before listing the points: O(1) whatever the length
            if window is not None:
                return window
        points, lengths = reader.points(point)
        keys = [(edge.producer, q) for q in points]
        if edge.masked_by is not None:  # gradient contributions: those that exist
            batch = getattr(pool, "batch", None)
            # every contribution a row of one stack (the common case; `batch` finds each key among the stacks'
            # rows): no presence test per key
            whole = len(keys) > 1 and batch is not None and edge.producer not in pool.blocks
            stacked = batch(keys, edge.output) if whole else None
            if stacked is not None:
                return StackedContributions([k[1] for k in keys], stacked, self.backend)
            present = [k for k in keys if pool.has(k)]
            stacked = batch(present, edge.output) if batch is not None and len(present) > 1 else None
            if stacked is not None:  # the rows of one batched result, in order
                return StackedContributions([k[1] for k in present], stacked, self.backend)
            return [(k[1], pool.load(k)[edge.output]) for k in present]
        if len(lengths) == 1 and len(keys) > 1:  # consecutive rows of one batched result: a slice of it
            batch = getattr(pool, "batch", None)
            window = None if batch is None else batch(keys, edge.output)
            if window is not None:
                return window
        try:
            values = [pool.load(k)[edge.output] for k in keys]
        except KeyError:
            raise TimeRLError(f"internal error: {node.label()} at {point_dict(node.domain, point)} read a "
                              f"value of %{edge.producer} that is not stored (a scheduling bug)") from None
        if lengths:
            return stack_range(values, lengths, self.graph, edge, self.backend)
        return values[0]

    def _slice(self, reader: EdgeReader, point: tuple[int, ...], edge) -> Any:
        """A range read along a block store's axis: one slice of its buffer (None: read point by point)."""
        store = self.pool.blocks[edge.producer]
        coords = reader.coordinates(point)
        window = coords[store.axis]
        if not isinstance(window, range) or window.step != 1 or len(window) == 0:
            return None
        if any(isinstance(c, range) for k, c in enumerate(coords) if k != store.axis):
            return None
        outer = tuple(c for k, c in enumerate(coords) if k != store.axis)
        try:
            return store.slice(outer, window.start, window.stop, edge.output)
        except KeyError:
            raise TimeRLError(f"internal error: %{edge.producer} read over {window} before every point was "
                              "stored (a scheduling bug)") from None


def scanned_or_batched(interpreter: Any, node: ast.Loop, scope: tuple) -> Run | None:
    """The loop as `timerl.runtime.batch` runs it when it vectorizes, else as scans when it qualifies (see
    `timerl.runtime.jax_scan`'s docstring), else None (the generated Python loop)."""
    batched = batched_loop(interpreter, node, scope)
    if batched is not None:
        return batched
    executable = interpreter.executable
    if not getattr(executable, "scan_loops", False):
        return None
    try:
        loop = ScannedLoop(LoopAnalysis(interpreter, node, scope))
    except Unscannable as why:
        _log.debug("the loop over %s stays point by point: %s", node.var, why)
        for decisions in executable.decisions.by_group.values():
            if decisions[-1].var == node.var.name and decisions[-1].how == POINTS:
                decisions[-1].reason += f"; not one lax.scan: {why}"
        return None
    for statement in loop.statements:
        executable.decisions.note(statement.group, node.var, SCANNED)

    def run(counters: list) -> None:
        loop.run(counters)

    groups = ", ".join(f"G{s.group}" for s in loop.statements)
    run.comment = (f"compiled: one lax.scan over {node.var.python()} in range({node.start.python()}, "
                   f"{node.stop.python()}) per run of iterations with the same conditions: {groups}")
    run.loop = loop
    return run


def block_axes(graph: Graph) -> dict[int, int]:
    """Ops read through ranges along one dimension (and only with unit steps) get a block store on that
    dimension; everything else is stored point by point."""
    axes: dict[int, set] = {}
    for node in graph.nodes:
        for edge in node.inputs:
            ranged = [k for k, item in enumerate(edge.index) if isinstance(item, Range)]
            if not ranged:
                continue
            producer = graph.nodes[edge.producer]
            static = all(isinstance(d, int) for t in producer.outputs for d in t.shape)
            unit = all(edge.index[k].step == 1 for k in ranged)
            if len(ranged) == 1 and static and unit and edge.masked_by is None:
                axes.setdefault(edge.producer, set()).add(ranged[0])
            else:
                axes.setdefault(edge.producer, set()).add(None)
    return {node_id: next(iter(found)) for node_id, found in axes.items() if len(found) == 1 and None not in found}


class _Interpreter(AstInterpreter):
    """The schedule as closures that run it: statements run their group's generated function or free points;
    loops that vectorize run statement by statement (`timerl.runtime.batch`)."""

    def __init__(self, executable: Executable) -> None:
        self.executable = executable
        self.nodes = executable.graph.nodes

    def _loop(self, node: ast.Loop, scope) -> Run:
        vectorized = batched_loop(self, node, scope)
        return vectorized if vectorized is not None else super()._loop(node, scope)

    def _execute(self, node: ast.Execute, scope) -> Run:
        """Run a dataflow group's generated function at the point."""
        where = compile_function(node.point, scope)
        function = self.executable.group_functions[node.node]
        if self.executable.device_memory is None:
            return lambda counters: function(where(*counters))
        executable = self.executable

        def run(counters: list) -> None:
            executable.pool.next_statement()
            function(where(*counters))

        return run

    def _deallocate(self, node: ast.Deallocate, scope) -> Run:
        where = compile_function(node.point, scope)
        members = self.executable.groups[node.node].freed_later
        executable = self.executable
        if node.parts is not None:  # some outputs only, each after its own last reader
            parts = freed_parts(node, executable.graph)

            def run_parts(counters: list) -> None:
                point = where(*counters)
                free_outputs = executable.pool.free_outputs
                for member_id, outputs, count in parts:
                    free_outputs((member_id, point), outputs, count)

            return run_parts

        def run(counters: list) -> None:
            point = where(*counters)
            free = executable.pool.free
            for member_id in members:
                free((member_id, point))

        return run

    def _offload(self, node: ast.Offload, scope) -> Run:
        """A scheduled offload (or, below, fetch) of a group's stored points (`timerl.runtime.dryrun.choose_swaps`)."""
        return self._move(node, scope, "offload")

    def _fetch(self, node: ast.Fetch, scope) -> Run:
        return self._move(node, scope, "fetch")

    def _move(self, node, scope, verb: str) -> Run:
        where = compile_function(node.point, scope)
        members = node.members or self.executable.groups[node.node].freed_later
        executable = self.executable

        def run(counters: list) -> None:
            point = where(*counters)
            move = getattr(executable.pool, verb)
            for member_id in members:
                move((member_id, point))

        return run
