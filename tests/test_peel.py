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
    loop kept that loop point by point: 0 batched statements. With Monte Carlo returns as
    ``discounted_sum(until=ends)`` isl places the sink after the learning statement's first point, before the
    frees of the later points it reads: it moves before the loop, which runs batched with its returns scanned."""
    want, _ = _reinforce("reference")
    got, stats = _reinforce("torch")
    pointwise, pointwise_stats = _reinforce("torch", vectorize=False)
    assert got == want and pointwise == want
    assert pointwise_stats["batched_statements"] == 0
    assert stats["batched_statements"] >= 2  # the learning loop of each iteration but the last, batched
    assert stats["window_scans"] >= 2  # its returns one reverse scan per iteration, no padded windows
    assert stats["padded_chunks"] == 0
    source = stats["executable"]._program.source
    learning = [line for line in source.splitlines() if "vectorized over c1" in line]
    assert learning and all("G" in line for line in learning)


def test_reinforce_returns_scan_on_jax():
    """The same on jax (whose draws differ from the reference's: its learning is tests/test_reinforce.py's)."""
    _, stats = _reinforce("jax")
    assert stats["batched_statements"] >= 2 and stats["window_scans"] >= 2 and stats["padded_chunks"] == 0


def _respects(original: list, peeled: list, reads: dict, host_calls: set) -> bool:
    """Whether ``peeled`` runs the instances of ``original`` in an order that keeps every dependence between
    two of them (by group, as `peel` sees them): a statement after the statements whose group it reads, a free
    after the statement that stored the freed group and after those reading it, a host call after an earlier
    host call. Frees may run later than before."""
    at = {instance: k for k, instance in enumerate(peeled)}
    if sorted(original) != sorted(peeled) or len(at) != len(peeled):
        return False
    for k, (kind_a, group_a, point_a) in enumerate(original):
        for kind_b, group_b, point_b in original[k + 1:]:
            if kind_a != "Execute":
                continue  # nothing waits for a free
            depends = ((kind_b == "Execute" and group_a in reads.get(group_b, ()))
                       or (kind_b == "Execute" and group_a in host_calls and group_b in host_calls)
                       or (kind_b == "Deallocate" and (group_b == group_a or group_b in reads.get(group_a, ()))))
            if depends and at[(kind_a, group_a, point_a)] > at[(kind_b, group_b, point_b)]:
                return False
    return True


def _learning_loop(start, stop) -> ast.AstNode:
    """for i: act (group 0); for t: learn[t] (group 1, reads 0), then at the first t only a logging sink
    (group 2, reads 0 and 5), the free of the action's first point and, at i == 2, a loop of frees of group 5;
    the frees of the later points of group 0; at the last t a summary (group 3, reads 0), then learn's free."""
    first = ast.If(t == start, ast.Sequence((
        ast.Execute(2, (i,)),
        ast.Deallocate(0, (i, const(0))),
        ast.If(i == 2, ast.Loop(f, const(0), stop - start, 1, ast.Deallocate(5, (i, f)))))))
    later = ast.If(t >= start + 1, ast.Deallocate(0, (i, t - start)))
    last = ast.If(t == stop - 1, ast.Execute(3, (i,)))
    body = ast.Sequence((ast.Execute(1, (i, t - start)), first, later, last, ast.Deallocate(1, (i, t - start))))
    return ast.Loop(i, const(0), const(3), 1, ast.Sequence((
        ast.Execute(0, (i,)), ast.Execute(5, (i,)), ast.Loop(t, start, stop, 1, body))))


@pytest.mark.parametrize("start, stop", [(const(4), const(9)), (N, N * 2)])
@pytest.mark.parametrize("case", ["sink", "sink reads learning", "learning reads 5 at i <= 1",
                                  "learning reads 5"])
def test_pinned_parts_inside_a_body_move_out_where_the_dependences_allow(start, stop, case):
    """A first-iteration part after other statements moves before the loop (a free those statements still
    need stays in it; a loop of frees they need follows the loop), a last-iteration part before others moves
    after it; a part reading what the loop writes stays. Every dependence keeps its order (`_respects`)."""
    reads = {1: {0}, 2: {0, 5}, 3: {0}}
    if case == "sink reads learning":
        reads[2] = {0, 1, 5}
    original = _learning_loop(start, stop)
    if case == "learning reads 5 at i <= 1":  # the loop of frees at i == 2 passes no read of group 5
        reads[1] = {0}
        original = ast.Loop(i, const(0), const(3), 1, ast.Sequence(original.body.body[:2] + (ast.Loop(
            t, start, stop, 1, ast.Sequence((ast.If(i <= 1, ast.Execute(6, (i, t - start))),)
                                              + original.body.body[2].body.body)),)))
        reads[6] = {5}
    elif case == "learning reads 5":
        reads[1] = {0, 5}
    peeled = peel(original, reads, {2})
    for n in (0, 1, 3):
        assert _respects(_trace(original, {N: n}, []), _trace(peeled, {N: n}, []), reads, {2})
    (inner,) = [node for node in ast.every_node(peeled) if isinstance(node, ast.Loop) and node.var is t]
    inside = {node.node for node in ast.every_node(inner.body) if isinstance(node, ast.Execute)}
    frees = [node for node in ast.every_node(inner.body) if isinstance(node, ast.Deallocate)]
    if case == "sink reads learning":
        assert 2 in inside  # it reads learn[first t]: it stays after it
        return
    assert 2 not in inside and 3 not in inside
    assert any(node.node == 0 and node.point[1].constant_value() == 0 for node in frees)  # learn[first t] reads it
    assert not any(isinstance(node, ast.Loop) for node in ast.every_node(inner.body))  # (the frees of group 5
    # went before the loop, or, where learning reads group 5, after it; the outer loop's own peeling moves them
    # after it, at its last iteration: a free may always run later)
