"""isl writes a statement's point as a select (``c ? a : b``) when one loop runs two pieces of its domain, as
PPO's ``(i, e, m)`` updates do (an epoch's last minibatch is followed by the next epoch's first). The
conversion to our AST must run exactly the points isl's own program runs, in the same order."""

from __future__ import annotations

import islpy as isl
import pytest

from timerl.symbolic import Symbol
from timerl.sched import ast
from timerl.sched.schedule import _convert

FREED = 7  # the group the test statement ``F0`` frees


def run_points(node, env: dict) -> list[tuple[int, ...]]:
    """Interpret our AST: the points ``Deallocate`` runs at, in order."""
    if isinstance(node, ast.Sequence):
        return [p for child in node.body for p in run_points(child, env)]
    if isinstance(node, ast.Loop):
        points = []
        for value in range(node.start.evaluate(env), node.stop.evaluate(env), node.step):
            points += run_points(node.body, {**env, node.var: value})
        return points
    if isinstance(node, ast.If):
        branch = node.then if node.cond.evaluate(env) else node.orelse
        return [] if branch is None else run_points(branch, env)
    assert isinstance(node, ast.Deallocate) and node.node == FREED
    return [tuple(e.evaluate(env) for e in node.point)]


def isl_points(schedule: str, params: dict) -> list[tuple[int, ...]]:
    """The points of the schedule's domain in schedule order (the schedules here are injective), by isl."""
    relation = isl.Map(schedule)
    for name, value in params.items():
        position = relation.get_space().find_dim_by_name(isl.dim_type.param, name)
        relation = relation.fix_val(isl.dim_type.param, position, isl.Val.int_from_si(relation.get_ctx(), value))
    arity = relation.dim(isl.dim_type.in_)
    rows: list[tuple[tuple[int, ...], tuple[int, ...]]] = []

    def visit(point: isl.Point) -> None:
        values = tuple(point.get_coordinate_val(isl.dim_type.set, k).to_python()
                       for k in range(point.get_space().dim(isl.dim_type.set)))
        rows.append((values[arity:], values[:arity]))

    relation.wrap().foreach_point(visit)
    return [point for _time, point in sorted(rows)]


CASES = [
    # one loop, both coordinates piecewise in it
    ("{ F0[a, b] -> [a + b] : 0 <= a < 3 and 0 <= b <= 1 and (b = 0 or a = 2) }", "{ : }", [{}]),
    # the PPO shape: the freed point depends on the reader's point (parameters) piecewise
    ("[q, p] -> { F0[a, b] -> [a] : 0 <= a < 6 and ((q = 0 and p = 1 and b = a) or ((q > 0 or p != 1) and "
     "b = a + q - 1)) }", "[q, p] -> { : 0 <= q <= 3 and 0 <= p <= 3 }",
     [{"q": q, "p": p} for q in range(4) for p in range(4)]),
]


@pytest.mark.parametrize("schedule, context, parameter_values", CASES, ids=["loop", "reader-parameters"])
def test_select_points_convert_to_guarded_statements(schedule, context, parameter_values):
    context_set = isl.Set(context)
    atomic = isl.UnionMap(f"{context.split('{')[0]} {{ [c0] -> atomic[x] }}")  # one loop, as schedule.py asks
    build = isl.AstBuild.from_context(context_set).set_options(atomic)
    program = build.node_from_schedule_map(isl.UnionMap(schedule))
    assert "?" in program.to_C_str(), "isl no longer writes a select here: the test would not test it"
    names = [context_set.get_dim_name(isl.dim_type.param, k) for k in range(context_set.dim(isl.dim_type.param))]
    symbols = {name: Symbol(name) for name in names}
    ours = _convert(program, symbols, {}, ((FREED, None),))  # (group, parts): all of its outputs
    for values in parameter_values:
        env = {symbols[name]: value for name, value in values.items()}
        assert run_points(ours, env) == isl_points(schedule, values), values
