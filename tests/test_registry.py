"""The op registry has no silent gaps, and every gradient rule agrees with central finite differences.

Finite differences are taken on the op's own array kernel (``impl`` with NumPy, float64), so the check is
independent of the gradient rule; the gradient comes from ``backward()`` run end to end on a backend.
"""

from __future__ import annotations

import array_api_compat.numpy as xp
import numpy as np
import pytest
from conftest import assert_values, collect, run

import timerl as trl
from timerl.ops import OPS, RULE_KINDS
from timerl.ops.registry import NOT_DIFFERENTIABLE, RunningContributions, RunningSum, Unsupported
from timerl.rt import functional as F

# Ops whose grad rule is deliberately `unsupported`, with the reason the test relies on.
NOT_CHECKED = {
    "sign": "piecewise constant: zero gradient almost everywhere, so no gradient flows",
    "floor_divide": "piecewise constant: zero gradient almost everywhere (torch defines none)",
    "logical_not": "boolean output", "logical_and": "boolean output", "logical_or": "boolean output",
    "lt": "boolean output", "le": "boolean output", "gt": "boolean output", "ge": "boolean output",
    "eq": "boolean output", "ne": "boolean output",
    "argmax": "integer output", "one_hot": "integer output",
    "detach": "blocks gradients by definition",
    "const": "a leaf", "source": "a leaf (user data)", "rand": "a leaf (random draw)", "randn": "a leaf (random draw)",
    "index": "a leaf (an integer expression of the point)", "sink": "has no output",
    "merge": "differentiated by autodiff itself (a merge with the same conditions): tests/test_autodiff.py",
    "udf": "a black box (environments)",
    "grad_accumulate": "second-order gradients are not supported",
}


def rng(seed):
    return np.random.default_rng(seed)


def normal(*shape, seed=0):
    return rng(seed).normal(size=shape)


def spread(*shape, seed=0, low=0.3, high=2.0):
    """Values away from 0 with random signs (abs, relu, max/min ties and kinks are avoided)."""
    generator = rng(seed)
    return generator.uniform(low, high, size=shape) * generator.choice([-1.0, 1.0], size=shape)


def positive(*shape, seed=0):
    return rng(seed).uniform(0.5, 2.0, size=shape)


def distinct(*shape, seed=0):
    """A random permutation of well-separated values: no ties for max/min/maximum/minimum."""
    count = int(np.prod(shape))
    return (rng(seed).permutation(count).reshape(shape) - count / 2) * 0.37


def integers(high, *shape, seed=0):
    return rng(seed).integers(0, high, size=shape).astype(np.int64)


