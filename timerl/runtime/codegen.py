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
        self.vectorized: dict[int, Any] = {}  # id of a loop -> its vectorized run, or None

    def generate(self, root: ast.AstNode) -> Callable[[list], None]:
        for group_id, function in self.executable.group_functions.items():
            self.ns[f"G{group_id}"] = function
        self.lines = ["def program(counters):"]
        outer = _outer_loop(root)
        if outer is None or self._vectorized(outer, ()) is not None:
            self._block(root, (), 1)
            span = None
        else:
            span = self._chunked(root, outer)
        source = "\n".join(self.lines)
        self.ns.setdefault("min", min)
        self.ns.setdefault("max", max)
        exec(compile(source, "<timerl program>", "exec"), self.ns)  # noqa: S102 (our own generated code)
        program = self.ns["program"]
        program.source, program.span = source, span
        return program

    def _chunked(self, root: ast.AstNode, outer: ast.Loop) -> tuple[int, int]:
        """The program with its outermost loop run from ``RUN[0]`` to ``RUN[1]`` (`timerl.runtime.runs`): what
        comes before the loop runs with the first iteration, what comes after with the last, and a sink's
        `trl.Stop` (``STOP[0]``) ends the run after the iteration it was raised in."""
        items = _top_level(root)
        at = items.index(outer)
        start, stop = outer.start.constant_value(), outer.stop.constant_value()
        self.lines.append(f"    if RUN[0] <= {start}:")
        self._block(ast.Sequence(tuple(items[:at])), (), 2)
        var = outer.var.python()
        self.lines.append(f"    for {var} in range(max({start}, RUN[0]), min({stop}, RUN[1])):")
        self._block(outer.body, (outer.var,), 2)
        self.lines.append(f"        RUN[0] = {var} + 1")
        self.lines.append("        if STOP[0]:")
        self.lines.append("            return")
        self.lines.append(f"    if RUN[0] >= {stop}:")
        self._block(ast.Sequence(tuple(items[at + 1:])), (), 2)
        return start, stop

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
            vectorized = self._vectorized(node, scope)
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

    def _vectorized(self, node: ast.Loop, scope: tuple[Symbol, ...]) -> Callable[[list], None] | None:
        """The loop's vectorized run (`batched_loop`), made once per loop."""
        if id(node) not in self.vectorized:
            self.vectorized[id(node)] = self.batched_loop(self.interpreter, node, scope)
        return self.vectorized[id(node)]

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


def _outer_loop(root: ast.AstNode) -> ast.Loop | None:
    """The program's one outermost loop (the iterations of a training program), with constant bounds and unit
    step, between statements that run once (deallocation loops among them); None where the schedule has
    another shape."""
    looping = [node for node in _top_level(root) if any(  # loops that only free run once at the end
        isinstance(n, ast.Loop) and any(isinstance(m, ast.Execute) for m in ast.every_node(n))
        for n in ast.every_node(node))]
    if len(looping) != 1 or not isinstance(looping[0], ast.Loop):
        return None
    loop = looping[0]
    if loop.step != 1 or loop.start.constant_value() is None or loop.stop.constant_value() is None:
        return None
    return loop


def _top_level(root: ast.AstNode) -> list[ast.AstNode]:
    """The statements of the program outside any loop or branch, nested sequences opened."""
    if not isinstance(root, ast.Sequence):
        return [root]
    return [item for child in root.body for item in _top_level(child)]


def _point(point: tuple) -> str:
    items = [e.python() for e in point]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
