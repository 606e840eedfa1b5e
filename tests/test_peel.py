"""Loop peeling (timerl.sched.peel): parts of a loop body that run at its first or last iteration only move out
of the loop with the same order of statement instances; with the `contributions` pass on, REINFORCE's learning
loop then runs statement by statement (batched) again, with the reference interpreter's results."""

from __future__ import annotations

import pytest

import timerl as trl
from algorithms import reinforce
from timerl.sched import ast
from timerl.sched.peel import peel
from timerl.symbolic import Symbol, const

i, t, f, N = Symbol("i"), Symbol("t"), Symbol("f"), Symbol("N")


def _trace(node: ast.AstNode, env: dict, out: list) -> list:
    """Every statement instance the AST runs, in order (an interpreter written for the test)."""
    if isinstance(node, ast.Sequence):
        for child in node.body:
            _trace(child, env, out)
    elif isinstance(node, ast.Loop):
        for value in range(node.start.evaluate(env), node.stop.evaluate(env), node.step):
            _trace(node.body, {**env, node.var: value}, out)
    elif isinstance(node, ast.If):
        if node.cond.evaluate(env):
            _trace(node.then, env, out)
        elif node.orelse is not None:
            _trace(node.orelse, env, out)
    else:
        out.append((type(node).__name__, node.node, tuple(e.evaluate(env) for e in node.point)))
    return out


def _program(start, stop) -> ast.AstNode:
    """for i: for t in start .. stop: [once at the first t: a statement and a loop of frees], the body,
    a branch whose else runs at the last t only, [once at the last t for i == 1]; a guarded statement in the
    middle stays."""
    head = ast.If((t == start) & (i >= 0), ast.Sequence((
        ast.Execute(7, (i,)),
        ast.Loop(f, const(0), stop - start, 1, ast.Deallocate(3, (i, f))))))
    middle = ast.If(t == start, ast.Execute(8, (i,)))
    tail = ast.If((i == 1) & (t == stop - 1), ast.Execute(9, (i, t)))
    branch = ast.If(t <= stop - 2, ast.Execute(10, (i, t)), ast.Sequence((  # else: the last t only
        ast.Execute(11, (i,)), ast.Loop(f, const(0), stop - start, 1, ast.Deallocate(3, (i, f))))))
    body = ast.Sequence((head, ast.Execute(1, (i, t - start)), middle, ast.Deallocate(1, (i, t - start)), branch,
                         tail))
    return ast.Loop(i, const(0), const(3), 1, ast.Loop(t, start, stop, 1, body))


@pytest.mark.parametrize("start, stop", [(const(4), const(9)), (N, N * 2), (N, const(3))])
def test_peeled_program_runs_the_same_instances_in_the_same_order(start, stop):
    original = _program(start, stop)
    peeled = peel(original)
    for n in (0, 1, 2, 3, 5):  # with symbolic bounds: loops that run, and loops that do not (N >= 3)
        assert _trace(peeled, {N: n}, []) == _trace(original, {N: n}, [])
    (inner,) = [node for node in ast.every_node(peeled) if isinstance(node, ast.Loop) and node.var is t]
    kept = [node for node in ast.every_node(inner.body) if isinstance(node, ast.Execute)]
    assert sorted(node.node for node in kept) == [1, 8, 10]  # the head, the tail and the else left
    assert not any(isinstance(node, ast.Loop) for node in ast.every_node(inner.body))


def _reinforce(backend: str, **options):
    stats: dict = {}
    curve = reinforce.train(iterations=3, num_envs=4, steps=8, backend=backend, seed=1, stats=stats,
                            compile_options={"options": trl.CompileOptions(contributions=True, **options)})
    return [(c["mean_length"], c["mean_return"]) for c in curve], stats


def test_reinforce_learning_loop_is_batched_with_contributions_on():
    """Before peeling, isl's placement of the logging sink (and the frees of its window) inside the learning
    loop kept that loop point by point: 0 batched statements."""
    want, _ = _reinforce("reference")
    got, stats = _reinforce("torch")
    pointwise, pointwise_stats = _reinforce("torch", vectorize=False)
    assert got == want and pointwise == want
    assert pointwise_stats["batched_statements"] == 0
    assert stats["batched_statements"] >= 2  # the learning loop of each iteration but the last, batched
    source = stats["executable"]._program.source
    learning = [line for line in source.splitlines() if "vectorized over c1" in line]
    assert learning and all("G" in line for line in learning)
