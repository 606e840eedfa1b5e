"""The loop program as one generated Python function (paper §5.4, and the compiled executor of issue 8).

The schedule's AST becomes plain Python: loops over integers, conditions as Python tests of the counters,
statements as direct calls of their group's generated function at a point written as a tuple expression,
consecutive deallocations as one `free_many` call (per call, not per point: the RT MMapGame frees ~55 points a
move). What has no plain-Python form is called as the closure the interpreter built for it: a loop that runs
vectorized (`timerl.runtime.batch`) and any other statement kind (offload, fetch).

    def program(counters):
        for c0 in range(0, 5):
            G5((c0,))
            for c1 in range(0, 200):
                G12((c0, c1))
                if c1 == 0:
                    free_many([(15, (c0,)), (16, (c0,))])
                ...

The interpreter's closures stay the readable fallback (used when a device budget is set, where every statement
first clears the pool's pins) and the oracle the generated program is tested against.
"""

from __future__ import annotations

from typing import Any, Callable

from timerl.symbolic import Symbol
from timerl.runtime.statements import flatten, freed_parts
from timerl.sched import ast


class LoopProgram:
    """Generates ``program(counters)`` for a schedule; names it calls live in the executable's namespace."""

    def __init__(self, interpreter: Any, batched_loop: Callable) -> None:
        self.interpreter = interpreter
        self.executable = interpreter.executable
        self.batched_loop = batched_loop
        self.ns = self.executable.namespace
        self.lines: list[str] = []
        self.closures = 0

    def generate(self, root: ast.AstNode) -> Callable[[list], None]:
        for group_id, function in self.executable.group_functions.items():
            self.ns[f"G{group_id}"] = function
        self.lines = ["def program(counters):"]
        self._block(root, (), 1)
        source = "\n".join(self.lines)
        self.ns.setdefault("min", min)
        self.ns.setdefault("max", max)
        exec(compile(source, "<timerl program>", "exec"), self.ns)  # noqa: S102 (our own generated code)
        program = self.ns["program"]
        program.source = source
        return program

    # ---- one node ---------------------------------------------------------------------------------------------------
    def _block(self, node: ast.AstNode, scope: tuple[Symbol, ...], depth: int) -> None:
        """The body of a def, loop or branch: a `pass` where it has nothing to do."""
        before = len(self.lines)
        self._emit(node, scope, depth)
        if len(self.lines) == before:
            self.lines.append("    " * depth + "pass")

    def _emit(self, node: ast.AstNode, scope: tuple[Symbol, ...], depth: int) -> None:
        pad = "    " * depth
        if isinstance(node, ast.Sequence):
            frees: list[str] = []  # whole points freed by consecutive deallocations: one `free_many` call
            for child in node.body:
                if isinstance(child, ast.Deallocate):
                    frees.extend(self._freed_points(child, pad))
                    continue
                self._flush(frees, pad)
                self._emit(child, scope, depth)
            self._flush(frees, pad)
        elif isinstance(node, ast.Loop):
            vectorized = self.batched_loop(self.interpreter, node, scope)
            if vectorized is not None:
                statements = ", ".join(f"G{leaf.node}" if isinstance(leaf, ast.Execute) else f"free G{leaf.node}"
                                       for _, leaf in flatten(node.body))
                comment = getattr(vectorized, "comment", None) or (  # a hook's own description (jax: a scan)
                    f"vectorized over {node.var.python()} in range({node.start.python()}, {node.stop.python()}, "
                    f"{node.step}), statement by statement: {statements}")
                self.lines.append(f"{pad}# {comment}")
                self.lines.append(f"{pad}{self._closure(vectorized)}([{self._counters(scope)}])")
                return
            var = node.var.python()
            self.lines.append(f"{pad}for {var} in range({node.start.python()}, {node.stop.python()}, {node.step}):")
            self._block(node.body, scope + (node.var,), depth + 1)
        elif isinstance(node, ast.If):
            self.lines.append(f"{pad}if {node.cond.python()}:")
            self._block(node.then, scope, depth + 1)
            if node.orelse is not None:
                self.lines.append(f"{pad}else:")
                self._block(node.orelse, scope, depth + 1)
        elif isinstance(node, ast.Execute):
            self.lines.append(f"{pad}G{node.node}({_point(node.point)})")
        elif isinstance(node, ast.Deallocate):
            self._flush(self._freed_points(node, pad), pad)
        else:  # statements with no plain-Python form: the interpreter's closure
            run = self.interpreter.build(node, scope)
            self.lines.append(f"{pad}{self._closure(run)}([{self._counters(scope)}])")

    def _freed_points(self, node: ast.Deallocate, pad: str) -> list[str]:
        """The keys a deallocation frees whole, as expressions; what frees only some outputs of a point is
        emitted as its own `free_outputs` call now (frees of distinct points commute)."""
        point = _point(node.point)
        if node.parts is None:
            return [f"({member}, {point})" for member in self.executable.groups[node.node].freed_later]
        keys = []
        for member, outputs, count in freed_parts(node, self.executable.graph):
            if count == 1:  # its one output: the point goes
                keys.append(f"({member}, {point})")
            else:
                self.lines.append(f"{pad}free_outputs(({member}, {point}), {outputs}, {count})")
        return keys

    def _flush(self, keys: list[str], pad: str) -> None:
        if keys:
            self.lines.append(f"{pad}free_many([{', '.join(keys)}])")
            keys.clear()

    def _closure(self, run: Callable[[list], None]) -> str:
        name = f"X{self.closures}"
        self.closures += 1
        self.ns[name] = run
        return name

    @staticmethod
    def _counters(scope: tuple[Symbol, ...]) -> str:
        return ", ".join(s.python() for s in scope)


def _point(point: tuple) -> str:
    items = [e.python() for e in point]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
