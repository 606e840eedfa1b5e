"""Run by `tests/test_data_parallel.py` in a fresh process with several virtual CPU devices (jax reads
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` only before its first import): programs compiled with
``devices=1, 2, 4``; prints their results as JSON on the last line of stdout."""

from __future__ import annotations

import json
import sys

import numpy as np

import timerl as trl
from algorithms import ppo

BATCH, FEATURES, ITERATIONS = 8, 3, 4
LOSSES = ("policy_loss", "value_loss", "entropy", "approx_kl", "mean_return")


def regression_data() -> tuple[np.ndarray, np.ndarray]:
    generator = np.random.default_rng(7)
    return generator.normal(size=(ITERATIONS, BATCH, FEATURES)), generator.normal(size=(ITERATIONS, BATCH))


def regression(backend: str, **options) -> dict:
    """SGD on the mean squared error of a linear model over a batch of ``BATCH`` samples from a source: the
    gradient of the mean sums over the batch, split across the devices."""
    x, y = regression_data()
    ctx = trl.Context("i")
    (i,), (I,) = ctx.dims, ctx.bounds
    weights: dict = {}
    grads: dict = {}
    placement: dict = {}
    with ctx:
        w = trl.param(np.array([0.5, -0.25, 1.0]), dtype="float64")
        features = trl.source(lambda p: x[p["i"]], (BATCH, FEATURES), "float64", (i,))
        target = trl.source(lambda p: y[p["i"]], (BATCH,), "float64", (i,))
        residual = (features @ w - target)
        (residual * residual).mean().backward()
        w.sink(lambda p, v: weights.__setitem__(p["i"], np.asarray(v).tolist()))
        w.grad.sink(lambda p, v: grads.__setitem__(p["i"], np.asarray(v).tolist()))
        # where the values live: the backend's own arrays (native sinks)
        residual.sink(lambda p, v: placement.__setitem__("residual", _placement(v)), native=True)
        w.grad.sink(lambda p, v: placement.__setitem__("grad", _placement(v)), native=True)
        trl.optim.SGD([w], 0.1).step()
    executable = ctx.compile({I: ITERATIONS}, backend=backend, **options)
    executable.execute()
    return {"weights": [weights[k] for k in range(ITERATIONS)], "grads": [grads[k] for k in range(ITERATIONS)],
            "devices": executable.stats.get("devices"), "placement": placement}


def _placement(value) -> list:
    """[number of devices holding ``value``, whether each holds all of it] (a NumPy array: [0, True])."""
    sharding = getattr(value, "sharding", None)
    return [0, True] if sharding is None else [len(sharding.device_set), bool(sharding.is_fully_replicated)]


def ppo_run(devices: int) -> dict:
    stats: dict = {}
    curve = ppo.train(iterations=2, num_envs=4, steps=8, epochs=1, minibatches=2, hidden=8, backend="jax",
                      compile_options={"devices": devices}, stats=stats)
    return {"curve": [[row[name] for name in LOSSES] for row in curve], "devices": stats.get("devices")}


def main() -> None:
    result = {"regression": {str(n): regression("jax", devices=n, split=BATCH) for n in (1, 2, 4)},
              "ppo": {str(n): ppo_run(n) for n in (1, 2)}}
    json.dump(result, sys.stdout)
    print()


if __name__ == "__main__":
    main()
