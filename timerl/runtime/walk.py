"""The loop program as closures: the part of an AST interpreter every walker of the schedule shares.

`AstInterpreter.build` turns each node into a closure over the loop counters (a list, innermost last), with one
method per node kind (torch.fx's interpreter pattern). Sequences, loops and conditionals are the same for every
walker; subclasses say what a statement does (`_execute`, `_deallocate`, ...): the executor runs it, the dry
run of `timerl.runtime.dryrun` counts its bytes.
"""

from __future__ import annotations

from typing import Callable

from timerl.symbolic import Symbol, compile_function
from timerl.sched import ast

Run = Callable[[list], None]


class AstInterpreter:
    def build(self, node: ast.AstNode, scope: tuple[Symbol, ...]) -> Run:
        return getattr(self, f"_{type(node).__name__.lower()}")(node, scope)

    def _sequence(self, node: ast.Sequence, scope) -> Run:
        parts = [self.build(child, scope) for child in node.body]

        def run(counters: list) -> None:
            for part in parts:
                part(counters)

        return run

    def _loop(self, node: ast.Loop, scope) -> Run:
        limits = compile_function((node.start, node.stop), scope)
        body = self.build(node.body, scope + (node.var,))
        step = node.step

        def run(counters: list) -> None:
            start, stop = limits(*counters)
            for value in range(start, stop, step):
                counters.append(value)
                body(counters)
                counters.pop()

        return run

    def _if(self, node: ast.If, scope) -> Run:
        test = compile_function((node.cond,), scope)
        then = self.build(node.then, scope)
        orelse = self.build(node.orelse, scope) if node.orelse is not None else None

        def run(counters: list) -> None:
            if test(*counters)[0]:
                then(counters)
            elif orelse is not None:
                orelse(counters)

        return run