# (case id, op, inputs, attrs); float64 inputs are differentiated, integer/bool ones are not.
CASES = [
    ("neg", "neg", [normal(3, 4)], {}),
    ("exp", "exp", [normal(3, 4)], {}),
    ("log", "log", [positive(3, 4)], {}),
    ("sqrt", "sqrt", [positive(3, 4)], {}),
    ("abs", "abs", [spread(3, 4)], {}),
    ("tanh", "tanh", [normal(3, 4)], {}),
    ("sigmoid", "sigmoid", [normal(3, 4)], {}),
    ("sin", "sin", [normal(3, 4)], {}),
    ("cos", "cos", [normal(3, 4)], {}),
    ("relu", "relu", [spread(3, 4)], {}),
    ("identity", "identity", [normal(3, 4)], {}),
    ("clip", "clip", [spread(3, 4, low=0.1, high=0.4) * np.array([1, 3, 1, 3])], {"low": -0.5, "high": 0.5}),
    ("astype", "astype", [normal(3, 4)], {"dtype": "float32"}),
    ("add", "add", [normal(3, 4), normal(4, seed=1)], {}),
    ("sub", "sub", [normal(3, 1), normal(4, seed=1)], {}),
    ("mul", "mul", [normal(3, 4), normal(4, seed=1)], {}),
    ("div", "div", [normal(3, 4), spread(3, 4, seed=1)], {}),
    ("pow", "pow", [positive(3, 4), normal(4, seed=1)], {}),
    ("remainder", "remainder", [spread(3, 4) * 3.0 + 0.05, spread(4, seed=1)], {}),
    ("maximum", "maximum", [distinct(3, 4), distinct(4, seed=1) + 0.1], {}),
    ("minimum", "minimum", [distinct(3, 4), distinct(3, 4, seed=1) + 0.1], {}),
    ("where", "where", [rng(2).random((3, 4)) < 0.5, normal(3, 4), normal(4, seed=1)], {}),
    ("reshape", "reshape", [normal(3, 4)], {"shape": (2, 6)}),
    ("permute", "permute", [normal(2, 3, 4)], {"perm": (2, 0, 1)}),
    ("expand", "expand", [normal(3, 1)], {"shape": (2, 3, 4)}),
    ("flip", "flip", [normal(3, 4)], {"dim": 1}),
    ("spatial_index", "spatial_index", [normal(3, 4)], {"key": (slice(0, 2), 1)}),
    ("spatial_scatter", "spatial_scatter", [normal(2)], {"key": (slice(0, 2), 1), "shape": (3, 4)}),
    ("cat", "cat", [normal(2, 3), normal(1, 3, seed=1)], {"dim": 0}),
    ("stack", "stack", [normal(3), normal(3, seed=1)], {"dim": 1}),
    ("gather", "gather", [normal(3, 4), integers(4, 3, 2)], {"dim": 1}),
    ("scatter_add", "scatter_add", [normal(3, 2), integers(4, 3, 2)], {"dim": 1, "size": 4}),
    ("index_select", "index_select", [normal(3, 4), np.array([3, 0, 3])], {"dim": 1}),
    ("index_add", "index_add", [normal(3, 3), np.array([3, 0, 3])], {"dim": 1, "size": 4}),
    ("bincount", "bincount", [integers(5, 3, 4), normal(3, 4)], {"size": 5}),
    ("bincount-rows", "bincount", [integers(5, 3, 4), normal(3, 4, 2)], {"size": 5}),
    ("materialize", "materialize", [normal(3, 4)], {}),
    ("scatter", "scatter", [normal(3, 5), np.array([[0, 3], [4, -1], [5, 2]]), normal(3, 2, seed=1)], {"dim": 1}),
    ("gather_fill", "gather_fill", [normal(3, 5), np.array([[0, 3, 3], [4, -1, 0], [5, 2, 1]])],
     {"dim": 1, "fill": 0.5}),
    ("sum", "sum", [normal(3, 4)], {"dims": (1,), "keepdim": False}),
    ("sum-keepdim", "sum", [normal(2, 3, 4)], {"dims": (0, 2), "keepdim": True}),
    ("mean", "mean", [normal(3, 4)], {"dims": (0,), "keepdim": False}),
    ("max", "max", [distinct(3, 4)], {"dims": (1,), "keepdim": False}),
    ("min", "min", [distinct(3, 4)], {"dims": (0, 1), "keepdim": False}),
    ("cumsum", "cumsum", [normal(3, 4)], {"dim": 1}),
    ("softmax", "softmax", [normal(3, 4)], {"dim": 1}),
    ("log_softmax", "log_softmax", [normal(3, 4)], {"dim": 0}),
    ("discounted_sum", "discounted_sum", [normal(4, 3)], {"gamma": 0.9}),
    ("discounted_sum_until", "discounted_sum_until",
     [normal(5, 3), np.array([[0, 1, 0], [1, 0, 0], [0, 1, 0], [1, 0, 1], [0, 0, 0]], dtype=bool)], {"gamma": 0.9}),
    ("discounted_spread", "discounted_spread", [normal(3), normal(4, 3, seed=1)], {"gamma": 0.9}),
    ("discounted_cum_sum", "discounted_cum_sum", [normal(4, 3)], {"gamma": 0.9, "reverse": True}),
    ("discounted_cum_sum-forward", "discounted_cum_sum", [normal(4, 3)], {"gamma": 0.8, "reverse": False}),
    ("matmul", "matmul", [normal(2, 3), normal(3, 4, seed=1)], {}),
    ("matmul-batched", "matmul", [normal(2, 3, 4), normal(4, 5, seed=1)], {}),
]

