"""REINFORCE with Monte Carlo returns and a batch-mean baseline (`algorithms/reinforce.py`) against its eager twin
(`benchmarks/eager_reinforce.py`): CartPole-v1, a 64-64 tanh policy, one Adam step per iteration."""

from __future__ import annotations

from algorithms import reinforce
from benchmarks.eager_reinforce import train_eager
from benchmarks.zoo import from_curve

SIZES = [(8, 256), (64, 256)]


def run_timerl(envs: int, steps: int, iterations: int, backend: str, seed: int = 0) -> dict:
    return from_curve(reinforce.train(iterations=iterations, num_envs=envs, steps=steps, backend=backend, seed=seed))


def run_eager(envs: int, steps: int, iterations: int, seed: int = 0) -> dict:
    out: dict = {"seconds": [], "cpu_seconds": [], "returns": []}
    train_eager(iterations, envs, steps, seed=seed, device="cpu", seconds=out["seconds"],
                cpu_seconds=out["cpu_seconds"], mean_returns=out["returns"])
    return out
