"""Every op has every rule kind (or says why not), its category agrees with its rules, and the vectorize and
incrementalize rules agree with the plain computation: vectorized against a loop of the op's kernel, point by
point; incrementalized against the whole reduction, with hand-derived values. Table-driven over the registry:
a new op with a rule but no case fails here."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import collect
from test_registry import CASES as GRADIENT_CASES

import timerl as trl
from timerl.backends.base import get_backend
from timerl.ops import OPS, RULE_KINDS
from timerl.ops.batching import batch_rule
from timerl.ops.categories import CATEGORIES, Category
from timerl.ops.registry import RunningContributions, RunningSum, Unsupported
from timerl.ops.types import Attrs, TensorType
from timerl.runtime.evaluate import op_kernel

RECORDS = {"incrementalize": (RunningSum, RunningContributions)}


def test_every_op_has_every_rule_kind_or_says_why_not():
    for name, op in OPS.items():
        assert isinstance(op.category, Category) and op.category in CATEGORIES, name
        for kind in RULE_KINDS:
            rule = getattr(op, kind)
            if isinstance(rule, Unsupported):
                assert rule.reason, f"{name}.{kind} is unsupported without a reason"
            else:
                assert callable(rule) or isinstance(rule, RECORDS.get(kind, ())), f"{name}.{kind} is a gap"
        for backend, lowering in op.lowering.items():
            assert backend in ("torch", "jax") and callable(lowering), (name, backend)
        assert callable(op.window), name


def test_categories_agree_with_the_rules():
    """Ops with an array kernel have a vectorize rule; the ones the executor evaluates have neither."""
    for name, op in OPS.items():
        kernel = not isinstance(op.impl, Unsupported)
        assert kernel == op.category.kernel, name
        assert kernel == (not isinstance(op.vectorize, Unsupported)), name
        assert op.category.checked or not kernel, f"{name}: a kernel op's output types are always checked"
        assert (op.category.batched == "rule") == kernel, name


# ---- vectorized against a loop ------------------------------------------------------------------------------

N = 3  # points stacked on the new leading axis

# ops the gradient cases leave out (not differentiable), with inputs and attributes
EXTRA_CASES = [
    ("sign", "sign", [np.array([[-1.5, 0.0, 2.0]])], {}),
    ("logical_not", "logical_not", [np.array([True, False, True])], {}),
    ("logical_and", "logical_and", [np.array([True, False, True]), np.array([True, True, False])], {}),
    ("logical_or", "logical_or", [np.array([True, False, False]), np.array([False, True, False])], {}),
    ("detach", "detach", [np.arange(6.0).reshape(2, 3)], {}),
    ("argmax", "argmax", [np.array([[0.3, 2.0, -1.0], [4.0, 0.5, 0.2]])], {"dims": (1,), "keepdim": False}),
    ("one_hot", "one_hot", [np.array([2, 0, 1])], {"num_classes": 4}),
    ("floor_divide", "floor_divide", [np.array([[7.0, -7.5, 2.0]]), np.array([2.0, 2.0, -0.5])], {}),
] + [(op, op, [np.array([0.5, -1.0, 2.0]), np.array([1.0, -1.0, 0.0])], {})
     for op in ("lt", "le", "gt", "ge", "eq", "ne")]

VECTORIZE_CASES = [c for c in GRADIENT_CASES + EXTRA_CASES if not isinstance(OPS[c[1]].vectorize, Unsupported)]


def _varied(value: np.ndarray, n: int) -> np.ndarray:
    """``value`` at point ``n``: floats shifted, indices, counts and booleans the same (their values are
    constrained by the other operands' shapes)."""
    return value + 0.25 * n if value.dtype.kind == "f" else value


# ops whose kernels torch's vmap refuses (in-place writes into a fresh buffer), and which have no rule of their
# own for these operands: a vectorized statement holding one runs point by point (`timerl.runtime.batch`).
# None today: bincount's torch kernel writes with scatter_add_ into counts made from the weights (new_zeros), which
# vmap batches with them (it refused index_add_ into fresh flat counts); its values are checked like any other's.
VMAP_REFUSES: dict[str, str] = {}


def _type(array: np.ndarray) -> TensorType:
    return TensorType(tuple(array.shape), str(array.dtype))


@pytest.mark.parametrize("first_only", [False, True], ids=["every-operand", "first-operand"])
@pytest.mark.parametrize("case,op,arrays,attrs", VECTORIZE_CASES, ids=[c[0] for c in VECTORIZE_CASES])
def test_vectorized_against_a_loop(case, op, arrays, attrs, first_only):
    """The op's vectorize rule (or, where it has none for these operands, the array library's vmap, as the
    executor does) at N points at once equals its kernel at each point."""
    backend = get_backend("torch")
    dtype = OPS[op].infer([_type(a) for a in arrays], Attrs.of(**attrs))[0].dtype
    kernel = op_kernel(op, attrs, dtype, backend)
    floats = [k for k, a in enumerate(arrays) if a.dtype.kind == "f"]
    batched = floats[:1] if first_only else floats
    if not batched:
        batched = [0]
    axes = tuple(0 if k in batched else None for k in range(len(arrays)))
    points = [[_varied(a, n) if k in batched else a for k, a in enumerate(arrays)] for n in range(N)]
    stacked = [backend.from_numpy(np.stack([p[k] for p in points]) if axes[k] == 0 else arrays[k])
               for k in range(len(arrays))]
    rule = batch_rule(op, attrs, [a.ndim for a in arrays], axes, backend.xp, kernel,
                      lambda changed: op_kernel(op, changed, dtype, backend))
    if rule is None and op in VMAP_REFUSES:
        with pytest.raises(RuntimeError):  # the executor then runs the statement point by point
            backend.vmap(kernel, axes)(*stacked)
        return
    every_point = rule if rule is not None else backend.vmap(kernel, axes)
    got = backend.to_numpy(every_point(*stacked))
    want = np.stack([backend.to_numpy(kernel(*[backend.from_numpy(v) for v in p])) for p in points])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def test_every_vectorize_rule_has_a_case():
    with_rule = {name for name, op in OPS.items() if not isinstance(op.vectorize, Unsupported)}
    assert with_rule <= {c[1] for c in VECTORIZE_CASES}, sorted(with_rule - {c[1] for c in VECTORIZE_CASES})


# ---- incrementalized against whole --------------------------------------------------------------------------


def _user_sum():
    """``g[i] = x[i, 0:T].sum(0)``: a RunningSum of ``sum``."""
    ctx = trl.Context("i t")
    i, t = ctx.dims
    _, T = ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.array([p["i"] + 0.5 * p["t"], p["t"] ** 2], np.float64), shape=(2,),
                       dtype="float64", domain=(i, t))
        store = collect(x[i, 0:T].sum(0))

    def expected(sizes):
        return {(k,): np.array([sum(k + 0.5 * s for s in range(sizes["T"])), sum(s ** 2 for s in range(sizes["T"]))])
                for k in range(sizes["I"])}

    return ctx, store, expected


