"""Differential fuzzer: small random RT programs, good and bad, on the reference, torch and jax.

A program is a list of steps drawn by hypothesis (so a failure prints, and shrinks to, a readable recipe).
Each step adds one tensor built from earlier ones; many steps are deliberately invalid: out-of-range data
indices, non-affine domain indices, bad domains, reads outside the domain, shape and dtype mismatches,
NaN and inf values, sources that raise (a UserCodeError), conditions on the point (``trl.where(t == 0, ..)``),
zero slice steps, reserved dimension names, and sinks that try to write into what they receive (gradients:
`test_fuzz_gradients.py`). Sources and conversions span the dtypes (bool, int8, uint8, int32, int64, float16,
float32, float64), and every arithmetic step's dtype must be torch's promotion of its operands (or refused
where torch refuses). Every backend must then give the same
values (NaN where the others have NaN) or raise the same `TimeRLError` subclass; nothing may escape as an
internal exception. ``TIMERL_FUZZ_EXAMPLES=N`` runs N programs instead of the small budget of ``make test``.
"""

from __future__ import annotations

import operator
import os

import numpy as np
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import timerl as trl
from timerl.rt import functional as F

EXAMPLES = int(os.environ.get("TIMERL_FUZZ_EXAMPLES", "40"))
BACKENDS = ("reference", "torch", "jax")
SHAPES = [(), (3,), (2, 3), (3, 1)]
SPECIALS = ["plain", "plain", "nan", "inf", "negative", "raises"]
SOURCE_DTYPES = ["float32", "float64", "int64", "float32", "int8", "uint8", "int32", "bool", "float16"]

operand = st.integers(0, 7)
small = st.integers(-2, 4)
STEPS = st.one_of(
    st.tuples(st.just("unary"), st.sampled_from(["exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu", "neg",
                                                "softmax", "log_softmax", "sign"]), operand),
    st.tuples(st.just("clip"), operand, st.sampled_from([(None, 1.0), (-0.5, 0.5), (1.0, -1.0)])),
    st.tuples(st.just("discount"), st.sampled_from(["discounted_sum", "discounted_cum_sum"]), operand,
              st.sampled_from([0.0, 0.9, 1.0])),
    st.tuples(st.just("binary"), st.sampled_from(["add", "sub", "mul", "div", "maximum", "pow", "lt", "eq",
                                                 "remainder", "floor_divide"]), operand, operand),
    st.tuples(st.just("scalar"), st.sampled_from(["add", "mul", "div", "pow", "sub"]), operand,
              st.sampled_from([0, 2, -1, 0.5, float("nan"), float("inf"), True])),
    st.tuples(st.just("where"), st.booleans(), operand, operand),
    st.tuples(st.just("symbolic_where"), st.sampled_from(["first", "last", "even", "inner"]), operand, operand),
    st.tuples(st.just("reduce"), st.sampled_from(["sum", "mean", "max", "argmax", "cumsum"]), operand, small),
    st.tuples(st.just("reshape"), operand, st.sampled_from([(-1,), (6,), (3, -1), (-1, 3), (1, -1), (4, -1)])),
    st.tuples(st.just("spatial"), operand, small, small, st.sampled_from([1, 2, -1, -2])),
    st.tuples(st.just("gather"), operand, st.lists(st.integers(-1, 3), min_size=1, max_size=3)),
    st.tuples(st.just("index_select"), operand, st.lists(st.integers(-1, 3), min_size=1, max_size=3)),
    st.tuples(st.just("one_hot"), operand, st.integers(1, 4)),
    st.tuples(st.just("shift"), operand, st.integers(-1, 1)),
    st.tuples(st.just("first_i"), operand),
    st.tuples(st.just("window"), operand, st.sampled_from(["prefix", "suffix", "last2"])),
    st.tuples(st.just("recurrence"), operand, st.sampled_from([0.5, -1.0])),
    st.tuples(st.just("astype"), operand, st.sampled_from(["float64", "int64", "bool", "float32", "int8", "uint8",
                                                          "int32", "float16"])),
    st.tuples(st.just("stack"), operand, operand),
    st.tuples(st.just("matmul"), operand, operand),
    st.tuples(st.just("invalid"), st.sampled_from(["non_affine", "bound_domain", "string_domain", "when_product",
                                                  "float_index", "bad_dim", "zero_step", "expand_new_minus_one",
                                                  "int_requires_grad", "reserved_dim"]), operand),
)
PROGRAMS = st.fixed_dictionaries({
    "dims": st.sampled_from(["t", "i t"]),
    "bound": st.sampled_from([1, 2, 3, 4, 0]),
    "sources": st.lists(st.tuples(st.sampled_from(SHAPES), st.sampled_from(SOURCE_DTYPES),
                                  st.sampled_from(SPECIALS), st.booleans()), min_size=1, max_size=3),
    "steps": st.lists(STEPS, min_size=1, max_size=5),
    "vandal": st.booleans(),
})