# Inputs whose gradient the rule does not define (an index, a condition, a shape donor).
NOT_AN_ARGUMENT = {"discounted_spread": {1}}


def test_every_rule_of_every_op_is_present():
    for name, op in OPS.items():
        for kind in RULE_KINDS:
            rule = getattr(op, kind)
            assert isinstance(rule, Unsupported) or callable(rule) or isinstance(
                rule, (RunningSum, RunningContributions)), f"{name}.{kind} is neither a rule nor unsupported"
            if isinstance(rule, Unsupported):
                assert rule.reason, f"{name}.{kind} is unsupported without a reason"
        assert not isinstance(op.shape, Unsupported) and not isinstance(op.dtype, Unsupported), name


def test_every_op_is_gradient_checked_or_listed():
    checked = {op for _, op, _, _ in CASES}
    missing = set(OPS) - checked - set(NOT_CHECKED)
    assert not missing, f"ops with neither a finite-difference case nor a listed reason: {sorted(missing)}"
    assert not checked & set(NOT_CHECKED)
    for name in NOT_CHECKED:
        assert isinstance(OPS[name].grad, Unsupported), f"{name} is listed as not differentiable but has a rule"
    for name in checked:
        assert not isinstance(OPS[name].grad, Unsupported), f"{name} has a case but no gradient rule"
    assert OPS["argmax"].grad is NOT_DIFFERENTIABLE


def _objective(op, arrays, attrs, weights):
    result = OPS[op].impl(xp, *arrays, **attrs)
    return float(np.sum(np.asarray(result, dtype=np.float64) * weights))


def finite_differences(op, arrays, attrs, weights, slot, eps=1e-6):
    grad = np.zeros_like(arrays[slot])
    for position in np.ndindex(arrays[slot].shape):
        shifted = []
        for sign in (1.0, -1.0):
            moved = [a.copy() for a in arrays]
            moved[slot][position] += sign * eps
            shifted.append(_objective(op, moved, attrs, weights))
        grad[position] = (shifted[0] - shifted[1]) / (2 * eps)
    return grad


@pytest.mark.parametrize("case,op,arrays,attrs", CASES, ids=[c[0] for c in CASES])
def test_gradient_matches_finite_differences(backend, case, op, arrays, attrs):
    ctx = trl.Context(dims="t")
    slots = [k for k, a in enumerate(arrays) if a.dtype == np.float64 and k not in NOT_AN_ARGUMENT.get(op, ())]
    with ctx:
        inputs = [trl.tensor(a, dtype=str(a.dtype), requires_grad=k in slots) for k, a in enumerate(arrays)]
        y = F.apply(op, *inputs, **attrs)
        weights = normal(*y.shape, seed=42)
        (y * trl.tensor(weights, dtype=y.dtype)).backward()
        stores = {k: collect(inputs[k].grad) for k in slots}
        for k in slots:
            assert inputs[k].grad.shape == inputs[k].shape and inputs[k].grad.dtype == "float64"
    run(ctx, {}, backend)
    tolerance = 1e-3 if attrs.get("dtype") == "float32" else 1e-6
    for k in slots:
        eps = 1e-2 if tolerance > 1e-6 else 1e-6
        want = finite_differences(op, arrays, attrs, weights, k, eps)
        assert_values(stores[k], {(): want}, rtol=tolerance, atol=tolerance)
