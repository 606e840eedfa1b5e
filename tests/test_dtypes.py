"""Dtype promotion as PyTorch's, op by op, for every pair of supported dtypes: the types a program declares
against torch's eager results (dimensioned tensors, zero-dimensional ones and Python scalars), and the values
every backend computes against torch's, also for reductions and scans of integers and the float-to-integer
conversion rule."""

from __future__ import annotations

import itertools
import operator
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch

import timerl as trl
from conftest import collect, run
from timerl.ops.dtypes import DTYPE_ORDER, promote_types
from timerl.options import CompileOptions
from timerl.rt import functional as F

DTYPES = DTYPE_ORDER
TORCH = {name: getattr(torch, name) for name in DTYPES}

BINARY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
          "pow": operator.pow, "remainder": operator.mod, "floor_divide": operator.floordiv,
          "maximum": lambda x, y: x.maximum(y) if isinstance(x, torch.Tensor) else F.maximum(x, y),
          "lt": operator.lt, "eq": operator.eq,
          "where": lambda x, y: (torch.where if isinstance(x, torch.Tensor) else trl.where)(x == x, x, y)}


def _left(dtype: str) -> np.ndarray:
    values = {"bool": [True, False, True], "uint8": [3, 200, 7]}.get(dtype)
    if values is None:
        values = [-3, 5, 7] if dtype.startswith("int") else [1.5, -2.25, 3.0]
    return np.array(values).astype(dtype)


def _right(dtype: str) -> np.ndarray:
    """Divisors and exponents: no zero (integer division by zero is an error) and no negative exponent."""
    values = [True, True, True] if dtype == "bool" else [1, 2, 3] if "int" in dtype else [0.5, 2.0, 3.0]
    return np.array(values).astype(dtype)


