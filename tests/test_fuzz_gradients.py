"""Differential gradient fuzzer: random programs mixing access patterns, against torch.autograd on an eager twin.

A program reads requires-grad tensors over ``(t,)`` or ``(i, t)`` through every kind of read SPEC.md lists
(the point itself, a shift, a constant point such as ``T-1`` or ``0``, prefix / suffix / sliding windows,
a range over ``i``) and through recurrences whose first value depends on them, combines the reads, and
calls ``backward()`` on a sum of several of its tensors. The twin computes the same values point by point
with PyTorch; ``x.grad`` must equal ``torch.autograd``'s on every backend. ``TIMERL_FUZZ_EXAMPLES=N`` runs N
programs instead of the small budget of ``make test``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from conftest import assert_values, collect, run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import timerl as trl

EXAMPLES = int(os.environ.get("TIMERL_FUZZ_EXAMPLES", "10"))
WIDTH = 2
I_SIZE = 2

operand = st.integers(0, 7)
READS = ["here", "previous", "first", "last", "prefix", "suffix", "sliding", "ahead", "over_i", "last_i"]
STEPS = st.one_of(
    st.tuples(st.just("unary"), st.sampled_from(["tanh", "sigmoid", "square", "scale"]), operand),
    st.tuples(st.just("binary"), st.sampled_from(["add", "mul", "sub"]), operand, operand),
    st.tuples(st.just("read"), st.sampled_from(READS), operand, operand),
    st.tuples(st.just("recurrence"), operand, operand, st.sampled_from([0.5, -0.8])),
    st.tuples(st.just("parameter"), operand),
)
PROGRAMS = st.fixed_dictionaries({
    "dims": st.sampled_from(["t", "i t"]),
    "steps": st.integers(1, 4),
    "leaves": st.integers(1, 2),
    "recipe": st.lists(STEPS, min_size=2, max_size=6),
    "objective": st.lists(operand, min_size=1, max_size=3),
})


class Twin:
    """The tensors of one program twice: as RTs, and as PyTorch values at every point (a dict point -> tensor)."""

    def __init__(self, ctx: trl.Context, steps: int, seed: int) -> None:
        self.ctx, self.steps, self.rng = ctx, steps, np.random.default_rng(seed)
        self.two_d = len(ctx.dims) == 2
        self.points = [(i, k) for i in range(I_SIZE) for k in range(steps)] if self.two_d else [(k,) for k in
                                                                                               range(steps)]
        self.rts: list = []
        self.values: list[dict] = []
        self.leaves: list[tuple] = []  # (rt, torch tensor indexed like a point, point -> torch index)

    # ---- leaves: a placeholder over the whole domain, and a plain parameter read everywhere ----

    def leaf(self) -> None:
        data = torch.tensor(self.rng.normal(size=(*(I_SIZE,) * self.two_d, self.steps, WIDTH)), requires_grad=True)
        array = data.detach().numpy()
        x = trl.placeholder((WIDTH,), "float64", domain=self.ctx.dims, requires_grad=True)
        x[self.ctx.dims] = trl.source(lambda p: array[tuple(p.values())], (WIDTH,), "float64", self.ctx.dims)
        self.add(x, {p: data[p] for p in self.points})
        self.leaves.append((x, data))

    def parameter(self) -> None:
        data = torch.tensor(self.rng.normal(size=(WIDTH,)), requires_grad=True)
        w = trl.tensor(data.detach().numpy(), "float64", requires_grad=True)
        self.add(w, {p: data for p in self.points})
        self.leaves.append((w, data))

    def add(self, rt, values: dict) -> None:
        self.rts.append(rt)
        self.values.append(values)

    # ---- steps ----

    def step(self, step: tuple) -> None:
        kind, args = step[0], step[1:]
        if kind == "parameter":
            self.parameter()
            return
        pick = lambda k: (self.rts[k % len(self.rts)], self.values[k % len(self.values)])  # noqa: E731
        if kind == "unary":
            (x, vx) = pick(args[1])
            fn = {"tanh": torch.tanh, "sigmoid": torch.sigmoid, "square": lambda v: v * v,
                  "scale": lambda v: v * -0.7}[args[0]]
            rt = {"tanh": lambda: x.tanh(), "sigmoid": lambda: x.sigmoid(), "square": lambda: x * x,
                  "scale": lambda: x * -0.7}[args[0]]()
            self.add(rt, {p: fn(vx[p]) for p in self.points})
        elif kind == "binary":
            (x, vx), (y, vy) = pick(args[1]), pick(args[2])
            op = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub": lambda a, b: a - b}[args[0]]
            self.add(op(x, y), {p: op(vx[p], vy[p]) for p in self.points})
        elif kind == "read":
            self.read(args[0], *pick(args[1]), *pick(args[2]))
        else:
            self.recurrence(*pick(args[0]), *pick(args[1]), args[2])

    def _over_domain(self, x):
        """``x`` over the whole domain: a parameter (no domain) becomes a tensor of every point."""
        if len(x.domain) == len(self.ctx.dims):
            return x
        return x + trl.zeros((WIDTH,), "float64", domain=self.ctx.dims)

    def read(self, how: str, x, vx: dict, other, v_other: dict) -> None:
        """``x`` read at another point or through a window, plus ``other`` read here: two access patterns of
        possibly one tensor in one expression."""
        x = self._over_domain(x)
        t, T = self.ctx.dims[-1], self.ctx.bounds[-1]
        last = self.steps - 1

        def key(item):  # an index of x's domain: ``item`` for t, i itself
            return (self.ctx.dims[0], item) if self.two_d else (item,)

        def at(p, k):
            return vx[p[:-1] + (k,)]

        if how in ("over_i", "last_i") and not self.two_d:
            how = "last"
        if how == "here":
            rt, fn = x, lambda p: vx[p]
        elif how == "previous":
            rt = x[key(trl.max(t - 1, 0))]
            fn = lambda p: at(p, max(p[-1] - 1, 0))  # noqa: E731
        elif how == "ahead":
            rt = x[key(trl.min(t + 1, T - 1))]
            fn = lambda p: at(p, min(p[-1] + 1, last))  # noqa: E731
        elif how == "first":
            rt, fn = x[key(0)], lambda p: at(p, 0)
        elif how == "last":
            rt, fn = x[key(T - 1)], lambda p: at(p, last)
        elif how == "prefix":
            rt = x[key(slice(0, t + 1))].sum(0)
            fn = lambda p: sum(at(p, k) for k in range(p[-1] + 1))  # noqa: E731
        elif how == "suffix":
            rt = x[key(slice(t, T))].tanh().mean(0)
            fn = lambda p: torch.stack([at(p, k) for k in range(p[-1], self.steps)]).tanh().mean(0)  # noqa: E731
        elif how == "sliding":
            rt = x[key(slice(trl.max(0, t - 1), t + 1))].max(0)
            fn = lambda p: torch.stack([at(p, k) for k in range(max(0, p[-1] - 1), p[-1] + 1)]).max(0).values  # noqa
        elif how == "over_i":
            rt = x[0:self.ctx.bounds[0], t].sum(0)
            fn = lambda p: sum(vx[(i, p[-1])] for i in range(I_SIZE))  # noqa: E731
        else:
            rt = x[self.ctx.bounds[0] - 1, t]
            fn = lambda p: vx[(I_SIZE - 1, p[-1])]  # noqa: E731
        self.add(rt + other * 0.5, {p: fn(p) + v_other[p] * 0.5 for p in self.points})

    def recurrence(self, start, v_start: dict, drive, v_drive: dict, decay: float) -> None:
        """``s[.., 0] = tanh(start)``, ``s[.., t+1] = tanh(s[.., t] * decay + drive[.., t+1])``."""
        start, drive = self._over_domain(start), self._over_domain(drive)
        dims = self.ctx.dims
        t = dims[-1]

        def key(item):
            return (dims[0], item) if self.two_d else (item,)

        s = trl.placeholder((WIDTH,), "float64", domain=dims)
        s[key(0)] = start[key(0)].tanh()
        s[key(t + 1)] = (s[key(t)] * decay + drive[key(t + 1)]).tanh()
        values: dict = {}
        for p in self.points:
            before = p[:-1] + (p[-1] - 1,)
            values[p] = torch.tanh(v_start[p]) if p[-1] == 0 else torch.tanh(values[before] * decay + v_drive[p])
        self.add(s, values)


def _check(program: dict, backends=("reference", "torch", "jax")) -> None:
    ctx = trl.Context(dims=program["dims"])
    twin = Twin(ctx, program["steps"], seed=len(program["recipe"]))
    with ctx:
        for _ in range(program["leaves"]):
            twin.leaf()
        for step in program["recipe"]:
            twin.step(step)
        chosen = sorted({k % len(twin.rts) for k in program["objective"]})
        objective = None
        for k in chosen:
            term = twin._over_domain(twin.rts[k]).tanh()
            objective = term if objective is None else objective + term
        objective.backward()
        stores = [collect(rt.grad) for rt, _ in twin.leaves]
    total = sum(torch.tanh(twin.values[k][p]).sum() for k in chosen for p in twin.points)
    tensors = [data for _, data in twin.leaves]
    expected = torch.autograd.grad(total, tensors, allow_unused=True)
    bounds = {ctx.bounds[-1]: program["steps"]}
    if len(ctx.dims) == 2:
        bounds[ctx.bounds[0]] = I_SIZE
    for backend in backends:
        run(ctx, bounds, backend)
        for store, (rt, data), grad in zip(stores, twin.leaves, expected):
            grad = torch.zeros_like(data) if grad is None else grad
            want = {p: grad[p].numpy() for p in twin.points} if rt.domain else {(): grad.numpy()}
            assert_values(store, want, rtol=1e-7, atol=1e-9)


# ---- the shapes that failed before, by hand ----

@pytest.mark.parametrize("dims", ["t", "i t"])
def test_window_and_point_read_of_one_tensor(dims):
    """The bootstrapped-return shape ``v[0:t+1].sum(0) + v[T-1]``, alone and with every other read."""
    for how in READS:
        _check({"dims": dims, "steps": 4, "leaves": 1, "recipe": [("read", "prefix", 0, 0), ("read", how, 0, 0)],
                "objective": [1, 2]}, backends=("reference",))
    _check({"dims": dims, "steps": 4, "leaves": 1, "recipe": [("read", "prefix", 0, 0), ("read", "last", 0, 1),
                                                            ("read", "first", 1, 0), ("read", "suffix", 2, 1)],
            "objective": [1, 4]})


@pytest.mark.parametrize("dims", ["t", "i t"])
def test_recurrence_started_from_parameters(dims):
    """``s[.., 0] = f(w)``, ``s[.., t+1] = g(s[.., t])``: a GRU-like state whose first value depends on a
    parameter read everywhere, over the last dimension of a 1-D or 2-D context."""
    _check({"dims": dims, "steps": 3, "leaves": 1, "recipe": [("parameter", 0), ("recurrence", 1, 0, 0.5),
                                                            ("read", "suffix", 2, 1), ("binary", "mul", 2, 3)],
            "objective": [4, 2]})


@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize="TIMERL_FUZZ_EXAMPLES" not in os.environ,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(PROGRAMS)
def test_gradients_of_random_programs_match_torch(program):
    _check(program)


def test_gru_over_iterations_and_steps(backend):
    """A GRU state over ``(i, t)`` whose first value depends on a parameter (``h[i, 0] = tanh([0, x] @ U)``),
    a log-softmax policy of every state weighted by ``t + 1``: every weight's gradient against torch.autograd."""
    hidden, features, steps, iterations = 3, 2, 4, 2
    rng = np.random.default_rng(0)
    weights = [rng.normal(size=(hidden + features, hidden)) * 0.5 for _ in range(4)]  # z, r, candidate, start
    obs = rng.normal(size=(iterations, steps, features))
    ctx = trl.Context(dims="i t")
    (i, t), (I, T) = ctx.dims, ctx.bounds
    with ctx:
        wz, wr, wh, u = params = [trl.tensor(w, "float64", requires_grad=True) for w in weights]
        x = trl.source(lambda p: obs[p["i"], p["t"]], (features,), "float64", (i, t))
        h = trl.placeholder((hidden,), "float64", domain=(i, t))
        h[i, 0] = (trl.cat([trl.zeros((hidden,), "float64"), x[i, 0]]) @ u).tanh()
        both = trl.cat([h[i, t], x[i, t + 1]])
        z, r = (both @ wz).sigmoid(), (both @ wr).sigmoid()
        candidate = (trl.cat([h[i, t] * r, x[i, t + 1]]) @ wh).tanh()
        h[i, t + 1] = (1 - z) * h[i, t] + z * candidate
        (h.log_softmax(-1).sum() * (t + 1)).backward()
        stores = [collect(p.grad) for p in params]
    run(ctx, {I: iterations, T: steps}, backend)

    tensors = [torch.tensor(w, requires_grad=True) for w in weights]
    wz, wr, wh, u = tensors
    total = 0.0
    for k in range(iterations):
        o = torch.tensor(obs[k])
        state = torch.tanh(torch.cat([torch.zeros(hidden, dtype=torch.float64), o[0]]) @ u)
        total = total + torch.log_softmax(state, -1).sum()
        for s in range(1, steps):
            both = torch.cat([state, o[s]])
            z, r = torch.sigmoid(both @ wz), torch.sigmoid(both @ wr)
            state = (1 - z) * state + z * torch.tanh(torch.cat([state * r, o[s]]) @ wh)
            total = total + torch.log_softmax(state, -1).sum() * (s + 1)
    total.backward()
    for store, tensor in zip(stores, tensors):
        assert_values(store, {(): tensor.grad.numpy()}, rtol=1e-9, atol=1e-12)
