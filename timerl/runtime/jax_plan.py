"""How a dataflow group is lowered on jax: as few XLA computations as possible, each compiled once.

`timerl.runtime.plan` lowers every group into one generated Python function; on jax, its pure members run
inside one `jax.jit`. This lowering makes that jitted part as large as the group allows, and compiles less:

- **Checks of input values run inside the jit** (``gather``'s indices, an integer power's exponent): the jitted
  function also returns the first check that failed, as one scalar the host reads after the call, raising the
  check's error at the member's line and point before any result is used (`timerl.runtime.evaluate`).
- **Members are reordered** (any dataflow order is valid): what jax cannot compute (merges, gradient
  accumulations) runs as early as its inputs allow, in its original relative
  order, so the pure members after it are no longer cut off from the jitted part.
- **Random draws run inside the jit**, on the device, with `timerl.runtime.rng`'s bits
  (`timerl.runtime.jax_rng`): only the point's coordinates are passed in.
- **The jitted part returns only what is read outside it** (stored values and inputs of the members left
  out), not every intermediate.
- **Compiled functions are shared** between groups and executables with the same structure
  (`timerl.backends.jax_keys`): keyed by the ops, their attributes, dtypes and wiring (not by node ids), one
  `jax.jit` per structure, which jax compiles once per input shapes. A program compiled twice (a benchmark's runs, the
  tests) and groups repeated in one program (one optimizer update per parameter of the same shape) reuse it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from timerl.backends.jax_keys import Unhashable, freeze, shared
from timerl.ops.registry import CONST, DRAW
from timerl.ops.special import draws_normal
from timerl.pdg.graph import Node, identity_read
from timerl.pdg.sizes import output_bytes, static_bytes
from timerl.runtime import jax_rng
from timerl.ops.registry import OPS
from timerl.runtime.evaluate import bound_kernel, find_violation, first_violation, raise_violation
from timerl.runtime.plan import GroupLowering

def signature(node: Node, seed: int) -> Any:
    """What a member computes, independent of its id: equal signatures, equal kernels. A draw's depends on
    the seed and its stream."""
    if node.category is DRAW:
        return (node.op, seed, freeze(node.attrs.as_dict()))
    return (node.op, freeze(node.attrs.as_dict()), node.outputs[0].dtype)


def checked(node: Node) -> bool:
    """Whether the op checks its input values (inside the jit, on jax)."""
    return OPS[node.op].check_values is not None


def raise_first(members: list[Node], found: Any, point: tuple) -> None:
    """After a jitted call: raise the error of the first check that failed (`first_violation`'s result, None
    when no member can fail), at the members' point."""
    if found is not None and found[0]:
        raise_violation(members[int(found[0]) - 1], point, found[1])