def _torch_tensor(array: np.ndarray) -> torch.Tensor:
    if array.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(array.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(np.array(array))


def _torch_result(op: str, x, y):
    """torch's result (dtype and values), or None where torch refuses the combination."""
    try:
        return BINARY[op](x, y)
    except (RuntimeError, NotImplementedError):
        return None


@pytest.mark.parametrize("op", sorted(BINARY))
def test_declared_dtypes_are_torchs_for_every_pair(op):
    """Tensor-tensor (each dimensioned or zero-dim) and tensor-scalar: the declared dtype is torch's, and
    what torch refuses (bool subtraction, bool powers) is refused while the program is written."""
    ctx = trl.Context("t")
    checked = 0
    with ctx:
        for left, right in itertools.product(DTYPES, DTYPES):
            for left_shape, right_shape in [((3,), (3,)), ((3,), ()), ((), (3,)), ((), ())]:
                x = trl.zeros(left_shape, left)
                y = trl.ones(right_shape, right)
                expected = _torch_result(op, torch.zeros(left_shape, dtype=TORCH[left]),
                                         torch.ones(right_shape, dtype=TORCH[right]))
                checked += _same_outcome(op, x, y, expected, (left, left_shape, right, right_shape))
        for left, scalar in itertools.product(DTYPES, [True, 2, 2.5] if op != "maximum" else []):
            for shape in [(3,), ()]:
                expected = _torch_result(op, torch.ones(shape, dtype=TORCH[left]), scalar)
                checked += _same_outcome(op, trl.ones(shape, left), scalar, expected, (left, shape, scalar))
    assert checked > len(DTYPES) ** 2


def _same_outcome(op, x, y, expected, case) -> int:
    if op == "pow" and case[0] == "bool" and case[-1] is True:
        expected = None  # torch's bool ** True alone gives a bool (its scalar-exponent kernel); we refuse it as
        # torch refuses every other bool power
    if expected is None:
        with pytest.raises(trl.TimeRLError):
            BINARY[op](x, y)
        return 0
    got = BINARY[op](x, y)
    assert got.dtype == str(expected.dtype).removeprefix("torch."), case
    return 1


def test_promote_types_is_torchs():
    for a, b in itertools.product(DTYPES, DTYPES):
        assert promote_types(a, b) == str(torch.promote_types(TORCH[a], TORCH[b])).removeprefix("torch."), (a, b)


@pytest.mark.parametrize("ops", [("add", "sub", "mul", "div", "where"), ("pow", "remainder", "floor_divide",
                                                                         "maximum", "lt", "eq")])
def test_mixed_dtype_values_agree_with_torch(backend, ops):
    """Every pair of dtypes through each op, computed by the backend, against torch's eager values."""
    ctx = trl.Context("t")
    (T,) = ctx.bounds
    expected = []
    with ctx:
        for left, right in itertools.product(DTYPES, DTYPES):
            a, b = _left(left), _right(right)
            x = trl.source(lambda p, a=a: a, shape=(3,), dtype=left, domain=ctx.dims)
            y = trl.source(lambda p, b=b: b, shape=(3,), dtype=right, domain=ctx.dims)
            for op in ops:
                want = _torch_result(op, _torch_tensor(a), _torch_tensor(b))
                if want is not None:
                    expected.append(((left, right, op), want, collect(BINARY[op](x, y))))
    # jax: one dispatch per op (jitting the one group of ~1,000 ops takes minutes; the kernels are the same)
    run(ctx, {T: 1}, backend, **({"options": CompileOptions(jit_groups=False)} if backend == "jax" else {}))
    for case, want, store in expected:
        got = store[(0,)]
        assert str(got.dtype) == str(want.dtype).removeprefix("torch."), case
        low_precision = want.dtype in (torch.float16, torch.bfloat16)
        np.testing.assert_allclose(got.astype(np.float64), want.double().numpy(), rtol=1e-2 if low_precision else
                                   1e-6, equal_nan=True, err_msg=str(case))


def test_reductions_and_scans_of_integers_promote_as_torch(backend):
    """Sums accumulate integers in int64, means and discounted sums compute in float (gamma is not truncated),
    and every backend gives the same values as torch."""
    ctx = trl.Context("t")
    (t,), (T,) = ctx.dims, ctx.bounds
    rewards = np.array([[100, 2], [120, 4], [127, 6]], dtype=np.int8)
    with ctx:
        r = trl.source(lambda p: rewards[p["t"]], shape=(2,), dtype="int8", domain=(t,))
        window = r[t:T]
        stores = {"sum": collect(window.sum(0)), "cumsum": collect(window.cumsum(0)),
                  "mean": collect(window.mean(0)), "discounted": collect(window.discounted_sum(0.5)),
                  "cum": collect(window.discounted_cum_sum(0.5)), "max": collect(window.max(0))}
    run(ctx, {T: 3}, backend)
    for k in range(3):
        rows = torch.from_numpy(rewards[k:])
        weights = 0.5 ** torch.arange(3 - k, dtype=torch.float32)
        expected = {"sum": rows.sum(0), "cumsum": rows.cumsum(0), "mean": rows.float().mean(0),
                    "discounted": (weights[:, None] * rows).sum(0),
                    "cum": torch.stack([(weights[: 3 - k - j, None] * rows[j:]).sum(0) for j in range(3 - k)]),
                    "max": rows.max(0).values}
        for name, want in expected.items():
            got = stores[name][(k,)]
            assert str(got.dtype) == str(want.dtype).removeprefix("torch."), name
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, err_msg=f"{name} at t={k}")


