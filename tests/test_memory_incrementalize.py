"""Running gradient sums (issue 9, item 1; paper §5.3 and §6.3): with ``incrementalize=True`` a parameter's
gradient is summed step by step, so no per-step contribution outlives its step, and learning at step ``t``
runs as soon as the steps it reads exist. Results are compared with the reference interpreter and with the
pass off; peaks are compared across sequence lengths against bounds derived from the program's sizes."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl
from algorithms.reinforce import train
from timerl.pdg.incrementalize import incrementalize
from timerl.compile import optimize_pdg
from timerl.runtime.batch import CHUNK_POINTS

POINT = 256  # float32 elements: 1 KiB per point
KIB = POINT * 4


def parameter_program(values: list):
    """w[i] is trained by SGD on sum_t sum(w * w * x[i, t]); x[i, t] is 1 KiB per step."""
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        w = trl.param(trl.tensor(np.linspace(0.5, 1.5, POINT, dtype=np.float32)), domain=(i,))
        x = trl.source(lambda p: np.full(POINT, 0.01 * (p["t"] % 7) + 0.001 * p["i"], np.float32),
                       shape=(POINT,), dtype="float32", domain=(i, t))
        (w * w * x).sum().backward()
        trl.optim.SGD([w], lr=0.05).step()
        w.sink(lambda p, v: values.append(np.asarray(v).copy()))
    return ctx, I, T


def run_parameter_program(steps: int, backend: str = "torch", **options):
    values: list = []
    ctx, I, T = parameter_program(values)
    exe = ctx.compile({I: 3, T: steps}, backend=backend, **options)
    exe.execute()
    return exe, np.stack(values)


def expected_parameters(steps: int) -> np.ndarray:
    """SGD by hand: d/dw sum_t sum(w * w * x_t) = 2 w sum_t x_t."""
    w = np.linspace(0.5, 1.5, POINT, dtype=np.float64)
    rows = [w.copy()]
    for i in range(2):
        total = sum(0.01 * (t % 7) + 0.001 * i for t in range(steps))
        w = w - 0.05 * 2 * w * total
        rows.append(w.copy())
    return np.stack(rows)


def test_pass_rewrites_whole_range_gradient_reads_into_running_sums():
    ctx, I, T = parameter_program([])
    graph = optimize_pdg(ctx.graph(), {I: 3, T: 8}, trl.CompileOptions(incrementalize=False))
    rewritten = incrementalize(graph)
    running = [n for n in rewritten.nodes if n.op == "merge" and n.attrs.get("running") == "t"]
    assert running, str(rewritten)
    whole = [e for n in rewritten.nodes if n.op == "grad_accumulate" for e in n.inputs if e.ranges()]
    assert not whole, str(rewritten)  # no gradient reads a whole range of steps any more
    assert incrementalize(rewritten) is rewritten  # nothing left to rewrite


@pytest.mark.parametrize("options", [dict(incrementalize=True, vectorize=False), dict(incrementalize=True),
                                     dict(incrementalize=False, vectorize=False)])
def test_parameter_program_agrees_with_hand_derived_sgd_and_reference(options):
    _, values = run_parameter_program(12, **options)
    _, reference = run_parameter_program(12, backend="reference")
    np.testing.assert_allclose(values, expected_parameters(12), rtol=1e-5)
    np.testing.assert_allclose(values, reference, rtol=1e-6)


def test_running_sums_on_jax_agree_with_hand_derived_sgd():
    _, values = run_parameter_program(12, backend="jax", incrementalize=True, vectorize=False)
    np.testing.assert_allclose(values, expected_parameters(12), rtol=1e-5)


def test_running_sums_keep_the_peak_independent_of_steps():
    short = run_parameter_program(16, incrementalize=True, vectorize=False)[0].stats["peak_device_bytes"]
    long = run_parameter_program(256, incrementalize=True, vectorize=False)[0].stats["peak_device_bytes"]
    # live at once: w and its square, x[t], the contribution at t, the running sum before and after, the
    # gradient and the update: a dozen 1 KiB points at most, whatever T is
    assert short <= 12 * KIB, short
    assert long == short, (short, long)
    whole = run_parameter_program(256, incrementalize=False, vectorize=False)[0].stats["peak_device_bytes"]
    assert whole >= 256 * KIB  # one sum at the end keeps every step's contribution


def test_running_sums_keep_the_peak_independent_of_steps_when_loops_run_batched():
    """The same with vectorized loops (the default): the loop holding the running sum is distributed, the
    contributions batched and the sum point by point; the batched statements run in chunks of at most
    `CHUNK_POINTS` points (`timerl.runtime.batch.chunk_points`), so the peak stays that of a chunk, whatever T
    is (all 512 steps at once kept every contribution alive: 512 KiB and more)."""
    batched = trl.CompileOptions(incrementalize=True, vectorize=True, distribute=True, fusion=True)
    runs = {steps: run_parameter_program(steps, options=batched) for steps in (128, 512)}
    short, long = (runs[steps][0].stats["peak_device_bytes"] for steps in (128, 512))
    assert long == short, (short, long)
    # x[t] and the contribution at t at every point of one chunk, and a few points besides (w, the running sum)
    assert short <= (2 * CHUNK_POINTS + 6) * KIB, short
    assert runs[512][0].stats["batched_statements"] > 0  # still batched
    np.testing.assert_allclose(runs[512][1], expected_parameters(512), rtol=1e-5)


def test_incrementalize_is_checked_like_the_other_flags():
    ctx, I, T = parameter_program([])
    with pytest.raises(trl.TimeRLError, match="incrementalize= is True or False"):
        ctx.compile({I: 2, T: 4}, backend="torch", incrementalize="yes")


def _reinforce(steps: int, **options) -> tuple[list, int]:
    stats: dict = {}
    curve = train(iterations=3, num_envs=4, steps=steps, n_step=4, hidden=16, backend="torch", stats=stats,
                  compile_options=dict(vectorize=False, **options))
    return curve, stats["peak_device_bytes"]


def test_n_step_reinforce_peak_follows_n_not_T():
    curves, peaks = {}, {}
    for steps in (24, 96):
        curves[steps], peaks[steps] = _reinforce(steps, incrementalize=True)
    # what may grow with T: the logging sink reads every step's rewards and episode ends, which share their
    # point with the observation (4 envs x (4 float32 + a float32 reward + a bool end))
    per_step = 4 * (4 * 4 + 4 + 1)
    assert peaks[96] - peaks[24] <= (96 - 24) * per_step, peaks
    whole_curve, whole_peak = _reinforce(96, incrementalize=False)
    # without running sums every step keeps its 16 x 16 float32 weight gradient (and more) to the end
    assert whole_peak - peaks[96] >= (96 - 24) * 16 * 16 * 4, (whole_peak, peaks)
    assert curves[96] and [(r["mean_length"], r["mean_return"]) for r in curves[96]] == [
        (r["mean_length"], r["mean_return"]) for r in whole_curve]


def run_sum_over_steps(steps: int, **options):
    """s[i] = sum over t of y[i, t] = 2 (t / 2 + i), a user's whole-range reduction."""
    values: list = []
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.full(POINT, p["t"] * 0.5 + p["i"], np.float32), shape=(POINT,),
                       dtype="float32", domain=(i, t))
        (x * 2.0)[i, 0:T].sum(0).sink(lambda p, v: values.append(np.asarray(v).copy()))
    exe = ctx.compile({I: 2, T: steps}, **options)
    exe.execute()
    expected = [np.full(POINT, steps * (steps - 1) / 2 + 2 * k * steps, np.float32) for k in range(2)]
    np.testing.assert_allclose(np.stack(values), np.stack(expected), rtol=1e-6)
    return exe.stats.get("peak_device_bytes", 0)


@pytest.mark.parametrize("backend", ["reference", "torch"])
def test_whole_range_sums_run_as_running_sums(backend):
    options = {} if backend == "reference" else dict(incrementalize=True, vectorize=False)
    short = run_sum_over_steps(16, backend=backend, **options)
    long = run_sum_over_steps(128, backend=backend, **options)
    if backend == "torch":
        assert long == short <= 4 * KIB, (short, long)  # x[t] * 2, the sum before and after: 3 points
        assert run_sum_over_steps(128, backend="torch", incrementalize=False, vectorize=False) >= 128 * KIB