class JaxGroupLowering(GroupLowering):

    def lower(self, group) -> Callable[[tuple], None]:
        return super().lower(dataclasses.replace(group, members=self._order(group)))

    def _pure(self, node: Node) -> bool:
        if node.category is DRAW:
            return jax_rng.on_device(node.op, node.attrs["dtype"]) and static_bytes(node) is not None
        # an input whose shape changes from point to point (a window that grows: a replay buffer filling up)
        # would recompile the whole jitted part at every new shape; such a member runs outside it, on its own
        nodes = self.graph.nodes
        if any(output_bytes(nodes[e.producer], e.output) is None for e in node.inputs):
            return False
        return super()._pure(node)

    def _checked_on_host(self, node: Node) -> bool:
        return False

    def _order(self, group) -> tuple[int, ...]:
        """A dataflow order of the members in which every impure one runs as early as it can; the members that
        call user functions (sources, sinks, UDFs) keep their relative order."""
        members = list(group.members)
        position = {n: k for k, n in enumerate(members)}
        nodes = self.graph.nodes
        # every read of a member earlier in the given order stays after it (a read of a later member reads
        # another, earlier point of it, from the pool)
        needs: dict[int, set[int]] = {
            n: {e.producer for e in nodes[n].inputs if position.get(e.producer, len(members)) < position[n]}
            for n in members}
        calls = [n for n in members if nodes[n].category.calls_user]
        for earlier, later in zip(calls, calls[1:]):
            needs[later].add(earlier)
        done: list[int] = []
        placed: set[int] = set()
        while len(done) < len(members):
            ready = [n for n in members if n not in placed and needs[n] <= placed]
            chosen = min(ready, key=lambda n: (self._pure(nodes[n]), position[n]))
            done.append(chosen)
            placed.add(chosen)
        return tuple(done)

    def _evaluation(self, member: Node, args: str, outputs: list[str]) -> list[str]:
        """A pure member outside the jitted part: its own shared jit (a draw gets the point's coordinates)."""
        if not self._pure(member):
            return super()._evaluation(member, args, outputs)
        n, seed = member.id, self.ns["SEED"]
        if checked(member):
            self.ns[f"K{n}"] = shared(self._key(member), lambda: self._checked_kernel(member), self.backend.jit)
            self.ns[f"V{n}"] = [member]
            self.ns.setdefault("raise_first", raise_first)
            return [f"{outputs[0]}, found = K{n}(*{args})", f"raise_first(V{n}, found, point)"]
        self.ns[f"K{n}"] = shared(self._key(member), lambda: self._kernel(member), self.backend.jit)
        if member.category is DRAW:
            return [f"{outputs[0]} = K{n}(*point)"]
        return [f"{outputs[0]} = K{n}(*{args})"]

    def _key(self, member: Node) -> Any:
        try:
            return ("kernel", signature(member, self.ns["SEED"]))
        except Unhashable:
            return None

    def _kernel(self, member: Node) -> Callable:
        if member.category is DRAW:
            attrs = member.attrs
            return jax_rng.drawer(self.backend.xp, self.ns["SEED"], attrs["stream"], attrs["shape"], attrs["dtype"],
                                  draws_normal(member.op))
        return bound_kernel(member, self.backend)

    def _checked_kernel(self, member: Node) -> Callable:
        """The member's kernel returning ``(value, first_violation of its check)``."""
        kernel, xp = bound_kernel(member, self.backend), self.backend.xp

        def checked_kernel(*inputs: Any) -> tuple:
            return kernel(*inputs), first_violation(xp, [find_violation(member, xp, inputs)])

        return checked_kernel

    def _fused_call(self, group, members: list[Node], fused: set[int], inside: set[int]) -> list[str]:
        """One call of the jitted part: its arguments are the values it reads from outside (a draw reads the
        point's coordinates), its results the values read outside it. The group's constants are constants of the
        jitted function, not arguments (each argument costs every call its conversion)."""
        graph = self.graph
        externals: dict[str, str] = {}  # expression at the call site -> parameter name
        constants: dict[int, str] = {}  # a constant member of the group read inside -> its name there
        steps: list[tuple[Node, list[str]]] = []
        local_name = {}  # member id -> name of its value inside the jitted function
        for member in members:
            if member.id not in fused:
                continue
            if member.category is DRAW:
                names = [externals.setdefault(f"p{k}", f"x{len(externals)}") for k in range(len(member.domain))]
            else:
                names = []
                for edge in member.inputs:
                    producer = graph.nodes[edge.producer]
                    if edge.producer in fused and identity_read(edge, member, producer):
                        names.append(local_name[edge.producer])
                        continue
                    if producer.category is CONST and edge.producer in inside and identity_read(edge, member, producer):
                        names.append(constants.setdefault(edge.producer, f"k{len(constants)}"))
                        continue
                    if edge.producer in inside and identity_read(edge, member, producer):
                        expression = f"v{edge.producer}_{edge.output}"
                    else:
                        expression = f"load({self._key_source(edge, member)})[{edge.output}]"
                    names.append(externals.setdefault(expression, f"x{len(externals)}"))
            local_name[member.id] = f"y{len(steps)}"
            steps.append((member, names))
        read_outside = self._read_outside(group, members, fused)
        results = [member for member, _ in steps if member.id in read_outside]
        try:
            key = ("fused", len(externals), tuple((signature(m, self.ns["SEED"]), tuple(names)) for m, names in steps),
                   tuple(local_name[m.id] for m in results),
                   tuple((name, signature(graph.nodes[n], self.ns["SEED"])) for n, name in constants.items()))
        except Unhashable:
            key = None

        checks = [member for member, _ in steps if checked(member)]

        def build() -> Callable:
            kernels = [self._kernel(member) for member, _ in steps]
            namespace = {f"K{k}": kernel for k, kernel in enumerate(kernels)}
            lines = [f"def fused({', '.join(externals.values())}):"]
            for n, name in constants.items():
                namespace[f"{name}_value"] = np.asarray(graph.nodes[n].attrs["value"])
                lines.append(f"    {name} = asarray({name}_value)")
            namespace["asarray"] = self.backend.xp.asarray
            for k, (member, names) in enumerate(steps):
                lines.append(f"    y{k} = K{k}({', '.join(names)})")
                if checked(member):
                    namespace[f"M{k}"] = member
                    lines.append(f"    c{k} = find(M{k}, xp, ({', '.join(names)},))")
            values = f"({', '.join(local_name[m.id] for m in results)},)"
            if checks:
                namespace.update(find=find_violation, first=first_violation, xp=self.backend.xp)
                found = ", ".join(f"c{k}" for k, (member, _) in enumerate(steps) if checked(member))
                lines.append(f"    return {values}, first(xp, ({found},))")
            else:
                lines.append(f"    return {values}")
            exec(compile("\n".join(lines), f"<timerl jax group G{group.id}>", "exec"), namespace)  # noqa: S102
            return namespace["fused"]

        function = shared(key, build, self.backend.jit)
        # without arguments (constants and their functions only) the results are the same at every call: computed
        # at the first (in the program's session), kept (jax arrays are immutable)
        self.ns[f"F{group.id}"] = function if externals else _once(function)
        targets = "".join(f"v{m.id}_0, " for m in results) or "_"
        call = f"F{group.id}({', '.join(externals)})"
        if not checks:
            return [f"m = {steps[0][0].id}", f"{targets} = {call}"]
        self.ns[f"V{group.id}"] = checks
        self.ns.setdefault("raise_first", raise_first)
        targets = f"({targets})" if results else "_"
        return [f"m = {steps[0][0].id}", f"{targets}, found = {call}", f"raise_first(V{group.id}, found, point)"]

    def _read_outside(self, group, members: list[Node], fused: set[int]) -> set[int]:
        """Fused members whose values the group stores or whose readers are not fused."""
        outside = set(group.freed_later)
        for member in members:
            if member.id not in fused:
                outside.update(e.producer for e in member.inputs)
        return outside & fused


def _once(function: Callable[[], Any]) -> Callable[[], Any]:
    """``function()``'s result, computed at the first call and returned at every later one."""
    kept: list = []

    def call() -> Any:
        if not kept:
            kept.append(function())
        return kept[0]

    return call
