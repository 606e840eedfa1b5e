"""timerl's PPO (`algorithms.ppo`) against CleanRL-style eager PyTorch PPO (`benchmarks.eager_ppo`) on CartPole:
the learning curves of a few seeds each, same configuration, both with environments that keep running across
iterations.

    python -m benchmarks.ppo_curves --seeds 3 --iterations 30 --figure docs/figures/ppo_curves.png

Prints each seed's mean episode return over the last quarter of the run, per implementation, and the mean
and standard deviation across seeds; ``--figure`` draws the per-iteration mean return (mean over seeds, with
the range)."""

from __future__ import annotations

import argparse

import numpy as np
import torch

from algorithms.ppo import train
from benchmarks.eager_ppo import train_eager

CONFIG = dict(num_envs=4, steps=128, epochs=4, minibatches=4, lr=1e-3, hidden=64)


def curves(seeds: int, iterations: int) -> dict[str, np.ndarray]:
    """Mean return per iteration, (seeds, iterations), for timerl and for eager PyTorch."""
    torch.set_num_threads(1)
    timerl_rows, eager_rows = [], []
    for seed in range(seeds):
        timerl_rows.append([row["mean_return"] for row in train("CartPole-v1", iterations, seed=seed, **CONFIG)])
        eager = train_eager("CartPole-v1", iterations, seed=seed, warmup=0, **CONFIG)
        eager_rows.append([row["mean_return"] for row in eager["curve"]])
    return {"timerl": np.array(timerl_rows), "eager": np.array(eager_rows)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--figure", default=None)
    args = parser.parse_args(argv)
    results = curves(args.seeds, args.iterations)
    tail = max(1, args.iterations // 4)
    for name, rows in results.items():
        finals = rows[:, -tail:].mean(axis=1)
        print(f"{name:7s} last {tail} iterations' mean return per seed: {np.round(finals, 1).tolist()}  "
              f"mean {finals.mean():.1f} +- {finals.std(ddof=1) if len(finals) > 1 else 0.0:.1f}")
    if args.figure:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axis = plt.subplots(figsize=(6, 3.5))
        steps = (np.arange(args.iterations) + 1) * CONFIG["num_envs"] * CONFIG["steps"]
        for name, rows in results.items():
            axis.plot(steps, rows.mean(axis=0), label=f"{name} (mean of {len(rows)} seeds)")
            axis.fill_between(steps, rows.min(axis=0), rows.max(axis=0), alpha=0.2)
        axis.set_xlabel("environment steps")
        axis.set_ylabel("mean episode return")
        axis.set_title("PPO on CartPole-v1, persistent environments")
        axis.legend()
        figure.tight_layout()
        figure.savefig(args.figure, dpi=120)


if __name__ == "__main__":
    main()
