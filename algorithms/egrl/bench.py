"""``python -m algorithms.egrl bench``: the paper's Fig. 3 table (speedup over the compiler, mean ± std over
seeds) for every method and workload, learning curves as PNG, and the best EGRL mapping as a picture."""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from algorithms import local_ray
from algorithms.egrl.chip import Chip, compiler_mapping
from algorithms.egrl.learners import METHODS, Result, Settings, run
from algorithms.egrl.plot import plot_curves, plot_mapping
from algorithms.egrl.workloads import load

PAPER = {"egrl": (1.28, 1.78, 1.66), "ea": (1.06, 1.47, 1.64), "greedy": (0.72, 1.27, 0.67),
         "pg": (0.29, 0.23, 0.21), "compiler": (1.0, 1.0, 1.0)}
WORKLOADS = ("resnet50", "resnet101", "bert")


def table(results: dict[tuple[str, str], list[Result]], methods: list[str], workloads: list[str]) -> str:
    header = f"{'method':10s}" + "".join(f"{w:>24s}" for w in workloads)
    lines = [header, "-" * len(header)]
    for method in methods:
        cells = []
        for workload in workloads:
            speedups = [r.speedup for r in results.get((method, workload), [])]
            paper = PAPER[method][WORKLOADS.index(workload)] if workload in WORKLOADS else float("nan")
            cells.append(f"{np.mean(speedups):6.2f} ± {np.std(speedups):4.2f} (paper {paper:4.2f})"
                         if speedups else f"{'-':>24s}")
        lines.append(f"{method:10s}" + "".join(f"{c:>24s}" for c in cells))
    return "\n".join(lines)


def bench(methods: list[str], workloads: list[str], seeds: int, settings: Settings, out: str) -> str:
    os.makedirs(out, exist_ok=True)
    results: dict[tuple[str, str], list[Result]] = {}
    for workload in workloads:
        graph = load(workload)
        for method in methods:
            for seed in range(seeds):
                started = time.perf_counter()
                result = run(method, graph, seed, settings)
                results.setdefault((method, workload), []).append(result)
                _keep(result, out)
                timing = "".join(f", {k} {v:.0f}" for k, v in result.extra.items())
                print(f"{workload:10s} {method:8s} seed {seed}: speedup {result.speedup:.3f} "
                      f"({time.perf_counter() - started:.0f} s{timing})", flush=True)
        curves = {m: [r.curve for r in results[(m, workload)]] for m in methods if m != "compiler"}
        plot_curves(curves, settings.budget, f"{workload}: best speedup over the compiler",
                    os.path.join(out, f"curves_{workload}.png"))
        _plot_best(results, workload, graph, out)
        done = workloads[:workloads.index(workload) + 1]
        text = table(results, methods, done)  # written after every workload, so a long run keeps its results
        with open(os.path.join(out, "results.json"), "w") as handle:
            json.dump({f"{m}/{w}": [r.speedup for r in rs] for (m, w), rs in results.items()}, handle, indent=1)
        with open(os.path.join(out, "table.txt"), "w") as handle:
            handle.write(text + "\n")
    return text


def _keep(result: Result, out: str) -> None:
    """Appends the run (speedup, curve, best map) to ``runs.jsonl`` as soon as it ends: the tables and pictures
    are written per workload, and a bench stopped before a workload's last method would otherwise lose them."""
    mapping = None if result.mapping is None else result.mapping.tolist()
    record = {"method": result.method, "workload": result.workload, "seed": result.seed, "speedup": result.speedup,
              "curve": result.curve, "mapping": mapping}
    with open(os.path.join(out, "runs.jsonl"), "a") as handle:
        handle.write(json.dumps(record) + "\n")


def _plot_best(results, workload: str, graph, out: str) -> None:
    runs = [r for r in results.get(("egrl", workload), []) if r.mapping is not None]
    if not runs:
        return
    best = max(runs, key=lambda r: r.speedup)
    weights, acts = compiler_mapping(Chip(graph.workload, noise=0.0))
    plot_mapping(best.mapping, np.stack([weights, acts], axis=1), graph.names,
                 f"{workload}: best EGRL mapping (speedup {best.speedup:.2f}) and the compiler's",
                 os.path.join(out, f"mapping_{workload}.png"))


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m algorithms.egrl bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+", default=["egrl", "ea", "pg", "greedy", "compiler"],
                        choices=METHODS)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget", type=int, default=4000, help="simulator evaluations per run")
    parser.add_argument("--generations-per-step", type=int, default=5,
                        help="population generations per gradient step of the RT learner")
    parser.add_argument("--backend", default="torch", choices=("reference", "torch", "jax"))
    parser.add_argument("--workers", type=int, default=0,
                        help="local Ray actors for the population's evaluations (0: in this process; same results)")
    local_ray.add_address_argument(parser)
    parser.add_argument("--out", default="results/egrl", help="folder for the PNGs, table.txt, results.json")
    args = parser.parse_args(argv)
    local_ray.use_address(getattr(args, "ray_address", None))
    settings = Settings(budget=args.budget, generations_per_step=args.generations_per_step, backend=args.backend,
                        workers=args.workers)
    text = bench(args.methods, args.workloads, args.seeds, settings, args.out)
    print(f"\nSpeedup over the compiler, mean ± std over {args.seeds} seeds, {args.budget} evaluations each")
    print(text)
    return text
