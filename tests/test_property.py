"""Random small RT programs against a direct NumPy evaluation of the same equations, built side by side.

Each generated value is a pair: the recurrent tensor, and a NumPy function of the point (``{"i": .., "t": ..}``)
computing the same value by plain loops and recursion. Programs chain elementwise ops, piecewise
recurrences forward and backward in time, range reads (``t:T``, ``0:t+1``, windows) reduced with ``sum``,
``mean`` or ``discounted_sum``, constant indices, reductions across iterations, and `ctx.when` branches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from conftest import assert_values, collect, run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import timerl as trl

SCALARS = [-1.5, -0.5, 0.25, 0.5, 0.9, 2.0]
DOMAINS = [(), ("t",), ("i",), ("i", "t")]


@dataclass
class Value:
    rt: trl.RecurrentTensor
    fn: Callable[[dict], np.ndarray]           # the same value in NumPy, at a point {"i": .., "t": ..}
    domain: tuple[str, ...]
    shape: tuple[int, ...]


def source_values(seed: int, shape: tuple[int, ...]):
    def make(point: dict) -> np.ndarray:
        generator = np.random.default_rng([seed, point.get("i", 0), point.get("t", 0)])
        return generator.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    return make


def memoized(fn, domain: tuple[str, ...]):
    """``fn`` seeing only the coordinates of ``domain`` (like the RT it mirrors), computed once per point."""
    cache: dict = {}

    def wrapper(point: dict) -> np.ndarray:
        key = tuple(point[d] for d in domain)
        if key not in cache:
            cache[key] = fn(dict(zip(domain, key)))
        return cache[key]
    return wrapper


class Builder:
    """Applies drawn steps to both the RT program and its NumPy twin."""

    def __init__(self, ctx, sizes: dict[str, int]) -> None:
        self.ctx = ctx
        self.dims = dict(zip(("i", "t"), ctx.dims))
        self.bounds = dict(zip(("i", "t"), ctx.bounds))
        self.sizes = sizes
        self.values: list[Value] = []

    def order(self, names) -> tuple[str, ...]:
        return tuple(d for d in ("i", "t") if d in names)

    def add(self, rt, fn, domain, shape) -> Value:
        domain = self.order(domain)
        value = Value(rt, memoized(fn, domain), domain, tuple(shape))
        assert tuple(rt.domain) == tuple(self.dims[d] for d in value.domain), (rt.domain, value.domain)
        assert tuple(rt.shape) == value.shape, (rt.shape, value.shape)
        self.values.append(value)
        return value

    def source(self, seed: int, domain: tuple[str, ...], shape: tuple[int, ...]) -> Value:
        make = source_values(seed, shape)
        rt = trl.source(lambda p: make(p), shape=shape, dtype="float32", domain=tuple(self.dims[d] for d in domain))
        return self.add(rt, make, domain, shape)

    # ---- steps --------------------------------------------------------------------------------------------
    def unary(self, x: Value, kind: str, c: float, d: float) -> Value:
        rt, f = {
            "tanh": (lambda r: r.tanh(), np.tanh),
            "sigmoid": (lambda r: r.sigmoid(), lambda a: (1 / (1 + np.exp(-a))).astype(np.float32)),
            "abs": (lambda r: r.abs(), np.abs),
            "relu": (lambda r: r.relu(), lambda a: np.maximum(a, np.float32(0))),
            "affine": (lambda r: r * c + d, lambda a: a * np.float32(c) + np.float32(d)),
            "clip": (lambda r: r.clip(-0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5)),
        }[kind]
        return self.add(rt(x.rt), lambda p: f(x.fn(p)), x.domain, x.shape)

    def binary(self, x: Value, y: Value, kind: str) -> Value:
        if x.shape != y.shape and x.shape and y.shape:
            y = self.reduce(y)
        rt, f = {
            "add": (lambda a, b: a + b, np.add),
            "sub": (lambda a, b: a - b, np.subtract),
            "mul": (lambda a, b: a * b, np.multiply),
            "where": (lambda a, b: trl.where(a > b, a, b), np.maximum),
        }[kind]
        shape = x.shape or y.shape
        return self.add(rt(x.rt, y.rt), lambda p: f(x.fn(p), y.fn(p)), set(x.domain) | set(y.domain), shape)

    def reduce(self, x: Value) -> Value:
        if not x.shape:
            return x
        return self.add(x.rt.sum(dim=0), lambda p: x.fn(p).sum(axis=0), x.domain, x.shape[1:])

    def key(self, x: Value, t_index):
        return tuple(t_index if d == "t" else self.dims[d] for d in x.domain)

    def forward(self, x: Value, c: float) -> Value:
        t = self.dims["t"]
        s = trl.placeholder(x.shape, "float32", domain=x.rt.domain)
        s[self.key(x, 0)] = x.rt[self.key(x, 0)]
        s[self.key(x, t + 1)] = s[self.key(x, t)] * c + x.rt[self.key(x, t + 1)]

        def fn(p):
            here = x.fn(p)
            return here if p["t"] == 0 else value.fn({**p, "t": p["t"] - 1}) * np.float32(c) + here
        value = self.add(s, fn, x.domain, x.shape)
        return value

    def backward(self, x: Value, c: float) -> Value:
        t, T = self.dims["t"], self.bounds["t"]
        g = trl.placeholder(x.shape, "float32", domain=x.rt.domain)
        g[self.key(x, T - 1)] = x.rt[self.key(x, T - 1)]
        g[self.key(x, t - 1)] = x.rt[self.key(x, t - 1)] + c * g[self.key(x, t)]

        def fn(p):
            here = x.fn(p)
            last = p["t"] == self.sizes["t"] - 1
            return here if last else here + np.float32(c) * value.fn({**p, "t": p["t"] + 1})
        value = self.add(g, fn, x.domain, x.shape)
        return value

    def next_difference(self, x: Value) -> Value:
        """o[t] = x[t+1] - x[t] under `when(t < T-1)`, o[T-1] = 0: a shifted read kept in bounds by a branch."""
        t, T = self.dims["t"], self.bounds["t"]
        o = trl.placeholder(x.shape, "float32", domain=x.rt.domain)
        with self.ctx.when(t < T - 1):
            o[self.key(x, t)] = x.rt[self.key(x, t + 1)] - x.rt[self.key(x, t)]
        o[self.key(x, T - 1)] = x.rt[self.key(x, T - 1)] * 0.0

        def fn(p):
            if p["t"] == self.sizes["t"] - 1:
                return x.fn(p) * np.float32(0)
            return x.fn({**p, "t": p["t"] + 1}) - x.fn(p)
        return self.add(o, fn, x.domain, x.shape)

    def window(self, x: Value, form: str, n: int, reducer: str, gamma: float) -> Value:
        t, T = self.dims["t"], self.bounds["t"]
        size = self.sizes["t"]
        rt_range, bounds_at = {
            "t:T": (slice(t, T), lambda k: (k, size)),
            "0:t+1": (slice(0, t + 1), lambda k: (0, k + 1)),
            "future": (slice(t, trl.min(t + n, T)), lambda k: (k, min(k + n, size))),
            "past": (slice(trl.max(0, t - n), t + 1), lambda k: (max(0, k - n), k + 1)),
            "0:T": (slice(0, T), lambda k: (0, size)),
        }[form]
        rows = x.rt[self.key(x, rt_range)]
        rt = {"sum": lambda r: r.sum(dim=0), "mean": lambda r: r.mean(dim=0),
              "discounted_sum": lambda r: r.discounted_sum(gamma)}[reducer](rows)

        def fn(p):
            start, stop = bounds_at(p.get("t", 0))
            stacked = np.stack([x.fn({**p, "t": j}) for j in range(start, stop)])
            if reducer == "sum":
                return stacked.sum(axis=0)
            if reducer == "mean":
                return stacked.mean(axis=0)
            return sum(np.float32(gamma) ** k * stacked[k] for k in range(len(stacked)))
        domain = [d for d in x.domain if d != "t" or form != "0:T"]
        return self.add(rt, fn, domain, x.shape)

    def constant_index(self, x: Value, dim: str, last: bool) -> Value:
        position = self.bounds[dim] - 1 if last else 0
        concrete = self.sizes[dim] - 1 if last else 0
        key = tuple(position if d == dim else self.dims[d] for d in x.domain)
        return self.add(x.rt[key] * 1.0, lambda p: x.fn({**p, dim: concrete}), set(x.domain) - {dim}, x.shape)

    def across_iterations(self, x: Value) -> Value:
        key = tuple(slice(0, self.bounds["i"]) if d == "i" else self.dims[d] for d in x.domain)
        return self.add(x.rt[key].sum(dim=0),
                        lambda p: sum(x.fn({**p, "i": k}) for k in range(self.sizes["i"])),
                        set(x.domain) - {"i"}, x.shape)


NEEDS = {  # step -> the dimensions its operand must vary over
    "unary": set(), "binary": set(), "reduce": set(), "forward": {"t"}, "backward": {"t"},
    "next_difference": {"t"}, "window": {"t"}, "constant_index": set(), "across_iterations": {"i"},
}


def build_program(data, builder: Builder) -> None:
    draw = data.draw
    for seed in range(draw(st.integers(1, 3), label="sources")):
        builder.source(seed, draw(st.sampled_from(DOMAINS)), draw(st.sampled_from([(), (2,), (3,)])))
    for _ in range(draw(st.integers(1, 6), label="steps")):
        kind = draw(st.sampled_from(sorted(NEEDS)), label="step")
        candidates = [v for v in builder.values
                      if NEEDS[kind] <= set(v.domain) and (v.domain or kind != "constant_index")]
        if not candidates:
            kind, candidates = "unary", builder.values
        x = candidates[draw(st.integers(0, len(candidates) - 1))]
        c = draw(st.sampled_from(SCALARS))
        if kind == "unary":
            builder.unary(x, draw(st.sampled_from(["tanh", "sigmoid", "abs", "relu", "affine", "clip"])), c,
                          draw(st.sampled_from(SCALARS)))
        elif kind == "binary":
            y = builder.values[draw(st.integers(0, len(builder.values) - 1))]
            builder.binary(x, y, draw(st.sampled_from(["add", "sub", "mul", "where"])))
        elif kind == "reduce":
            builder.reduce(x)
        elif kind == "forward":
            builder.forward(x, min(abs(c), 0.9))
        elif kind == "backward":
            builder.backward(x, min(abs(c), 0.9))
        elif kind == "next_difference":
            builder.next_difference(x)
        elif kind == "window":
            builder.window(x, draw(st.sampled_from(["t:T", "0:t+1", "future", "past", "0:T"])),
                           draw(st.integers(1, 3)), draw(st.sampled_from(["sum", "mean", "discounted_sum"])),
                           draw(st.sampled_from([0.5, 0.9, 0.99])))
        elif kind == "constant_index":
            builder.constant_index(x, draw(st.sampled_from(x.domain)), draw(st.booleans()))
        else:
            builder.across_iterations(x)


SETTINGS = {"deadline": None, "derandomize": True, "database": None,
            "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]}


@settings(max_examples=30, **SETTINGS)
@given(data=st.data())
def test_random_programs_match_numpy_reference(data):
    check_random_program(data, "reference")


@settings(max_examples=12, **SETTINGS)
@given(data=st.data())
def test_random_programs_match_numpy_compiled(compiled_backend, data):
    check_random_program(data, compiled_backend)


def check_random_program(data, backend: str) -> None:
    sizes = {"i": data.draw(st.integers(1, 3), label="I"), "t": data.draw(st.integers(1, 5), label="T")}
    ctx = trl.Context(dims="i t")
    builder = Builder(ctx, sizes)
    with ctx:
        build_program(data, builder)
        checked = builder.values[-2:]
        stores = [collect(v.rt) for v in checked]
    I, T = ctx.bounds
    run(ctx, {I: sizes["i"], T: sizes["t"]}, backend)
    for value, store in zip(checked, stores):
        grids = [range(sizes[d]) for d in value.domain]
        expected = {}
        for point in (np.ndindex(*[len(g) for g in grids]) if grids else [()]):
            named = dict(zip(value.domain, (int(c) for c in point)))
            expected[tuple(named.values())] = value.fn(named)
        assert_values(store, expected, rtol=1e-4, atol=1e-5)
