"""n-step A2C (`algorithms/a2c.py --n-step 5`: returns from the windows ``r[t:min(t + 5, T)]``, bootstrapped where
no episode ends inside) against its eager twin; otherwise as `a2c_gae`."""

from __future__ import annotations

from algorithms import a2c
from benchmarks.zoo import from_curve
from benchmarks.zoo.a2c_gae import train_eager

SIZES = [(8, 256), (64, 256)]
N_STEP = 5


def run_timerl(envs: int, steps: int, iterations: int, backend: str, seed: int = 0) -> dict:
    return from_curve(a2c.train(iterations=iterations, num_envs=envs, steps=steps, n_step=N_STEP, backend=backend,
                                seed=seed))


def run_eager(envs: int, steps: int, iterations: int, seed: int = 0) -> dict:
    return train_eager(envs, steps, iterations, seed, n_step=N_STEP)
