"""Running a loop statement-major (`timerl.runtime.batch`): every statement of the body at all the loop's
points, batched where the statement allows it, point by point otherwise, in the same statement-major order."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from timerl.errors import TimeRLError
from timerl.runtime.batch import BatchedGroup
from timerl.runtime.explain import BATCHED, POINTS, dependence_reason, recurrence_of
from timerl.runtime.statements import backward_dependence, flatten, freed_parts
from timerl.runtime.windows import batch_refusal
from timerl.sched import ast
from timerl.symbolic import compile_function


class _BatchedFree:
    """A deallocation statement at every point of a loop: the freed members' points, one pool call each
    (``parts``: some outputs only, point by point)."""

    def __init__(self, executable: Any, members: Sequence[int], parts: tuple | None = None) -> None:
        self.executable = executable
        self.members = tuple(members)
        self.parts = parts

    def run(self, points: Sequence[tuple[int, ...]]) -> None:
        if self.parts is not None:
            free_outputs_many = self.executable.pool.free_outputs_many
            for member_id, outputs, count in self.parts:
                free_outputs_many([(member_id, point) for point in points], outputs, count)
            return
        free_many = self.executable.pool.free_many
        for member_id in self.members:
            free_many([(member_id, point) for point in points])


def batched_loop(interpreter: Any, node: ast.Loop, scope: tuple) -> Callable[[list], None] | None:
    """The loop run statement-major, with batched statements where possible; None when it must stay as is."""
    executable = interpreter.executable
    leaves = flatten(node.body)
    if not leaves:  # (a loop of deallocations only frees its points in one pool call per member)
        return None
    statements = [leaf.node for _, leaf in leaves if isinstance(leaf, ast.Execute)]

    def declined(reason: str, group: int | None = None, cycle: set[int] = frozenset()) -> None:
        for other in statements:
            why = (reason if other == group or group is None else
                   f"part of the recurrence of G{group}, where {reason}" if other in cycle else
                   f"in one loop with G{group} (not part of its recurrence; the loop was not distributed), "
                   f"where {reason}")
            executable.decisions.note(other, node.var, POINTS, why)

    if getattr(executable.backend, "vmap", None) is None or not executable.vectorize:
        declined("vectorize is off (vectorize=False, optimize=False or a device_memory budget)")
        return None
    backward = backward_dependence(leaves, *executable.dependences)
    if backward is not None:
        declined(dependence_reason(executable.graph, executable.groups, *backward, node.var), backward[0][1],
                 recurrence_of(backward[0][1], statements, executable.dependences[0]))
        return None
    inner = scope + (node.var,)
    limits = compile_function((node.start, node.stop), scope)
    step = node.step
    plans = []
    refused: tuple = ()  # the first statement that cannot batch, and why
    for conditions, leaf in leaves:
        test = compile_function(conditions, inner) if conditions else None
        run_one = interpreter.build(leaf, inner)
        batched = None
        if isinstance(leaf, ast.Execute):
            group = executable.groups[leaf.node]
            refusal = batch_refusal(executable.graph, group)
            if refusal is None:
                batched = (BatchedGroup(executable, group, executable.backend), compile_function(leaf.point, inner))
            elif not refused:
                refused = (refusal, leaf.node)
        elif isinstance(leaf, ast.Deallocate):
            parts = None if leaf.parts is None else freed_parts(leaf, executable.graph)
            batched = (_BatchedFree(executable, executable.groups[leaf.node].freed_later, parts),
                       compile_function(leaf.point, inner))
        plans.append((test, run_one, batched))
    if not all(plan[2] for (_, leaf), plan in zip(leaves, plans) if isinstance(leaf, ast.Execute)):
        # a statement left point by point would be separated from its consumers for the whole loop (isl put
        # them together to free memory early): keep the loop as it is
        declined(*refused)
        return None
    for group in statements:
        executable.decisions.note(group, node.var, BATCHED)

    def run(counters: list) -> None:
        start, stop = limits(*counters)
        values = range(start, stop, step)
        for test, run_one, batched in plans:
            selected = [v for v in values if test is None or all(test(*counters, v))]
            if batched is not None and len(selected) > 1:
                statement, where = batched
                points = [tuple(where(*counters, v)) for v in selected]
                try:
                    statement.run(points)
                    executable.batched_runs += isinstance(statement, BatchedGroup)
                    continue
                except TimeRLError:
                    raise
                except Exception as error:  # the array library cannot batch it: the points one by one
                    if isinstance(statement, BatchedGroup):
                        executable.decisions.fallbacks[statement.group.id] = f"{type(error).__name__}: {error}"
            for v in selected:
                counters.append(v)
                run_one(counters)
                counters.pop()

    return run
