"""Peak device memory of REINFORCE against the iteration length T, with running gradient sums
(``incrementalize=True``: `timerl.pdg.incrementalize` plus the memory-aware schedule) and without.

    python -m benchmarks.reinforce_memory [--steps 100 200 400] [--iterations 3]

Prints a Markdown table: peak device bytes and seconds per iteration, torch backend, point by point
(``vectorize=False``, as with a memory budget) and, for reference, the default vectorized run; on a GPU also
the CUDA allocator's peak during the run (`benchmarks.window_memory.cuda_peak`).
"""

from __future__ import annotations

import argparse
import time

from algorithms.reinforce import train
from benchmarks.window_memory import cuda_peak

SETTINGS = (
    ("running sums", dict(incrementalize=True, vectorize=False)),
    ("one sum at the end", dict(incrementalize=False, vectorize=False)),
    ("default (vectorized, no running sums)", dict()),
)


def measure(steps: int, n_step: int | None, iterations: int, num_envs: int, options: dict) -> tuple[int, float]:
    stats: dict = {}
    started = time.perf_counter()
    curve = train(iterations=iterations, num_envs=num_envs, steps=steps, n_step=n_step, backend="torch",
                  stats=stats, compile_options=options)
    later = [row["iteration_seconds"] for row in curve[1:]] if len(curve) > 1 else []
    per_iteration = sum(later) / len(later) if later else (time.perf_counter() - started) / iterations
    return stats["peak_device_bytes"], per_iteration


def arguments(argv: list[str] | None, description: str) -> argparse.Namespace:
    """The sizes both REINFORCE memory benchmarks sweep (this one and `benchmarks.eager_memory`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, nargs="+", default=[100, 200, 400])
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--num-envs", type=int, default=16)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv, __doc__.split("\n\n")[0])
    print("| returns | schedule | " + " | ".join(f"T = {t}" for t in args.steps) + " | peak at last T / first T |")
    print("|---|---|" + "---|" * len(args.steps) + "---|")
    for n_step in (8, None):
        for name, options in SETTINGS:
            cells, peaks = [], []
            for steps in args.steps:
                (peak, seconds), held = cuda_peak(lambda: measure(steps, n_step, args.iterations, args.num_envs,
                                                                  options))
                peaks.append(peak)
                cells.append(f"{peak / 1e6:.3f} MB, {seconds:.3f} s/it"
                             + ("" if held is None else f", CUDA {held / 1e6:.3f} MB"))
            ratio = peaks[-1] / peaks[0]
            returns = "Monte Carlo" if n_step is None else f"{n_step}-step"
            print(f"| {returns} | {name} | " + " | ".join(cells) + f" | {ratio:.2f} |", flush=True)


if __name__ == "__main__":
    main()
