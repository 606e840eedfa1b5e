"""Vectorized loops (paper §5.2, done when the program is lowered): a loop whose statements do not depend on
each other backwards runs statement by statement, each over all the loop's points at once.

A loop of the schedule, e.g. the learning phase of Monte Carlo REINFORCE

    for t in 0 .. T:            # after acting, every input exists
      loss+grad G21[i, t]
      grad G22[i, t]

may run *statement-major* (every point of G21, then every point of G22) when no statement of its body reads
what a later statement of the body, or itself at another point, produces: then every value a statement reads
exists before it starts. A statement whose members are all array kernels (and gradient accumulations over point
reads) then runs as one batched call per member, `torch.func.vmap` / `jax.vmap` over the points: the batch
rules of every op come from the array library, and the op's own attributes stay those of one point. Reads of
values that are the same at every point (a parameter read by every step) are not batched. Everything else, and
any batch the array library refuses, runs point by point, in the same statement-major order.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from timerl.pdg.graph import Graph, Node, identity_read
from timerl.pdg.sizes import output_bytes, static_bytes
from timerl.ops.batching import batch_rule
from timerl.ops.registry import ACCUMULATE, CONST, MERGE, SINK
from timerl.runtime.batch_checks import batched_check
from timerl.runtime.batch_inputs import accumulated, covered_run, gathered, padded_window, selected
from timerl.runtime.evaluate import (bound_kernel, evaluate, first_violation, host_array, index_value, op_kernel,
                                     raise_violation)
from timerl.runtime.fusions import tanh_gradients
from timerl.runtime.window_scans import scan_kernel, scan_rows, window_geometry, window_scan_rules
from timerl.runtime.windows import masked_reduction, windowed_members


INSIDE, WINDOW, GATHER = "inside", "window", "gather"  # how a member reads one input (`BatchedGroup.reads`)
WINDOW_BYTES = 1 << 20  # the padded window of one value in one chunk of a statement's points (`BatchedGroup._chunks`)
# A memory-aware schedule's batched loops run in chunks (`chunk_points`): at most CHUNK_POINTS points, whose
# values stay within CHUNK_BYTES, so that the peak follows what the schedule keeps alive, not the loop's length
CHUNK_POINTS = 64
CHUNK_BYTES = 4 << 20


def point_bytes(graph: Graph, group: Any) -> tuple[int, int] | None:
    """Bytes of a group's statement at one point, as `BatchedGroup.run` accounts them: (the values it stores for
    other groups, the values that live only while it runs); None where a size is symbolic."""
    stored = transient = 0
    kept = set(group.freed_later)
    for member_id in group.members:
        node = graph.nodes[member_id]
        if node.outputs and node.category is not SINK:
            size = static_bytes(node)
            if size is None:
                return None
            if member_id in kept:
                stored += size
            else:
                transient += size
    return stored, transient


def chunk_points(sizes: list[tuple[int, int] | None]) -> int:
    """The most points a chunk of a batched loop may hold: `CHUNK_POINTS`, fewer where the bytes alive while its
    statements run would pass `CHUNK_BYTES`: what each statement stores lives until the chunk's frees, what it
    computes for itself only while it runs, so a point costs the stored bytes of every statement and the largest
    transient bytes of one (``sizes``: each statement's `point_bytes`; where one is unknown, `CHUNK_POINTS`)."""
    if not sizes or any(size is None for size in sizes):
        return CHUNK_POINTS
    per_point = sum(stored for stored, _ in sizes) + max(transient for _, transient in sizes)
    return max(1, min(CHUNK_POINTS, CHUNK_BYTES // max(per_point, 1)))


class BatchedGroup:
    """One group run at many points at once; `None` from `build` when a member cannot be batched."""

    def __init__(self, executable: Any, group: Any, backend: Any) -> None:
        self.executable = executable
        self.group = group
        self.backend = backend
        self.graph: Graph = executable.graph
        self.members = [self.graph.nodes[n] for n in group.members]
        self.inside = set(group.members)
        self.stored = set(group.freed_later)
        self.readers = {n.id: executable.readers[n.id] for n in self.members}
        self.mapped: dict = {}
        self.finders: dict = {}  # (member, vmap axes) -> its value check over the batch, or None (`_finder`)
        self.compiled: dict = {}  # input layout -> the members as one function (`_members_function`)
        self.windowed = windowed_members(self.graph, group) or set()
        self.kernels = {n.id: self._kernel(n) for n in self.members
                        if n.category.kernel}
        self.sizes = {n.id: static_bytes(n) for n in self.members}
        # per member and input slot, planned once: read inside the group (INSIDE), a range read (WINDOW) or
        # a read of another group's points (GATHER)
        self.reads = {n.id: tuple(self._read_kind(n, edge) for edge in n.inputs) for n in self.members}
        # the reads of another group's points at the same point (``x[i, t]`` at ``[i, t]``): their pool keys
        # are the points themselves, no index function called per point (`gathered`)
        self.identity = {(n.id, slot) for n in self.members for slot, edge in enumerate(n.inputs)
                         if self.reads[n.id][slot] is GATHER
                         and identity_read(edge, n, self.graph.nodes[edge.producer])}
        # reductions of windows computed as scans of the run the windows cover, where the windows allow
        # (`timerl.runtime.window_scans`): member -> its `WindowScan`; and their kernels per (member, shape)
        scans = window_scan_rules(self.graph, self.members, self.windowed, self.reads, INSIDE, WINDOW)
        self.scans, self.scan_reads = scans if scans is not None else (None, ())
        self.scan_kernels: dict = {}
        # g * (1 - y * y), the gradient of tanh that autodiff writes, as one kernel where the backend has one:
        # last member -> (its kernel, g's (member, slot), y's (member, slot)); the two members before it fold in
        self.tanh_grads = tanh_gradients(self.graph, self.members, self.inside, self.stored | self.windowed,
                                         getattr(backend, "tanh_backward", None))
        self.folded = {n for (_, _, _, chain) in self.tanh_grads.values() for n in chain}
        # the members whose values leave the statement's function: what other groups read, windows (their bytes
        # are counted), what a sink reads; on jax the others stay inside the one compiled call, where XLA fuses
        # them away (returning every member's value cost REINFORCE's learning statement half its time)
        self.returned = self.stored | self.windowed | {
            node.inputs[0].producer for node in self.members
            if node.category is SINK and node.inputs and self.reads[node.id][0] is INSIDE}

    def _read_kind(self, node: Node, edge: Any) -> int:
        if edge.producer in self.inside and identity_read(edge, node, self.graph.nodes[edge.producer]):
            return INSIDE
        return WINDOW if edge.ranges() else GATHER

    @staticmethod
    def supported(graph: Graph, group: Any) -> bool:
        return windowed_members(graph, group) is not None

    def _kernel(self, node: Node) -> Callable:
        kernel = bound_kernel(node, self.backend)
        reduces_window = node.id not in self.windowed and any(
            e.producer in self.windowed or e.ranges() for e in node.inputs)
        if not reduces_window:
            return kernel
        return masked_reduction(kernel, self.backend.xp)

    def _map(self, node_id: int, axes: tuple) -> Callable:
        """The member at every point in one call: the op's batch rule (`timerl.ops.batching`) where it has one,
        else the array library's vmap; chosen at the first call, when the operands' ranks are known."""
        key = (node_id, axes)
        function = self.mapped.get(key)
        if function is not None:
            return function

        def first_call(*values: Any) -> Any:
            ranks = [v.ndim - (a == 0) for v, a in zip(values, axes)]
            chosen = self.mapped[key] = self._batch_rule(node_id, ranks, axes) or self.backend.vmap(
                self.kernels[node_id], axes)
            return chosen(*values)

        return first_call

    def _batch_rule(self, node_id: int, ranks: list[int], axes: tuple) -> Callable | None:
        node = self.graph.nodes[node_id]
        attrs, dtype, backend = node.attrs.as_dict(), node.outputs[0].dtype, self.backend
        masked = len(axes) == len(node.inputs) + 1  # a reduction over a window, its mask last (`_masked`)
        inputs = (ranks[:-1], axes[:-1]) if masked else (ranks, axes)
        rule = batch_rule(node.op, attrs, *inputs, backend.xp, bound_kernel(node, backend),
                          lambda changed: op_kernel(node.op, changed, dtype, backend))
        if rule is None or not masked:
            return rule
        return masked_reduction(lambda *values: backend.cast(rule(*values), dtype), backend.xp, batched=True)

    def run(self, points: Sequence[tuple[int, ...]]) -> None:
        """Compute every member at every point, then store what other groups read. Statements that pad windows
        run in chunks of points (`_chunks`), so that the padding does not grow with the square of the loop's
        length; what they store is joined into one batch again."""
        pool = self.executable.pool
        kept: dict[int, list[tuple[Any, bool, int]]] = {}  # stored member -> (value, batched, points) per chunk
        kept_bytes = peak = 0  # the chunks' stored values, alive until stored together; the most alive at once
        scanned = self._scanned(points)
        self.executable.window_scans += scanned is not None
        chunks = [points] if scanned is not None else self._chunks(points)
        self.executable.padded_chunks += len(chunks) if self.windowed and scanned is None else 0
        for chunk in chunks:
            values, sinks, alive = self._compute(chunk, scanned)
            transient = stored = 0
            for node in self.members:
                if not node.outputs or node.id in self.folded:
                    continue
                if node.id in self.stored:
                    value, batched = values[node.id]
                    kept.setdefault(node.id, []).append((value, batched, len(chunk)))
                    size = self.sizes[node.id]
                    stored += size * len(chunk) if size is not None else self.backend.nbytes(value)
                elif node.id in self.windowed:
                    transient += self.backend.nbytes(values[node.id][0])
                else:
                    transient += self.sizes[node.id] * len(chunk)
            # the most bytes alive at once inside the members' function where its steps free their results
            # (`_members_function`), else every member's value at once
            peak = max(peak, kept_bytes + (stored + transient if alive is None else alive))
            kept_bytes += stored
            for sink in sinks:
                self._call_sink(sink, chunk, values)
        if peak:
            pool.transient(peak)
        for node_id, parts in kept.items():
            self._store(node_id, points, *self._joined(parts))

    def _scanned(self, points: Sequence[tuple[int, ...]]) -> tuple[str, int, int, Any] | None:
        """How this call's windows are read from scans (`window_scans.scan_rows`), when the statement's rules
        allow and every range read of the statement covers the same windows; else None (padded)."""
        if self.scans is None or len(points) <= 1:
            return None
        for node, slot in self.scan_reads:  # values combined with windows: the same at every point
            reader = self.readers[node.id][slot]
            read = reader.coordinates if reader.has_ranges else reader.point_read
            first = tuple(read(points[0]))
            if any(tuple(read(p)) != first for p in points):
                return None
        found = None
        for node in self.members:
            for slot, kind in enumerate(self.reads[node.id]):
                if kind is not WINDOW:
                    continue
                reader = self.readers[node.id][slot]
                try:
                    _, _, starts, lengths = window_geometry([reader.coordinates(p) for p in points])
                except ValueError:
                    return None
                if found is not None and not (np.array_equal(found[0], starts)
                                              and np.array_equal(found[1], lengths)):
                    return None
                found = (starts, lengths)
        rows = None if found is None else scan_rows(*found)
        if rows is None:
            return None
        return rows[0], rows[1], rows[2], self.backend.from_numpy(rows[3])

    def _chunks(self, points: Sequence[tuple[int, ...]]) -> list[Sequence[tuple[int, ...]]]:
        """The points in runs whose padded windows hold at most ``WINDOW_BYTES`` per windowed value (all the
        points at once where nothing is padded, or on jax, whose compiled statements want one shape). A window's
        bytes per position are those of the output it reads (an environment step's reward, not the whole step),
        or of a windowed member's value where that is wider (booleans made float)."""
        if not self.windowed or self.backend.name == "jax" or len(points) <= 1:
            return [points]
        length = position = 0
        for node in self.members:
            for slot, edge in enumerate(node.inputs):
                if edge.ranges():
                    reader = self.readers[node.id][slot]
                    position = max(position, output_bytes(self.graph.nodes[edge.producer], edge.output) or 0)
                    length = max([length] + [len(c) for c in reader.coordinates(points[0]) if isinstance(c, range)])
        for member in self.windowed:
            position = max(position, _position_bytes(self.graph.nodes[member]))
        per_chunk = max(1, WINDOW_BYTES // max(length * position, 1))
        return [points[k:k + per_chunk] for k in range(0, len(points), per_chunk)]

    def _joined(self, parts: list[tuple[Any, bool, int]]) -> tuple[Any, bool]:
        """One member's values over the chunks as one batch (one shared value where no chunk is batched)."""
        if len(parts) == 1 or not any(batched for _, batched, _ in parts):
            return parts[0][0], parts[0][1]
        xp = self.backend.xp
        rows = [value if batched else xp.broadcast_to(value[None], (count, *value.shape))
                for value, batched, count in parts]
        return xp.concat(rows, axis=0), True

    def _store(self, node_id: int, points: Sequence[tuple[int, ...]], value: Any, batched: bool) -> None:
        pool, count = self.executable.pool, len(points)
        size = self.sizes[node_id]
        if hasattr(pool, "store_stack") and node_id not in pool.blocks:
            if size is None:
                size = self.backend.nbytes(value) // (count if batched else 1)
            pool.store_stack(node_id, points, (value,), size, same=not batched)
            return
        rows = self.backend.unstack(value) if batched else [value] * count
        for row, point in zip(rows, points):
            pool.store((node_id, point), (row,), size)

    def _compute(self, points: Sequence[tuple[int, ...]], scanned: tuple | None = None
                 ) -> tuple[dict[int, tuple[Any, bool]], list[Node], int | None]:
        """Every member's batched value: the inputs from outside the group are gathered on the host first, then
        the members are computed from them by one pure function of those arrays (on jax, one jitted call for
        the whole statement). Returns member -> (value, batched along axis 0), the sinks to call, and the most
        bytes of members' values alive at once while it ran (None on jax, whose one compiled call keeps its own).
        ``scanned`` (from `_scanned`): windows are the one run they cover, their reductions scans of it."""
        pool = self.executable.pool
        arguments: list[Any] = []
        refs: dict[int, tuple[int, bool]] = {}  # member -> (its index in the results or arguments, batched)
        masks: dict[int, int] = {}  # windowed member -> the argument holding its valid-position mask
        steps: list[tuple[int, tuple, tuple]] = []  # (member, inputs as (is argument, index), vmap axes)
        sinks: list[Node] = []

        def argument(value: Any) -> int:
            arguments.append(value)
            return len(arguments) - 1

        def operand(node: Node, slot: int, kind: str) -> tuple[int, bool, int | None]:
            """Input ``slot`` of ``node``: (where, batched, the argument of its window's mask or None)."""
            edge = node.inputs[slot]
            if kind is INSIDE:
                return (*refs[edge.producer], masks.get(edge.producer))
            reader = self.readers[node.id][slot]
            if kind is WINDOW and scanned is not None:  # the run itself, the same value for every point
                run = covered_run(pool, reader, points, scanned[1], scanned[2], self.backend)
                return -1 - argument(run), False, None
            if kind is WINDOW:  # the run, gathered into padded windows inside the members' function
                run, index, mask = padded_window(pool, reader, points, self.backend)
                steps.append((None, (-1 - argument(run), -1 - argument(index)), ()))
                return len(steps) - 1, True, argument(mask)
            value, batched = gathered(pool, reader, points, self.backend, (node.id, slot) in self.identity)
            return -1 - argument(value), batched, None

        for node in self.members:
            if node.category is CONST:
                refs[node.id] = (-1 - argument(self.executable.namespace[f"C{node.id}"]), False)
                continue
            if node.category is ACCUMULATE:
                total = accumulated(pool, node, self.readers[node.id], points, self.backend)
                refs[node.id] = (-1 - argument(total), True)
                continue
            if node.category.batched == "evaluated":  # the point's own value (`index_value`), every point's stacked
                bounds = self.executable.bounds
                values = np.stack([index_value(node, point, bounds) for point in points])
                refs[node.id] = (-1 - argument(self.backend.from_numpy(values)), True)
                continue
            if node.category is MERGE:
                merged = selected(pool, node, self.readers[node.id], points, self.backend)
                refs[node.id] = (-1 - argument(merged), True)
                continue
            if node.category is SINK:
                sinks.append(node)
                continue
            if node.id in self.folded:
                continue
            if scanned is not None and node.id in self.scans:  # the run's scan, read at each window's row
                runs = tuple(operand(node, slot, kind)[0] for slot, kind in enumerate(self.reads[node.id]))
                refs[node.id] = (len(steps), True)
                steps.append((node.id, (*runs, -1 - argument(scanned[3])), (scanned[0],)))
                continue
            fused = self.tanh_grads.get(node.id)
            if fused is not None:
                (g_member, g_slot), (y_member, y_slot) = fused[1], fused[2]
                g_where, g_batched, _ = operand(g_member, g_slot, self.reads[g_member.id][g_slot])
                y_where, y_batched, _ = operand(y_member, y_slot, self.reads[y_member.id][y_slot])
                refs[node.id] = (len(steps), g_batched or y_batched)
                steps.append((node.id, (g_where, y_where), (0 if g_batched else None, 0 if y_batched else None)))
                continue
            inputs, axes = [], []
            valid = None  # the argument holding the (N, L) mask of the window positions that exist
            for slot, kind in enumerate(self.reads[node.id]):
                where, batched, mask = operand(node, slot, kind)
                if mask is not None:
                    valid = mask
                inputs.append(where)
                axes.append(0 if batched else None)
            if node.id in self.windowed:
                masks[node.id] = valid
            elif valid is not None:  # a reduction over the window: positions past its end must not count
                inputs.append(-1 - valid)
                axes.append(0)
            refs[node.id] = (len(steps), any(a == 0 for a in axes))
            steps.append((node.id, tuple(inputs), tuple(axes)))
        wanted = tuple(sorted({refs[m][0] for m in self.returned if m in refs and refs[m][0] >= 0}))
        function, alive, checked = self._members_function(tuple(steps), wanted)
        *returned, violation = function(*arguments)
        if violation is not None and int(violation[0]):  # one check over the batch found bad values
            details = host_array(violation[1])
            raise_violation(self.graph.nodes[checked[int(violation[0]) - 1]], points[int(details[0])], details[1:])
        results = dict(zip(wanted, returned))
        values = {member: (results[where] if where >= 0 else arguments[-1 - where], batched)
                  for member, (where, batched) in refs.items() if where < 0 or where in results}
        if alive is not None:  # and the members gathered as arguments (sums, merges, constants), alive throughout
            gathered_bytes = sum(self.sizes[member] or 0 for member, (where, _) in refs.items() if where < 0)
            alive = alive[0] + gathered_bytes * len(points)
        return values, sinks, alive

    def _members_function(self, steps: tuple, wanted: tuple[int, ...]) -> tuple[Callable, list[int] | None, list]:
        """The members of a statement as one function of the gathered arguments (negative indices: arguments,
        others: earlier results), returning the results at ``wanted`` followed by what the members' value checks
        found (`first_violation` over the batch, None when no check can fail); jitted as a whole on jax, cached per
        input layout; without a jit, with a list whose item is the most bytes its results held at once in the last
        call (each result counted from the step computing it to the step dropping it), and the list of the checked
        members, in the order of `first_violation`'s codes."""
        found = self.compiled.get((steps, wanted))
        if found is not None:
            return found

        fused = self.tanh_grads
        jit = getattr(self.backend, "jit", None) if self.backend.name == "jax" else None
        # without a jit, each result that no later step reads and that the statement does not return goes right
        # after its last reader: a batched statement's intermediates are whole batches (a critic's hidden layers
        # over a rollout: 1.6 MB each at 64 x 100), not all alive at once
        last_reader = {k: j for j, (_, inputs, _) in enumerate(steps) for k in inputs if k >= 0}
        dropped = [() if jit is not None else tuple(
            {k for k in inputs if k >= 0 and last_reader[k] == j and k not in wanted})
            for j, (_, inputs, _) in enumerate(steps)]

        nbytes = self.backend.nbytes
        alive = [0]  # without a jit: the most bytes of results alive at once in the last call
        checked: list[int] = []  # the members whose checks can fail, as the last call (or trace) found them
        xp = self.backend.xp

        def members(*arguments: Any) -> list:
            results: list = []
            found: list = []
            checked.clear()
            live = most = 0
            for (node_id, inputs, axes), gone in zip(steps, dropped):
                values = [arguments[-1 - k] if k < 0 else results[k] for k in inputs]
                finder = None if node_id is None or axes and isinstance(axes[0], str) else self._finder(node_id, axes)
                if finder is not None:
                    finding = finder(*values)
                    if finding is not None:
                        checked.append(node_id)
                        found.append(finding)
                if node_id is None:  # a padded window: rows of the run it covers
                    results.append(values[0][values[1]])
                    live += nbytes(results[-1])
                    most = max(most, live)
                    continue
                if node_id in fused:  # the operands line up on their leading (batch) axis: no vmap needed
                    results.append(fused[node_id][0](*values))
                elif axes and isinstance(axes[0], str):  # a window reduction as a scan (SUFFIX or PREFIX)
                    results.append(self._scan_kernel(node_id, axes[0])(*values))
                elif any(a == 0 for a in axes):
                    results.append(self._map(node_id, axes)(*values))
                else:
                    results.append(self.kernels[node_id](*values))
                del values
                live += nbytes(results[-1])
                most = max(most, live)
                for k in gone:
                    live -= nbytes(results[k])
                    results[k] = None
            alive[0] = most
            return [results[k] for k in wanted] + [first_violation(xp, found)]

        compiled = self.compiled[(steps, wanted)] = (
            (members, alive, checked) if jit is None else (jit(members), None, checked))
        return compiled

    def _finder(self, node_id: int, axes: tuple) -> Callable | None:
        """The member's value check over the batch (`batch_checks.batched_check`), None without one; cached."""
        key = (node_id, axes)
        if key not in self.finders:
            self.finders[key] = batched_check(self.graph.nodes[node_id], axes, self.backend)
        return self.finders[key]

    def _scan_kernel(self, node_id: int, shape: str) -> Callable:
        kernel = self.scan_kernels.get((node_id, shape))
        if kernel is None:
            node = self.graph.nodes[node_id]
            kernel = self.scan_kernels[(node_id, shape)] = scan_kernel(
                self.scans[node_id], shape, node.attrs.as_dict(), node.outputs[0].dtype, self.backend)
        return kernel

    def _call_sink(self, sink: Node, points: Sequence[tuple[int, ...]], values: dict) -> None:
        edge = sink.inputs[0]
        if self.reads[sink.id][0] is INSIDE:
            value, batched = values[edge.producer]
            rows = self.backend.unstack(value) if batched else [value] * len(points)
        else:
            reader, pool = self.readers[sink.id][0], self.executable.pool
            rows = [gathered(pool, reader, [point], self.backend)[0] for point in points]
        for row, point in zip(rows, points):
            evaluate(sink, point, [row], self.executable.seed, self.executable.bounds, self.backend)


def _position_bytes(node: Node) -> int:
    """Bytes of one position of a windowed member's value (its first axis runs along the window), 0 when its
    other sizes are symbolic."""
    shape = node.outputs[0].shape[1:]
    if not all(isinstance(d, int) for d in shape):
        return 0
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(node.outputs[0].dtype).itemsize
