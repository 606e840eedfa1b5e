"""Plan once, run many (shared/STYLE.md, example 14): each dataflow group lowered once into one Python function.

Everything that is the same at every point of a statement is decided here, when the program is lowered: which
member reads which (a local variable for reads inside the group, a pool key built from the dependence
expressions otherwise), the bound kernel, whether an output is stored or only lives inside the group, and its
byte size. The generated function for a group then only indexes and calls (paper §5.4, fusion with code
generation):

    def G12(point):
        p0, p1 = point
        v17_0 = load((17, (p0,)))[0]
        v20_0 = K20(v19_0, v17_0)
        store((20, point), (v20_0,), 1024)
        ...

On jax, the members of a group that are pure array kernels with static shapes run as one `jax.jit` function
(one XLA computation per group instead of one dispatch per op). Reads the fast path does not cover (ranges,
conditions, masked gradient reads) and ops the executor evaluates itself (sources, random draws, sinks, UDFs,
gradient accumulation) go through `timerl.runtime.evaluate`, the same code the reference interpreter runs.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from timerl.ops.registry import ACCUMULATE, CONST, DRAW, MERGE, OPS, UDF, Unsupported
from timerl.ops.special import draws_normal
from timerl.pdg.graph import Edge, Graph, Node, Point, identity_read
from timerl.pdg.sizes import output_bytes, static_bytes
from timerl.runtime import rng
from timerl.runtime.draws import DrawPrefetch
from timerl.runtime.fusions import (buffer_donations, draw_chains, input_dtypes, matmul_adds,
                                    tanh_gradients)
from timerl.runtime.generated import udf_call
from timerl.runtime.lifetimes import LOCAL_NAME, Candidates, free_after_last_use
from timerl.runtime.evaluate import bound_kernel, has_symbols, point_kernel
from timerl.symbolic import TRUE, Symbol


def simple_read(edge: Edge) -> bool:
    """A read of one point, always active: the key can be written as a Python expression."""
    return edge.masked_by is None and edge.condition is TRUE and all(isinstance(i, Point) for i in edge.index)


class GroupLowering:
    """Generates the source of one group's function; the names it uses live in the shared namespace ``ns``."""

    def __init__(self, graph: Graph, bounds: Mapping[Symbol, int], backend: Any, ns: dict,
                 generic_reader: Callable[[Node, int], Callable], jit_groups: bool,
                 prefetch_draws: bool = False, matmul_add: bool = True, donation: bool = True) -> None:
        self.graph = graph
        self.bounds = bounds
        self.backend = backend
        self.ns = ns
        self.generic_reader = generic_reader
        self.jit_groups = jit_groups
        self.prefetch_draws = prefetch_draws and not jit_groups
        self.matmul_add = matmul_add and not jit_groups
        self.donation = donation and not jit_groups
        self.constants: dict[str, np.ndarray] = {}
        self.prefetchers: list[DrawPrefetch] = []  # reset by the executor at every run
        # group -> (most bytes of static-size values it reads only inside, alive at once; members whose values
        # have sizes known only at run time): what the group adds to the peak while it runs (the dry run's)
        self.transient: dict[int, Candidates] = {}  # group -> what it adds to the peak (`free_after_last_use`)

    # ---- the pieces of one member -------------------------------------------------------------------------------
    def _coordinates(self, node: Node) -> dict[Symbol, Symbol]:
        return {d: Symbol(f"p{k}") for k, d in enumerate(node.domain)}

    def _key_source(self, edge: Edge, node: Node) -> str:
        rename = self._coordinates(node)
        items = [item.expr.substitute(self.bounds).substitute(rename).python() for item in edge.index]
        inner = ", ".join(items) + ("," if len(items) == 1 else "")
        return f"({edge.producer}, ({inner}))"

    def _pure(self, node: Node) -> bool:
        """A registry kernel whose shapes and attributes are the same at every point."""
        if not node.category.kernel or isinstance(OPS[node.op].impl, Unsupported):
            return False
        if self._checked_on_host(node):
            return False
        if has_symbols(node.attrs.as_dict()) or static_bytes(node) is None:
            return False
        return not any(e.ranges() for e in node.inputs)

    def _checked_on_host(self, node: Node) -> bool:
        """An op whose input values `evaluate` checks on the host before its kernel (jax checks in the jit)."""
        return OPS[node.op].check_values is not None

    # ---- the whole group ------------------------------------------------------------------------------------------
    def lower(self, group) -> Callable[[tuple], None]:
        graph, ns = self.graph, self.ns
        members = [graph.nodes[n] for n in group.members]
        inside = set(group.members)
        stored = set(group.freed_later)
        first = members[0]
        lines = [f"def G{group.id}(point):"]
        body: list[str] = []
        if first.domain:
            body.append(f"{', '.join(f'p{k}' for k in range(len(first.domain)))}, = point")
        transient_sizes: dict[str, int] = {}  # local variable -> bytes, for values only the group reads
        transient_dynamic: dict[str, int] = {}  # the same, for values whose bytes are known at run time -> member
        stored_sizes: dict[str, int] = {}  # local variable -> bytes, for values the group stores (static sizes)
        pure = [m for m in members if self._pure(m)] if self.jit_groups else []
        fused = self._fuse(group, pure, inside) if len(pure) > 1 else set()
        fused_at = next((m.id for m in members if m.id in fused), None)

        def plain(member: Node) -> bool:
            return self._plain_items(member, inside) is not None

        fuse = getattr(self.backend, "fused_matmul_add", None) if self.matmul_add else None
        pairs = matmul_adds(graph, members, inside, stored, fuse, self._pure, plain)
        folded = {matmul.id for matmul, _ in pairs.values()}
        chains = draw_chains(graph, members, self._pure) if self.prefetch_draws else {}
        chained = {m.id for chain in chains.values() for m in chain[1:]}
        tanh_grads = self._tanh_gradients(members, inside, stored, chained | set(chains))
        tanh_folded = {n: last for last, (_, _, _, chain) in tanh_grads.items() for n in chain}
        donations = {} if not self.donation else buffer_donations(
            graph, members, inside, stored, folded | chained | set(chains) | set(tanh_grads) | set(tanh_folded),
            {**{matmul.id: add for add, (matmul, _) in pairs.items()}, **tanh_folded},
            getattr(self.backend, "inplace_kernels", None), self._pure, plain)
        for member in members:
            n = member.id
            if n in tanh_folded:  # computed by the tanh gradient that reads it (`_tanh_gradients`)
                continue
            if n in tanh_grads:
                kernel, g, y, _ = tanh_grads[n]
                self.ns[f"K{n}"] = kernel
                body.append(f"m = {n}")
                body.append(f"v{n}_0 = K{n}({g}, {y})")
                outputs = [f"v{n}_0"]
            elif n in chains:
                # the rows of the chain's values that the group reads or stores (Gumbel noise, not its draw)
                ids = {m.id for m in chains[n]}
                read = {e.producer for m in members if m.id not in ids for e in m.inputs}
                kept = [k for k, m in enumerate(chains[n]) if m.id in stored or m.id in read] or [len(chains[n]) - 1]
                prefetch = DrawPrefetch(member, chains[n], self.bounds[self.graph.bound_of(member.domain[-1])],
                                        self.ns["SEED"], self.backend,
                                        sum(static_bytes(m) or 0 for m in chains[n]), kept)
                self.prefetchers.append(prefetch)
                self.ns[f"H{n}"] = prefetch
                body.append(f"m = {n}")
                body.append(f"{', '.join(f'v{chains[n][k].id}_0' for k in kept)}, = H{n}(point)")
                outputs = [f"v{n}_0"]
            elif n in chained:  # computed with the draw it derives from (`draw_chains`)
                outputs = [f"v{n}_0"]
            elif n in fused:
                if n == fused_at:
                    body.extend(self._fused_call(group, members, fused, inside))
                outputs = [f"v{n}_{k}" for k in range(len(member.outputs))]
            elif n in folded:  # computed by the add that reads it (`matmul_adds`)
                outputs = [f"v{n}_0"]
            elif n in pairs:
                matmul, kernel = pairs[n]
                self.ns[f"K{n}"] = kernel
                x, w = self._plain_items(matmul, inside)
                bias = next(item for edge, item in zip(member.inputs, self._plain_items(member, inside))
                            if edge.producer != matmul.id)
                body.append(f"m = {n}")
                body.append(f"v{n}_0 = K{n}({x}, {w}, {bias})")
                outputs = [f"v{n}_0"]
            elif n in donations:  # written into the buffer of an input that dies here
                slot, kernel = donations[n]
                self.ns[f"K{n}"] = kernel
                items = self._plain_items(member, inside)
                body.append(f"m = {n}")
                body.append(f"v{n}_0 = K{n}({', '.join(items)}, out={items[slot]})")
                outputs = [f"v{n}_0"]
            else:
                body.append(f"m = {n}")
                args = self._arguments(member, inside)
                outputs = [f"v{n}_{k}" for k in range(len(member.outputs))]
                body.extend(self._evaluation(member, args, outputs))
            if not member.outputs:
                continue
            size = static_bytes(member)
            values = "(" + ", ".join(outputs) + ("," if len(outputs) == 1 else "") + ")"
            if n in stored:
                body.append(_Store(n, values, size))
                if size is not None:
                    stored_sizes.update({name: output_bytes(member, k) for k, name in enumerate(outputs)})
            elif member.category is MERGE and self._picks_stored(member, inside):
                pass  # the buffer of a value the pool holds and counts (a state placeholder fused into its reader)
            elif size is not None:
                transient_sizes.update({name: output_bytes(member, k) for k, name in enumerate(outputs)})
            else:  # its bytes, taken while it is alive, for the count below
                body.append(f"b{n} = nbytes_of({values})")
                transient_dynamic.update({name: n for name in outputs})
        donors = {f"v{n}_0": self._plain_items(graph.nodes[n], inside)[slot] for n, (slot, _) in donations.items()}
        body = self._without_unread_constants(body, transient_sizes)
        body, candidates = free_after_last_use(body, transient_sizes, donors, stored_sizes, transient_dynamic)
        body = _batched_stores(body)
        self.transient[group.id] = candidates
        donated = sum(static_bytes(graph.nodes[n]) for n in donations)
        if any(static > 0 or members for static, members in candidates) or donated:
            total = _most(candidates)
            body.append(f"transient({total}, {donated}, {group.id})")
        if not body:
            body.append("pass")
        lines.append("    m = None")
        lines.append("    try:")
        lines.extend("        " + line for line in body)
        lines.append("    except TimeRLError:")
        lines.append("        raise")
        lines.append("    except Exception as error:")
        lines.append("        fail(m, point, error)")
        source = "\n".join(lines)
        exec(compile(source, f"<timerl group G{group.id}>", "exec"), ns)  # noqa: S102 (our own generated code)
        function = ns[f"G{group.id}"]
        function.source = source
        return function

    def _tanh_gradients(self, members: list[Node], inside: set[int], stored: set[int],
                        elsewhere: set[int]) -> dict[int, tuple[Any, str, str, tuple[int, int]]]:
        """Autodiff's gradient of tanh, ``g * (1 - y * y)``, as the backend's one kernel (`timerl.runtime.fusions`):
        the last mul -> (kernel, g's and y's expressions, the two members folded into it), where every operand
        is a plain read and no member of the chain is computed by other means (``elsewhere``)."""
        kernel = None if self.jit_groups else getattr(self.backend, "tanh_backward", None)
        found = tanh_gradients(self.graph, members, inside, stored, kernel)
        planned = {}
        for last, (kernel, (g_member, g_slot), (square, y_slot), chain) in found.items():
            g_items, y_items = self._plain_items(g_member, inside), self._plain_items(square, inside)
            if g_items is None or y_items is None or elsewhere & {last, *chain}:
                continue
            planned[last] = (kernel, g_items[g_slot], y_items[y_slot], chain)
        return planned

    def _plain_items(self, member: Node, inside: set[int]) -> list[str] | None:
        """The member's inputs as Python expressions when every one is always read (a local variable or a
        pool load), else None."""
        items = []
        for edge in member.inputs:
            if edge.producer in inside and identity_read(edge, member, self.graph.nodes[edge.producer]):
                items.append(f"v{edge.producer}_{edge.output}")
            elif simple_read(edge):
                items.append(f"load({self._key_source(edge, member)})[{edge.output}]")
            else:
                return None
        return items

    def _without_unread_constants(self, body: list[str], sizes: dict[str, int]) -> list[str]:
        """``body`` without the lines that bind a constant member no line reads (a constant built into a jitted
        function as its own: `timerl.runtime.jax_plan`). Its value stays in ``constants``: a vectorized run of
        the group (`timerl.runtime.batch`) reads it from the namespace."""
        mentions: dict[str, int] = {}
        for line in body:
            for name in LOCAL_NAME.findall(line):
                mentions[name] = mentions.get(name, 0) + 1
        result: list[str] = []
        for line in body:
            if isinstance(line, _Constant) and mentions[line.name] == 1:
                if result and result[-1] == f"m = {line.member}":
                    result.pop()
                sizes.pop(line.name, None)
                continue
            result.append(line)
        return result

    def _picks_stored(self, merge: Node, inside: set[int]) -> bool:
        """Whether every input of ``merge`` is a point the pool holds (a plain or conditioned point read, none
        of a value computed in this call): its value is then one of the pool's buffers, not a new one."""
        return all((simple_read(edge) or _conditioned_point_read(edge))
                   and not (edge.producer in inside and identity_read(edge, merge, self.graph.nodes[edge.producer]))
                   for edge in merge.inputs)

    def _arguments(self, member: Node, inside: set[int]) -> str:
        """The member's inputs as one Python expression of a list: a local variable for a read inside the group,
        a pool key for a plain point read, a reader closure otherwise (those may be inactive at a point: their
        input is left out, a merge takes the first active one, an accumulation gets no contributions there)."""
        graph = self.graph
        items, optional = [], False
        conditioned: list[tuple[str, str] | None] = []  # (condition, read) of inline conditioned point reads
        for slot, edge in enumerate(member.inputs):
            producer = graph.nodes[edge.producer]
            if edge.producer in inside and identity_read(edge, member, producer):
                items.append(f"v{edge.producer}_{edge.output}")
                conditioned.append(None)
            elif simple_read(edge):
                items.append(f"load({self._key_source(edge, member)})[{edge.output}]")
                conditioned.append(None)
            elif _conditioned_point_read(edge):
                condition = self._condition_source(edge, member)
                read = f"load({self._key_source(edge, member)})[{edge.output}]"
                items.append(f"({read} if {condition} else SKIP)")
                conditioned.append((condition, read))
                optional = True
            else:
                name = f"R{member.id}_{slot}"
                self.ns[name] = self.generic_reader(member, slot)
                items.append(f"{name}(point)")
                conditioned.append(None)
                optional = optional or edge.condition is not TRUE
        listed = "[" + ", ".join(items) + "]"
        if not optional:
            return listed
        if member.category is MERGE:
            if all(c is not None for c in conditioned):  # the first active input, one test each
                chain = "NO_INPUT()"
                for condition, read in reversed(conditioned):
                    chain = f"{read} if {condition} else ({chain})"
                return f"[{chain}]"
            return f"[next(x for x in ({', '.join(items)},) if x is not SKIP)]"
        if member.category is ACCUMULATE:  # in its slot, so that the windows stay aligned with the inputs
            return f"[[] if x is SKIP else x for x in {listed}]"
        return f"[x for x in {listed} if x is not SKIP]"

    def _condition_source(self, edge: Edge, node: Node) -> str:
        return edge.condition.substitute(self.bounds).substitute(self._coordinates(node)).python()

    def _evaluation(self, member: Node, args: str, outputs: list[str]) -> list[str]:
        n, ns = member.id, self.ns
        if member.category is CONST:
            self.constants[f"C{n}"] = np.asarray(member.attrs["value"])  # moved in at the first run, in its session
            return [_Constant(n, outputs[0])]
        if member.category is MERGE:
            return [f"{outputs[0]}, = {args}"]
        if self._pure(member):
            if self.jit_groups:
                ns[f"K{n}"] = self.backend.compile(bound_kernel(member, self.backend))
                return [f"{outputs[0]} = K{n}(*{args})"]
            ns[f"K{n}"] = point_kernel(member, self.backend, input_dtypes(self.graph, member))
            return [f"{outputs[0]} = K{n}(*{args})"]
        if member.category is DRAW:  # the counter-based draw itself, without `evaluate`'s dispatch
            attrs, backend, seed = member.attrs.as_dict(), self.backend, ns["SEED"]
            stream, shape, dtype, normal = attrs["stream"], attrs["shape"], attrs["dtype"], draws_normal(member.op)
            ns[f"D{n}"] = lambda point: backend.from_numpy(rng.draw(seed, stream, point, shape, dtype, normal))
            return [f"{outputs[0]} = D{n}(point)"]
        if member.category is UDF:  # the user's function itself, without `evaluate`'s dispatch
            ns[f"U{n}"] = udf_call(member, self.backend)
            call = f"U{n}(point, {args})"
            return [f"{', '.join(outputs)}, = {call}" if outputs else call]
        ns[f"N{n}"] = member
        target = ", ".join(outputs) + ("," if outputs else "")
        call = f"evaluate(N{n}, point, {args}, SEED, BOUNDS, BACKEND)"
        return [f"{target} = {call}" if outputs else call]

    # ---- jax: one jit per group --------------------------------------------------------------------------------
    def _fuse(self, group, pure: list[Node], inside: set[int]) -> set[int]:
        """The pure members that run as one jitted function, called where the first of them stands: a member
        joins when every input it has from inside the group is either fused already or computed before."""
        order = {m: k for k, m in enumerate(group.members)}
        chosen: set[int] = set()
        start = None
        for member in pure:
            if start is None:
                start = order[member.id]
                chosen.add(member.id)
                continue
            if all(e.producer in chosen or order.get(e.producer, -1) < start
                   for e in member.inputs if e.producer in inside):
                chosen.add(member.id)
        return chosen if len(chosen) > 1 else set()

    def _fused_call(self, group, members: list[Node], fused: set[int], inside: set[int]) -> list[str]:
        """Call of one jitted function computing every fused member; its arguments are the fused members'
        inputs from outside the fused set, its results every fused output."""
        graph = self.graph
        externals: list[tuple[str, str]] = []  # (parameter name, expression at the call site)
        seen: dict[str, str] = {}
        steps: list[tuple[Node, list[str]]] = []
        for member in members:
            if member.id not in fused:
                continue
            names = []
            for edge in member.inputs:
                producer = graph.nodes[edge.producer]
                if edge.producer in fused and identity_read(edge, member, producer):
                    names.append(f"v{edge.producer}_{edge.output}")
                    continue
                if edge.producer in inside and identity_read(edge, member, producer):
                    expression = f"v{edge.producer}_{edge.output}"
                else:
                    expression = f"load({self._key_source(edge, member)})[{edge.output}]"
                if expression not in seen:
                    seen[expression] = f"x{len(seen)}"
                    externals.append((seen[expression], expression))
                names.append(seen[expression])
            steps.append((member, names))
        kernels = {member.id: bound_kernel(member, self.backend) for member, _ in steps}
        results = [f"v{member.id}_0" for member, _ in steps]
        parameters = ", ".join(name for name, _ in externals)
        inner = [f"def F{group.id}({parameters}):"]
        for member, names in steps:
            inner.append(f"    v{member.id}_0 = K{member.id}({', '.join(names)})")
        inner.append(f"    return ({', '.join(results)},)")
        local: dict = {f"K{n}": kernel for n, kernel in kernels.items()}
        exec(compile("\n".join(inner), f"<timerl fused G{group.id}>", "exec"), local)  # noqa: S102
        self.ns[f"F{group.id}"] = self.backend.compile(local[f"F{group.id}"])
        call = ", ".join(expression for _, expression in externals)
        return [f"m = {steps[0][0].id}", f"{', '.join(results)}, = F{group.id}({call})"]