def _source_fn(number: int, shape: tuple, dtype: str, special: str):
    def fn(point: dict) -> np.ndarray:
        if special == "raises" and point["t"] == 1:
            raise RuntimeError(f"source {number} has no value at t=1")  # every backend: a UserCodeError
        values = np.random.RandomState(97 * number + 7 * point.get("i", 0) + point["t"]).uniform(-2.0, 3.0, shape)
        if special == "nan":
            values = np.where(values > 1.0, np.nan, values)
        elif special == "inf":
            values = np.where(values > 1.0, np.inf, values)
        elif special == "negative":
            values = -np.abs(values)
        if dtype.startswith("float"):
            return values.astype(dtype)
        if dtype == "bool":
            return values > 0.5
        low = 0 if dtype == "uint8" else -2
        return np.clip(np.nan_to_num(values, posinf=7, neginf=low).round(), low, 7).astype(dtype)

    return fn


def _step(step: tuple, tensors: list, ctx: trl.Context):
    """One step of a program: a new tensor from earlier ones (``operand % len(tensors)``)."""
    t, T = ctx.dims[-1], ctx.bounds[-1]
    kind, args = step[0], step[1:]

    def pick(k: int):
        return tensors[k % len(tensors)]

    if kind == "unary":
        return getattr(pick(args[1]), args[0])() if args[0] != "neg" else -pick(args[1])
    if kind in ("binary", "scalar"):
        x, y = pick(args[1]), pick(args[2]) if kind == "binary" else args[2]
        return _promoted_as_torch(BINARY[args[0]], x, y)
    if kind == "clip":
        return pick(args[0]).clip(*args[1])
    if kind == "discount":
        return getattr(pick(args[1]), args[0])(args[2])
    if kind == "where":
        x, y = pick(args[1]), pick(args[2])
        return trl.where(x > y if args[0] else x, x, y)
    if kind == "symbolic_where":  # a condition on the point, not on values
        x, y = pick(args[1]), pick(args[2])
        cond = {"first": t == 0, "last": t == T - 1, "even": t % 2 == 0, "inner": (t > 0) & (t < T - 1)}[args[0]]
        return trl.where(cond, x, y)
    if kind == "reduce":
        x = pick(args[1])
        return getattr(x, args[0])(dim=args[2]) if args[0] != "cumsum" else x.cumsum(args[2])
    if kind == "reshape":
        return pick(args[0]).reshape(args[1])
    if kind == "spatial":
        return pick(args[0]).spatial[args[1]:args[2]:args[3]]
    if kind in ("gather", "index_select"):
        x, index = pick(args[0]), trl.tensor(np.array(args[1]))
        if kind == "index_select":
            return x.index_select(0, index)
        return x.gather(0, index.reshape((-1,) + (1,) * (x.ndim - 1)) if x.ndim else index)
    if kind == "one_hot":
        return pick(args[0]).astype("int64").one_hot(args[1])
    if kind == "shift":
        return _along_t(pick(args[0]), t + args[1], t)
    if kind == "first_i":
        x = pick(args[0])
        return x[0] if len(ctx.dims) == 2 and ctx.dims[0] in set(x.domain) else x
    if kind == "window":
        x = pick(args[0])
        item = {"prefix": slice(0, t + 1), "suffix": slice(t, T), "last2": slice(trl.max(0, t - 1), t + 1)}[args[1]]
        return _along_t(x, item, t).sum(0)
    if kind == "recurrence":
        x = pick(args[0])
        state = trl.placeholder(x.shape, x.dtype, domain=x.domain)
        state[_key(state, 0, t)] = _along_t(x, 0, t)
        state[_key(state, t + 1, t)] = _along_t(state, t, t) * args[1] + _along_t(x, t + 1, t)
        return state
    if kind == "astype":
        return pick(args[0]).astype(args[1])
    if kind == "stack":
        return trl.stack([pick(args[0]), pick(args[1])])
    if kind == "matmul":
        return pick(args[0]) @ pick(args[1])
    return _invalid(args[0], pick(args[1]), ctx)