def _parameter_gradient():
    """SGD on ``sum_t sum(w * w * x[i, t])`` of a parameter ``w[i]``: its gradient sums one contribution per
    step, RunningContributions of ``grad_accumulate``."""
    ctx = trl.Context("i t")
    i, t = ctx.dims
    with ctx:
        w = trl.param(trl.tensor(np.array([0.5, 1.5])), domain=(i,))
        x = trl.source(lambda p: np.array([0.01 * (p["t"] + 1), 0.002 * p["i"]]), shape=(2,), dtype="float64",
                       domain=(i, t))
        (w * w * x).sum().backward()
        trl.optim.SGD([w], lr=0.5).step()
        store = collect(w)

    def expected(sizes):  # d/dw sum_t sum(w * w * x_t) = 2 w sum_t x_t, by hand
        rows, value = {}, np.array([0.5, 1.5])
        for k in range(sizes["I"]):
            rows[(k,)] = value.copy()
            total = np.array([sum(0.01 * (s + 1) for s in range(sizes["T"])), 0.002 * k * sizes["T"]])
            value = value - 0.5 * 2 * value * total
        return rows

    return ctx, store, expected


INCREMENTALIZE_CASES = {"sum": _user_sum, "grad_accumulate": _parameter_gradient}


def test_every_incrementalize_rule_has_a_case():
    with_rule = {name for name, op in OPS.items() if not isinstance(op.incrementalize, Unsupported)}
    assert with_rule == set(INCREMENTALIZE_CASES)


@pytest.mark.parametrize("op", sorted(INCREMENTALIZE_CASES))
def test_incrementalized_against_whole(op):
    sizes = {"I": 2, "T": 5}
    results = {}
    for incremental in (False, True):
        ctx, store, expected = INCREMENTALIZE_CASES[op]()
        I, T = ctx.bounds
        exe = ctx.compile({I: sizes["I"], T: sizes["T"]}, backend="torch", incrementalize=incremental)
        running = [n for n in exe.graph.nodes if n.attrs.get("running") is not None]
        assert bool(running) == incremental, f"{op}: incrementalize={incremental} left {len(running)} running sums"
        exe.execute()
        results[incremental] = {k: v.copy() for k, v in store.items()}
        want = expected(sizes)
        assert set(results[incremental]) == set(want)
        for key, value in want.items():
            np.testing.assert_allclose(results[incremental][key], value, rtol=1e-6)