class _Constant(str):
    """A generated line binding constant member ``member``'s value to local ``name``, which
    `GroupLowering._without_unread_constants` drops where no other line reads it."""

    member: int
    name: str

    def __new__(cls, member: int, name: str) -> "_Constant":
        line = super().__new__(cls, f"{name} = C{member}")
        line.member, line.name = member, name
        return line


class _Store(str):
    """A generated line storing member ``member``'s values (a tuple's source) in the pool; `_batched_stores`
    joins consecutive ones into one call, from their ``entry``."""

    entry: str

    def __new__(cls, member: int, values: str, size: int | None) -> "_Store":
        line = super().__new__(cls, f"store(({member}, point), {values}, {size})")
        line.entry = f"({member}, {values}, {size})"
        return line


def _batched_stores(body: list[str]) -> list[str]:
    """Consecutive stores of a group's members (a fused call's outputs) as one `MemoryPool.store_many`."""
    result: list[str] = []
    run: list[tuple[str, str]] = []  # (line, entry)

    def flush() -> None:
        if len(run) > 1:
            result.append(f"store_many(point, ({', '.join(entry for _, entry in run)},))")
        else:
            result.extend(line for line, _ in run)
        run.clear()

    for line in body:
        if isinstance(line, _Store):
            run.append((line, line.entry))
        else:
            flush()
            result.append(line)
    flush()
    return result


def _conditioned_point_read(edge: Edge) -> bool:
    """A read of one point under a condition: written inline as ``load(key) if condition else SKIP``."""
    return edge.masked_by is None and edge.condition is not TRUE and all(isinstance(i, Point) for i in edge.index)


def _most(candidates: Candidates) -> str:
    """The generated expression of what a group adds to the pool's peak (``b{n}``: member ``n``'s bytes)."""
    terms = [" + ".join([str(static)] + [f"b{n}" for n in members]) for static, members in candidates]
    if len(terms) == 1 and not candidates[0][1]:
        return str(max(0, candidates[0][0]))
    return f"max(0, {', '.join(terms)})"