BINARY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
          "maximum": F.maximum, "pow": operator.pow, "lt": operator.lt, "eq": operator.eq,
          "remainder": operator.mod, "floor_divide": operator.floordiv}


def _promoted_as_torch(op, x, y):
    """``op(x, y)``, whose dtype must be torch's for operands of these dtypes and ranks (a spatial shape ``()``
    is a zero-dimensional tensor, a Python number a scalar), and which must be refused where torch refuses."""
    def like(v):
        if not isinstance(v, trl.RecurrentTensor):
            return v
        return torch.ones((1,) * v.ndim, dtype=getattr(torch, v.dtype))

    try:
        torch_op = torch.maximum if op is F.maximum else op
        expected = str(torch_op(like(x), like(y) if op is not F.maximum else like(y)).dtype).removeprefix("torch.")
    except (RuntimeError, NotImplementedError, TypeError):
        expected = None
    if expected is None and op is F.maximum and not isinstance(y, trl.RecurrentTensor):
        return op(x, y)  # torch.maximum takes no Python number; ours does, as a weak scalar
    if expected is None:
        try:
            op(x, y)
        except trl.TimeRLError:
            raise
        raise AssertionError(f"torch refuses {op} of {like(x)!r} and {like(y)!r}; timerl accepted it")
    result = op(x, y)
    assert result.dtype == expected, f"{op} of {like(x)!r} and {like(y)!r}: {result.dtype}, torch: {expected}"
    return result


def _key(x, item, t) -> tuple:
    """An index of ``x``'s domain that is ``item`` for the time dimension and each other dimension itself."""
    return tuple(item if d is t else d for d in x.domain)


def _along_t(x, item, t):
    return x[_key(x, item, t)] if t in set(x.domain) else x


def _invalid(what: str, x, ctx: trl.Context):
    t, T = ctx.dims[-1], ctx.bounds[-1]
    if what == "non_affine":
        return x[t * t]
    if what == "bound_domain":
        return trl.zeros((2,), domain=(T,))
    if what == "string_domain":
        return trl.zeros((2,), domain="t")
    if what == "when_product":
        with ctx.when(t * T < 3):
            return x + 1
    if what == "float_index":
        return x.index_select(0, trl.tensor(np.array([0.5])))
    if what == "zero_step":
        return x.spatial[::0]
    if what == "expand_new_minus_one":
        return x.expand(-1, *x.shape)
    if what == "int_requires_grad":
        return trl.placeholder(x.shape, "int64", domain=x.domain, requires_grad=True)
    if what == "reserved_dim":
        trl.Context(dims="t max")
    return x.sum(dim=x.ndim + 1)


def _build(program: dict):
    """The program's context and the sinks' stores; or the construction error, which must be ours."""
    ctx = trl.Context(program["dims"])
    stores: list[dict] = []
    with ctx:
        tensors = [trl.source(_source_fn(k, shape, dtype, special), shape=shape, dtype=dtype,
                              domain=ctx.dims if over_i else ctx.dims[-1:])
                   for k, (shape, dtype, special, over_i) in enumerate(program["sources"])]
        try:
            for step in program["steps"]:
                tensors.append(_step(step, tensors, ctx))
        except trl.TimeRLError as error:
            return None, type(error).__name__
        for source, (_, _, special, _) in zip(tensors, program["sources"]):
            if special == "raises":  # read at every point on every backend, so each meets the raise
                source.sink(lambda point, value: None)
        if program["vandal"]:
            tensors[-1].sink(_vandal)
        for tensor in tensors[len(program["sources"]):]:
            store: dict = {}
            tensor.sink(lambda point, value, store=store: store.__setitem__(tuple(point.values()),
                                                                          np.array(np.asarray(value))))
            stores.append(store)
    return (ctx, stores), None


