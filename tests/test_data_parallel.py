"""Data-parallel programs (``ctx.compile(..., backend="jax", devices=N)``, `timerl.backends.jax_sharded`):
results equal one device's within float tolerance, and the bad requests refused with a `TimeRLError`. The
multi-device runs happen in a fresh process with four virtual CPU devices (`tests/data_parallel_check.py`):
jax reads its device count only before its first import, which this suite has already done."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import timerl as trl
from data_parallel_check import BATCH, ITERATIONS, regression

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def split_runs() -> dict:
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "data_parallel_check.py")], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_gradient_reduced_across_devices_equals_the_reference(split_runs):
    want = regression("reference")  # the NumPy reference interpreter, one process, no devices
    for devices in ("1", "2", "4"):
        got = split_runs["regression"][devices]
        np.testing.assert_allclose(got["grads"], want["grads"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got["weights"], want["weights"], rtol=1e-12, atol=1e-12)
    for devices in (2, 4):  # the samples entered split across the devices, once per iteration
        placed = split_runs["regression"][str(devices)]["devices"]
        assert placed["devices"] == devices and placed["batch"] == BATCH
        assert placed["placed"]["split"] == 2 * ITERATIONS  # features and targets
        where = split_runs["regression"][str(devices)]["placement"]
        assert where["residual"] == [devices, False]  # a per-sample value: each device holds its share
        assert where["grad"] == [devices, True]  # the gradient, summed across them: every device holds it all


def test_ppo_on_two_devices_equals_one_device(split_runs):
    one, two = split_runs["ppo"]["1"], split_runs["ppo"]["2"]
    assert one["devices"] is None and two["devices"]["batch"] == 4  # split="envs": the environments' count
    assert two["devices"]["placed"]["split"] > 0
    np.testing.assert_allclose(two["curve"], one["curve"], rtol=1e-4, atol=1e-6)


def small_program():
    ctx = trl.Context("i")
    (i,), (I,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.ones((6, 2)), (6, 2), "float32", (i,))
        x.sum().sink(lambda p, v: None)
    return ctx, I


@pytest.mark.parametrize("backend", ["torch", "reference"])
def test_devices_run_on_jax_only(backend):
    ctx, I = small_program()
    with pytest.raises(trl.TimeRLError, match="test_data_parallel.py:.*jax backend only"):
        ctx.compile({I: 2}, backend=backend, devices=2, split=6)


@pytest.mark.parametrize("options, message", [
    ({"devices": 4, "split": 6}, "cannot share evenly"),
    ({"devices": 2}, "steps no gymnasium environments"),
    ({"devices": 2, "split": "batch"}, "split= is"),
    ({"devices": 2, "split": 5}, "no source or UDF output of this program has an axis of length 5"),
    ({"devices": 0, "split": 6}, "devices= is a positive int"),
    ({"devices": 2, "split": 6, "device_memory": 1 << 20}, "budget of one device"),
    ({"devices": 6, "split": 6}, "devices=6, but jax has"),
])
def test_bad_device_requests_are_refused(options, message):
    ctx, I = small_program()
    with pytest.raises(trl.TimeRLError, match=message):
        ctx.compile({I: 2}, backend="jax", **options)
