"""Window reductions computed as scans in vectorized statements (`timerl.runtime.window_scans`): windows that
share their end (``x[t:T]``) or their start (``x[0:t+1]``) reduce as one scan of the run they cover instead of
padded windows; values equal NumPy's (written here) and the reference interpreter's."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl
from conftest import collect

WIDTH = 3


def _program(kind: str, gamma: float | None, rewards: np.ndarray, ends: np.ndarray):
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        r = trl.source(lambda p: rewards[p["t"]], (WIDTH,), "float32", (t,))
        d = trl.source(lambda p: ends[p["t"]], (WIDTH,), "float32", (t,))
        if kind == "masked discounted suffix":  # a mask of each position, as returns ignoring marked steps
            g = (r[t:T] * (d[t:T] < 0.5)).discounted_sum(gamma)
        elif kind == "discounted suffix":
            g = r[t:T].discounted_sum(gamma)
        elif kind == "until suffix":  # Monte Carlo returns up to the first episode end in the window
            g = r[t:T].discounted_sum(gamma, until=d[t:T] > 0.5)
        elif kind == "suffix sum":
            g = (r[t:T] * 2.0 + d[t:T]).sum(0)
        else:  # prefix sum; the last step's reward makes it wait for the loop (a causal window alone is read
            # in the loop that produces it, point by point)
            g = (r[0:t + 1] * (1.0 - d[0:t + 1])).sum(0) + r[T - 1]
        out = collect(g - g.mean())
    return ctx, T, out


def _numpy(kind: str, gamma: float | None, rewards: np.ndarray, ends: np.ndarray) -> dict:
    steps = rewards.shape[0]
    result = {}
    for t in range(steps):
        if kind == "prefix sum":
            g = (rewards[:t + 1] * (1.0 - ends[:t + 1])).sum(0) + rewards[-1]
        elif kind == "suffix sum":
            g = (rewards[t:] * 2.0 + ends[t:]).sum(0)
        elif kind == "until suffix":  # by hand: add discounted rewards, stop after an end, column by column
            g = np.zeros(rewards.shape[1])
            for column in range(rewards.shape[1]):
                for k in range(steps - t):
                    g[column] += gamma ** k * rewards[t + k, column]
                    if ends[t + k, column] > 0.5:
                        break
        else:
            x = rewards[t:] * (ends[t:] < 0.5) if kind.startswith("masked") else rewards[t:]
            g = sum(gamma ** k * x[k] for k in range(steps - t))
        result[(t,)] = g - g.mean()
    return result


# A window is scanned inside the vectorized statement that reduces it: that needs the window's readers fused
# into one statement and the loop vectorized (with either off, the values are the same: the corpus of
# tests/test_compile_options.py)
SCANNED = trl.CompileOptions(fusion=True, vectorize=True)

CASES = [(kind, gamma) for kind in ("masked discounted suffix", "discounted suffix") for gamma in (0.5, 0.99, 1.0)]
CASES += [("until suffix", gamma) for gamma in (0.5, 1.0)]
CASES += [("suffix sum", None), ("prefix sum", None)]


@pytest.mark.parametrize("steps", [1, 23])
@pytest.mark.parametrize("kind, gamma", CASES)
@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_window_reductions_as_scans_equal_numpy_and_the_reference(backend, kind, gamma, steps):
    """Suffix windows (Monte Carlo returns, with a mask of each position and without) and prefix windows, over
    several gammas and lengths; the scan is used wherever a loop has more than one point."""
    rng = np.random.default_rng(steps)
    rewards = rng.normal(size=(steps, WIDTH)).astype(np.float32)
    ends = (rng.random((steps, WIDTH)) < 0.3).astype(np.float32)
    want = _numpy(kind, gamma, rewards, ends)
    results = {}
    for target in ("reference", backend):
        ctx, T, out = _program(kind, gamma, rewards, ends)
        exe = ctx.compile({T: steps}, backend=target, options=SCANNED)
        exe.execute()
        results[target] = dict(out)
        if target == backend and steps > 1:
            assert exe.stats["window_scans"] > 0, "the windows were padded, not scanned"
    for target, got in results.items():
        assert sorted(got) == sorted(want)
        for key, value in want.items():
            np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-4, err_msg=f"{target} at {key}")


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_windows_of_other_shapes_and_running_sums_stay_padded(backend):
    """Sliding windows share neither end nor start, and a running sum along a window (REINFORCE's
    ``same_episode``) restarts at each window's start: both keep padded windows, with the reference's values."""
    steps = 9
    rng = np.random.default_rng(5)
    rewards = rng.normal(size=(steps, WIDTH)).astype(np.float32)
    ends = (rng.random((steps, WIDTH)) < 0.3).astype(np.float32)
    for window in ("sliding", "running sum", "sliding until"):
        results = []
        for target in ("reference", backend):
            ctx = trl.Context(dims="t")
            (t,), (T,) = ctx.dims, ctx.bounds
            with ctx:
                r = trl.source(lambda p: rewards[p["t"]], (WIDTH,), "float32", (t,))
                d = trl.source(lambda p: ends[p["t"]], (WIDTH,), "float32", (t,))
                if window == "sliding":
                    g = r[t:trl.min(t + 3, T)].discounted_sum(0.9)
                elif window == "sliding until":  # n-step returns that stop at an episode end
                    g = r[t:trl.min(t + 3, T)].discounted_sum(0.9, until=d[t:trl.min(t + 3, T)])
                else:
                    g = (r[t:T] * ((d[t:T].cumsum(0) - d[t:T]) == 0)).discounted_sum(0.9)
                out = collect(g - g.mean())
            exe = ctx.compile({T: steps}, backend=target)
            exe.execute()
            if target == backend:
                assert exe.stats["window_scans"] == 0
            results.append(dict(out))
        for key, value in results[0].items():
            np.testing.assert_allclose(results[1][key], value, rtol=1e-5, atol=1e-5, err_msg=f"{window} at {key}")


def test_every_op_states_its_window_scan_rule():
    """Elementwise ops compute on the run position by position; sums and discounted sums have scans; a running
    sum along the window says why it has none."""
    from timerl.ops.registry import OPS, POSITIONWISE, Unsupported, WindowScan

    assert OPS["mul"].window_scan == POSITIONWISE
    assert isinstance(OPS["sum"].window_scan, WindowScan)
    assert isinstance(OPS["discounted_sum"].window_scan.prefix, Unsupported)
    assert isinstance(OPS["discounted_sum_until"].window_scan.prefix, Unsupported)
    assert "restarts" in OPS["cumsum"].window_scan.reason


@pytest.mark.parametrize("dtype", ["bool", "int32", "float32"])
def test_jax_cumulative_sums_as_parallel_scans_equal_numpy(dtype):
    """On the CPU the jax backend computes cumulative sums as a parallel prefix scan (jax's own lowers to a
    ``reduce_window``, N additions per element): same values and dtypes as jax.numpy's, along every axis."""
    import jax.numpy as jnp

    from timerl.backends.jax_backend import JaxBackend

    xp = JaxBackend().xp
    x = (np.random.default_rng(0).random((5, 37, 3)) * 4).astype(dtype)
    for axis in (0, 1, -1):
        for initial in (False, True):
            got = xp.cumulative_sum(x, axis=axis, include_initial=initial)
            want = jnp.cumulative_sum(x, axis=axis, include_initial=initial)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(np.asarray(got, float), np.cumsum(x.astype(float), axis=axis) if not initial
                                       else np.asarray(want, float), rtol=1e-5)


def test_discounted_sum_until_needs_ends_of_the_values_shape():
    """Episode ends of another shape are the user's error, named at their line."""
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        r = trl.source(lambda p: np.zeros(WIDTH, np.float32), (WIDTH,), "float32", (t,))
        d = trl.source(lambda p: np.zeros(WIDTH + 1, np.float32), (WIDTH + 1,), "float32", (t,))
        with pytest.raises(trl.errors.ShapeError, match="test_window_scans.py:.*until"):
            r[t:T].discounted_sum(0.9, until=d[t:T])