def _vandal(point: dict, value) -> None:
    """A sink that tries to write into its value; a refusal (read-only, immutable) is fine."""
    for write in (lambda: value.__setitem__(..., 99), lambda: np.asarray(value).__setitem__(..., 99)):
        try:
            write()
        except Exception:  # noqa: BLE001, S110
            pass


def _outcome(built, program: dict, backend: str):
    ctx, stores = built
    for store in stores:
        store.clear()
    phase = "compile"
    try:
        bounds = {ctx.bounds[-1]: program["bound"], **{bound: 2 for bound in ctx.bounds[:-1]}}
        executable = ctx.compile(bounds=bounds, backend=backend)
        phase = "execute"
        executable.execute()
    except trl.TimeRLError as error:
        return ("error", type(error).__name__, str(error).splitlines()[0][:200], phase)
    return ("values", [dict(store) for store in stores])


def _same_values(expected: list[dict], got: list[dict]) -> str | None:
    for number, (want, have) in enumerate(zip(expected, got)):
        if sorted(want) != sorted(have):
            return f"sink {number}: points {sorted(want)} vs {sorted(have)}"
        for point, value in want.items():
            other = have[point]
            if value.shape != other.shape or value.dtype != other.dtype:
                return f"sink {number} at {point}: {value.shape} {value.dtype} vs {other.shape} {other.dtype}"
            if value.dtype.kind in "fc" or value.dtype.name == "bfloat16":
                low_precision = value.dtype.itemsize == 2  # float16: one unit in the last place is 1e-3
                close = np.allclose(value.astype(np.float64), other.astype(np.float64), equal_nan=True,
                                    rtol=1e-2 if low_precision else 2e-4, atol=1e-2 if low_precision else 1e-5)
            else:
                close = np.array_equal(value, other)
            if not close:
                return f"sink {number} at {point}: {value} vs {other}"
    return None


@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize="TIMERL_FUZZ_EXAMPLES" not in os.environ,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(PROGRAMS)
def test_backends_agree_on_random_programs(program):
    built, construction_error = _build(program)
    event(f"construction: {construction_error}" if built is None else "compiled")
    if built is None:
        return  # rejected while the program was written: the same for every backend, and one of ours
    outcomes = {backend: _outcome(built, program, backend) for backend in BACKENDS}
    reference = outcomes["reference"]
    event(f"ran: {reference[1] if reference[0] == 'error' else 'values'}")
    for backend in BACKENDS[1:]:
        outcome = outcomes[backend]
        assert outcome[0] == reference[0], f"{backend}: {outcome[:3]}, reference: {reference[:3]}"
        if outcome[0] == "values":
            mismatch = _same_values(reference[1], outcome[1])
            assert mismatch is None, f"{backend} differs from the reference: {mismatch}"
        elif not _proved_first(outcome) and not _user_code_first(outcome, reference):
            assert outcome[1] == reference[1], f"{backend} raised {outcome[1:]}, reference {reference[1:]}"


def _user_code_first(outcome: tuple, reference: tuple) -> bool:
    """A program whose source raises may hold other run-time errors too: which one a backend meets first
    depends on its evaluation order, as with `_proved_first`; the raise itself is a UserCodeError on every
    backend."""
    return "UserCodeError" in (outcome[1], reference[1]) and outcome[3] == reference[3] == "execute"


def _proved_first(outcome: tuple) -> bool:
    """A compiled backend proves a read outside a domain while compiling (the spec asks for it where it can be
    proven); the reference interpreter has no such analysis and meets the errors of a program with several
    in evaluation order. Both failing is agreement then, whichever error the reference met first."""
    return outcome[1] == "DomainError" and outcome[3] == "compile"
