"""`timerl bench zoo`: every algorithm of the zoo (`benchmarks/zoo`), timerl on torch and on jax against its eager
PyTorch twin, side by side in one process: torch pinned to one thread, wall and CPU seconds per iteration as the
median over the iterations after the first (the warm-up, which pays jax's compiles), the mean episode return of
the last iteration beside them."""

from __future__ import annotations

import statistics
import time

import torch

from benchmarks import zoo

BACKENDS = ("torch", "jax")


def measure(module, envs: int, steps: int, iterations: int, seed: int = 0) -> dict[str, dict]:
    """Eager, then timerl on each backend, at one size: name -> medians, last return, total seconds."""
    rows = {}
    runs = [("eager", lambda: module.run_eager(envs, steps, iterations, seed))]
    runs += [(backend, lambda backend=backend: module.run_timerl(envs, steps, iterations, backend, seed))
             for backend in BACKENDS]
    for name, run in runs:
        started = time.perf_counter()
        result = run()
        timed = slice(1, None) if len(result["seconds"]) > 1 else slice(None)
        rows[name] = {"wall": statistics.median(result["seconds"][timed]),
                      "cpu": statistics.median(result["cpu_seconds"][timed]),
                      "return": result["returns"][-1], "total": time.perf_counter() - started}
    return rows


def main(iterations: int = 5, all_sizes: bool = False, names: list[str] | None = None) -> dict:
    """Print the table (markdown) and return the measurements by (algorithm, size)."""
    torch.set_num_threads(1)
    found = {}
    print("Seconds per iteration: the median over the iterations after the first, one process, torch on one thread; "
          "ratios are timerl's over eager's (below 1: timerl faster); return: the mean episode return of the last "
          f"iteration ({iterations} iterations, seed 0).\n")
    print("| algorithm | envs x steps | eager s (CPU s) | timerl torch s (CPU s) | torch / eager (CPU) | "
          "timerl jax s (CPU s) | jax / eager (CPU) | returns eager / torch / jax |")
    print("|---|---|---|---|---|---|---|---|")
    for name, module in zoo.modules().items():
        if names and name not in names:
            continue
        for envs, steps in (module.SIZES if all_sizes else module.SIZES[:1]):
            rows = found[(name, envs, steps)] = measure(module, envs, steps, iterations)
            eager = rows["eager"]
            cells = [f"{eager['wall']:.3f} ({eager['cpu']:.3f})"]
            for backend in BACKENDS:
                row = rows[backend]
                cells += [f"{row['wall']:.3f} ({row['cpu']:.3f})",
                          f"{row['wall'] / eager['wall']:.2f}x ({row['cpu'] / eager['cpu']:.2f}x)"]
            returns = " / ".join(f"{rows[k]['return']:.1f}" for k in ("eager", *BACKENDS))
            print(f"| {name} | {envs} x {steps} | {' | '.join(cells)} | {returns} |", flush=True)
    return found
