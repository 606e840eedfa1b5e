"""Loop distribution around recurrences (`timerl.runtime.distribute`, compile switch ``distribute``): what a
rollout's recurrence does not need runs batched after it, with the reference's values, the environment still
stepped in order, and merges batched (`BatchedGroup._merge`)."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl
from timerl.runtime.distribute import distribute
from timerl.sched import ast
from timerl.symbolic import Symbol, const
from conftest import collect

NUM_ENVS, STEPS, ITERATIONS = 4, 12, 2


def rollout_program():
    """A CartPole rollout whose action depends on the observation (a recurrence through the environment), a
    value of each observation that nothing in the step needs, and a backward recurrence over the values (a
    placeholder with a boundary: merges)."""
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    env = trl.rl.make_env("CartPole-v1", num_envs=NUM_ENVS, seed=3)
    weights = np.linspace(-1.0, 1.0, 4 * 3, dtype=np.float32).reshape(4, 3)
    with ctx:
        o = trl.placeholder((NUM_ENVS, 4), domain=(i, t))
        o[i, 0] = env.reset(domain=(i,))
        action = (o.spatial[:, 2] + 0.3 * o.spatial[:, 3] > 0).astype("int64")
        o[i, t + 1], reward, done = env.step(action)
        value = (o @ trl.tensor(weights)).tanh().sum(-1)  # what the recurrence does not need
        not_done = 1.0 - done.astype("float32")
        following = trl.placeholder((NUM_ENVS,), domain=(i, t))
        following[i, T - 1] = value[i, T - 1] * 0.0
        following[i, t - 1] = value
        delta = reward + 0.9 * not_done * following - value
        ret = trl.placeholder((NUM_ENVS,), domain=(i, t))
        ret[i, T - 1] = delta[i, T - 1]
        ret[i, t - 1] = delta[i, t - 1] + 0.8 * not_done[i, t - 1] * ret[i, t]
        # read after the rollout (a sink at every step would keep the value in the step's statement)
        stores = [collect(x[i, 0:T]) for x in (value, delta, ret, o)]
    return ctx, {I: ITERATIONS, T: STEPS}, stores, env


def _run(backend: str, options: trl.CompileOptions | None = None):
    ctx, bounds, stores, env = rollout_program()
    exe = ctx.compile(bounds, backend=backend, **({} if options is None else {"options": options}))
    exe.execute()
    return exe, [dict(s) for s in stores], env


def test_distributed_rollout_matches_the_reference_and_batches_more():
    _, want, reference_env = _run("reference")
    distributed, got, env = _run("torch", trl.CompileOptions(distribute=True))
    plain, kept, _ = _run("torch", trl.CompileOptions(distribute=False))
    assert distributed.stats["batched_statements"] > plain.stats["batched_statements"]
    assert "vectorized over" in distributed._program.source
    for values in (got, kept):
        for store, expected in zip(values, want):
            assert sorted(store) == sorted(expected)
            for key, value in expected.items():
                np.testing.assert_allclose(store[key], value, rtol=1e-5, atol=1e-6, err_msg=str(key))
    assert [e.length for e in env.episodes] == [e.length for e in reference_env.episodes]


def test_memory_budget_and_jax_scan_keep_loops_as_they_are():
    options = trl.CompileOptions()
    assert options.distributes("torch") and not options.distributes("jax")
    assert trl.CompileOptions(scan_loops=False).distributes("jax")
    assert not trl.CompileOptions(vectorize=False).distributes("torch")
    assert not options.resolved(device_memory=10 ** 9).distribute


def _executed(node) -> list[int]:
    """The groups an AST executes, in program order."""
    if isinstance(node, ast.Execute):
        return [node.node]
    if isinstance(node, ast.Sequence):
        return [g for child in node.body for g in _executed(child)]
    if isinstance(node, ast.Loop):
        return _executed(node.body)
    if isinstance(node, ast.If):
        return _executed(node.then) + ([] if node.orelse is None else _executed(node.orelse))
    return []


def _loop_body_groups(node) -> list[list[int]]:
    """The groups each top-level loop of an AST executes, in order."""
    children = node.body if isinstance(node, ast.Sequence) else (node,)
    return [_executed(child) for child in children if isinstance(child, ast.Loop)]


def test_distribute_splits_by_strongly_connected_components():
    """Group 1 reads itself at the previous point (a recurrence), group 2 reads group 1, group 3 reads group 2
    and is read by group 1 at the next point (so it recurs with it), group 4 reads group 2 only. Groups 1 and
    3 stay one loop run point by point; 2 and 4 run after it, batched; group 2's deallocation follows its
    readers."""
    t = Symbol("t")
    body = ast.Sequence((ast.Execute(1, (t,)), ast.Execute(2, (t,)), ast.Execute(3, (t,)), ast.Execute(4, (t,)),
                         ast.Deallocate(2, (t,))))
    loop = ast.Loop(t, const(0), const(5), 1, body)
    reads = {1: {1, 3}, 2: {1}, 3: {2}, 4: {2}}
    readers = {1: {1, 2}, 2: {3, 4}, 3: {1}, 4: set()}
    distributed = distribute(loop, (reads, readers, {}), lambda group: True)
    assert _loop_body_groups(distributed) == [[1, 2, 3], [4]]  # 2 is in the cycle 1 -> 2 -> 3 -> 1
    reads[1] = {1}
    readers = {1: {1, 2}, 2: {3, 4}, 3: set(), 4: set()}
    distributed = distribute(loop, (reads, readers, {}), lambda group: True)
    assert _loop_body_groups(distributed) == [[1], [2, 3, 4]]
    last = distributed.body[-1].body.body
    assert isinstance(last[-1], ast.Deallocate) and last[-1].node == 2
    distributed = distribute(loop, (reads, readers, {}), lambda group: group != 2)  # 2 runs point by point
    assert _loop_body_groups(distributed) == [[1, 2], [3, 4]]
    last = distributed.body[-1].body.body
    assert isinstance(last[-1], ast.Deallocate) and last[-1].node == 2
    reads[2] = set()  # nothing recurs: the loop runs batched as it is
    assert distribute(loop, (reads | {1: set()}, readers, {}), lambda group: True) is loop


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_batched_merge_selects_each_points_input(backend):
    """A merge read by a vectorizable statement: its boundary point and its body points come from different
    inputs, joined in point order."""
    ctx = trl.Context("t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.full(3, p["t"], np.float32), (3,), "float32", (t,))
        shifted = trl.placeholder((3,), domain=(t,))
        shifted[T - 1] = trl.full((3,), -1.0)
        shifted[t - 1] = x * 2.0
        y = (shifted + 1.0).sum()
        store = collect(y)
    exe = ctx.compile({T: 6}, backend=backend)
    exe.execute()
    assert {k: float(v) for k, v in store.items()} == {
        (k,): (3 * (2.0 * (k + 1) + 1.0) if k < 5 else 0.0) for k in range(6)}


def test_host_calls_keep_their_order_across_iterations():
    """A sink may publish what a later iteration's source reads (MuZero's learner: the weights after step i - 1
    feed step i's self-play), so sources and sinks stay interleaved iteration by iteration, as isl ordered them,
    even where the sink alone could run batched after the loop."""
    events = []
    published = {"value": 0.0}
    ctx = trl.Context("i")
    (i,), (I,) = ctx.dims, ctx.bounds
    with ctx:
        w = trl.param(np.zeros(2, np.float32), domain=(i,))
        target = trl.source(lambda point: (events.append(("source", point["i"])),
                                           np.full(2, published["value"] + 1.0, np.float32))[1], (2,), "float32", (i,))
        ((w - target) * (w - target)).sum().backward()
        trl.optim.Adam([w], lr=0.1).step()
        with ctx.when(i >= 1):
            w.sink(lambda point, value: (events.append(("sink", point["i"])),
                                         published.__setitem__("value", float(np.asarray(value)[0]))))
    ctx.compile(bounds={I: 5}, backend="torch").execute()
    sources = [k for k, event in enumerate(events) if event[0] == "source"]
    sinks = {event[1]: k for k, event in enumerate(events) if event[0] == "sink"}
    # the source of iteration i runs after the sink of iteration i - 1 (which publishes w after i - 1 steps)
    for k in sources:
        i = events[k][1]
        if i >= 2:
            assert sinks[i - 1] < k, events


def test_only_coupled_host_calls_keep_their_order():
    """Group 1 recurs; groups 2 and 3 are sinks reading it. Two sinks have no ordering relation (neither takes a
    value from the host), so they run batched after the recurrence; a source among them (group 4, taking a value
    from the host after a sink may have published one) couples all three, which then stay in one loop point by
    point with the recurrence beside them, and the loop is left as it is."""
    t = Symbol("t")
    body = ast.Sequence(tuple(ast.Execute(g, (t,)) for g in (1, 2, 3, 4)))
    loop = ast.Loop(t, const(0), const(5), 1, body)
    reads = {1: {1}, 2: {1}, 3: {1}, 4: set()}
    readers = {1: {1, 2, 3}, 2: set(), 3: set(), 4: set()}
    sink, source = (True, False), (False, True)
    batchable = {1: True, 2: True, 3: True, 4: False}.get
    distributed = distribute(loop, (reads, readers, {}), batchable, {2: sink, 3: sink})
    assert _loop_body_groups(distributed) == [[1], [2, 3], [4]]  # 4 runs point by point, after the others
    assert distribute(loop, (reads, readers, {}), batchable, {2: sink, 3: sink, 4: source}) is loop


# the sinks' statements batch only with loops distributed, vectorized, and each fused with the op it sinks
BATCHES = trl.CompileOptions(vectorize=True, distribute=True, fusion=True)


def test_sinks_beside_a_recurrence_run_batched_with_their_values():
    """End to end: a recurrence with two sinks of values computed from its previous point (statements of their
    own) and no source: the sinks run batched after the recurrence (each called at every point, in point
    order), with the reference's values; while all host calls were kept in one component they ran point by
    point beside it (0 batched statements)."""
    def program():
        ctx = trl.Context("t")
        (t,), (T,) = ctx.dims, ctx.bounds
        with ctx:
            s = trl.placeholder((3,), domain=(t,))
            s[0] = trl.full((3,), 1.0)
            s[t + 1] = s[t] * 0.5 + 1.0
            with ctx.when(t >= 1):
                doubled, tripled = collect(s[t - 1] * 2.0), collect(s[t - 1] * 3.0)
        return ctx, T, (doubled, tripled)

    runs = {}
    for backend in ("reference", "torch"):
        ctx, T, stores = program()
        exe = ctx.compile({T: 16}, backend=backend, **({} if backend == "reference" else {"options": BATCHES}))
        exe.execute()
        runs[backend] = exe, [dict(store) for store in stores]
    for got, expected in zip(runs["torch"][1], runs["reference"][1]):
        assert list(got) == list(expected)  # every point, in point order
        for key in expected:
            np.testing.assert_allclose(np.asarray(got[key]), np.asarray(expected[key]), rtol=1e-6)
    assert runs["torch"][0].stats["batched_statements"] == 2