def test_clip_of_integers_with_float_bounds_promotes_as_torch_clamp(backend):
    ctx = trl.Context("t")
    (T,) = ctx.bounds
    values = np.array([-3, 0, 1, 2, 9])
    with ctx:
        x = trl.source(lambda p: values, shape=(5,), dtype="int64", domain=ctx.dims)
        floats, ints, upper = collect(x.clip(0.5, 2.5)), collect(x.clip(0, 2)), collect(x.clip(max=1.5))
    run(ctx, {T: 1}, backend)
    for store, want in [(floats, torch.from_numpy(values).clamp(0.5, 2.5)),
                        (ints, torch.from_numpy(values).clamp(0, 2)),
                        (upper, torch.from_numpy(values).clamp(max=1.5))]:
        assert str(store[(0,)].dtype) == str(want.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(store[(0,)], want.numpy())


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64"])
def test_float_to_integer_conversion_is_one_rule_everywhere(backend, dtype):
    """NaN becomes 0, values beyond the range saturate, the rest round toward zero (docs/language.md)."""
    ctx = trl.Context("t")
    (T,) = ctx.bounds
    values = np.array([np.nan, np.inf, -np.inf, 1e20, -1e20, 300.7, -300.7, 2.9, -2.9, 0.0], dtype=np.float64)
    with ctx:
        x = trl.source(lambda p: values, shape=(10,), dtype="float64", domain=ctx.dims)
        wide, narrow = collect(x.astype(dtype)), collect(x.astype("float32").astype(dtype))
    run(ctx, {T: 1}, backend)
    low, high = int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)
    want = np.array([0 if np.isnan(v) else high if v > high else low if v < low else int(v) for v in values],
                    dtype=dtype)
    np.testing.assert_array_equal(wide[(0,)], want)
    np.testing.assert_array_equal(narrow[(0,)], want)


def test_bfloat16_runs_everywhere(backend):
    ctx = trl.Context("t")
    (T,) = ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.array([1.5, 2.25, -3.0]), shape=(3,), dtype="bfloat16", domain=ctx.dims)
        doubled, total = collect(x * 2 + 1), collect((x * x).sum())
    run(ctx, {T: 2}, backend)
    assert doubled[(1,)].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(doubled[(1,)].astype(np.float32), [4.0, 5.5, -5.0])
    assert float(total[(0,)]) == pytest.approx(1.5**2 + 2.25**2 + 9.0, rel=1e-2)


def test_bfloat16_needs_no_particular_import_order():
    """In a fresh interpreter that imports timerl first and never jax (which would register NumPy's bfloat16
    as a side effect), a bfloat16 program still runs on the reference and torch."""
    program = textwrap.dedent("""
        import sys
        import timerl as trl
        ctx = trl.Context("t")
        (T,) = ctx.bounds
        seen = []
        with ctx:
            x = trl.source(lambda p: [1.5, -2.0], shape=(2,), dtype="bfloat16", domain=ctx.dims)
            (x * 2).sum().sink(lambda p, v: seen.append(float(v)))
        for backend in ("reference", "torch"):
            ctx.compile(bounds={T: 1}, backend=backend).execute()
        assert seen == [-1.0, -1.0], seen
        assert "jax" not in sys.modules
    """)
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", program], check=True, cwd=root,
                   env={**os.environ, "PYTHONPATH": str(root)}, timeout=120)


def test_integer_expressions_promote_like_python_ints(backend):
    """``x + t`` is ``x + 3`` at t = 3: weak, so an int8 tensor stays int8 and a float16 one float16."""
    ctx = trl.Context("t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        small = trl.source(lambda p: np.array([1, -2], np.int8), shape=(2,), dtype="int8", domain=(t,))
        half = trl.source(lambda p: np.array([0.5, 1.5], np.float16), shape=(2,), dtype="float16", domain=(t,))
        results = {"int8": small + t, "float16": half * (T - t), "float32": 0.5 ** (T - t)}
        stores = {name: collect(r) for name, r in results.items()}
    run(ctx, {T: 3}, backend)
    for k in range(3):
        expected = {"int8": torch.tensor([1, -2], dtype=torch.int8) + k,
                    "float16": torch.tensor([0.5, 1.5], dtype=torch.float16) * (3 - k),
                    "float32": torch.tensor(0.5) ** (3 - k)}
        for name, want in expected.items():
            assert results[name].dtype == name == str(want.dtype).removeprefix("torch.")
            np.testing.assert_array_equal(stores[name][(k,)], want.numpy())
