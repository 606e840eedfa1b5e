"""``python -m algorithms.egrl bench``: the paper's Fig. 3 table (speedup over the liveness compiler, mean ± std
over seeds) for every method and workload, learning curves as PNG, and the best EGRL mapping as a picture and
as JSON. Every run goes to ``runs.jsonl`` with its best map's latency, from which `report` gives the speedup
over every declared baseline and the fraction of the exact optimum's gain."""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from algorithms import local_ray
from algorithms.egrl import report
from algorithms.egrl.chip import Chip, compiler_mapping
from algorithms.egrl.learners import METHODS, Result, Settings, run
from algorithms.egrl.mapping import mapping_record
from algorithms.egrl.plot import plot_curves, plot_mapping
from algorithms.egrl.spec import DEFAULT_PATH, load_spec
from algorithms.egrl.workloads import WORKLOADS, load

PAPER = {"egrl": (1.28, 1.78, 1.66), "ea": (1.06, 1.47, 1.64), "greedy": (0.72, 1.27, 0.67),
         "pg": (0.29, 0.23, 0.21), "compiler": (1.0, 1.0, 1.0)}
PAPER_WORKLOADS = ("resnet50", "resnet101", "bert")


def table(results: dict[tuple[str, str], list[Result]], methods: list[str], workloads: list[str]) -> str:
    header = f"{'method':10s}" + "".join(f"{w:>24s}" for w in workloads)
    lines = [header, "-" * len(header)]
    for method in methods:
        cells = []
        for workload in workloads:
            speedups = [r.speedup for r in results.get((method, workload), [])]
            paper = (f"(paper {PAPER[method][PAPER_WORKLOADS.index(workload)]:4.2f})"
                     if workload in PAPER_WORKLOADS else " " * 12)
            cells.append(f"{np.mean(speedups):6.2f} ± {np.std(speedups):4.2f} {paper}" if speedups else f"{'-':>24s}")
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
                _keep(result, settings, graph, out)
                timing = "".join(f", {k} {v:.0f}" for k, v in result.extra.items())
                print(f"{workload:10s} {method:8s} seed {seed}: speedup {result.speedup:.3f} "
                      f"({time.perf_counter() - started:.0f} s{timing})", flush=True)
        curves = {m: [r.curve for r in results[(m, workload)]] for m in methods if m != "compiler"}
        plot_curves(curves, settings.budget, f"{workload}: best speedup over the compiler",
                    os.path.join(out, f"curves_{workload}.png"))
        _plot_best(results, workload, graph, settings, out)
        done = workloads[:workloads.index(workload) + 1]
        text = table(results, methods, done)  # written after every workload, so a long run keeps its results
        with open(os.path.join(out, "results.json"), "w") as handle:
            json.dump({f"{m}/{w}": [r.speedup for r in rs] for (m, w), rs in results.items()}, handle, indent=1)
        with open(os.path.join(out, "table.txt"), "w") as handle:
            handle.write(text + "\n")
    return text


def _keep(result: Result, settings: Settings, graph, out: str) -> None:
    """Appends the run (speedup, the best map's noise-free latency, curve, best map) to ``runs.jsonl`` as soon as
    it ends: the tables and pictures are written per workload, and a bench stopped before a workload's last
    method would otherwise lose them."""
    mapping = None if result.mapping is None else result.mapping.tolist()
    latency = None
    if result.mapping is not None:
        chip = Chip(graph.workload, noise=0.0, spec=settings.chip)
        latency = chip.latency(result.mapping[:, 0], result.mapping[:, 1], noisy=False)
    record = {"method": result.method, "workload": result.workload, "seed": result.seed, "speedup": result.speedup,
              "latency": latency, "curve": result.curve, "mapping": mapping}
    with open(os.path.join(out, "runs.jsonl"), "a") as handle:
        handle.write(json.dumps(record) + "\n")


def _plot_best(results, workload: str, graph, settings: Settings, out: str) -> None:
    """The best map of the best method run (EGRL's when it ran) as ``mapping_<workload>.png`` and ``.json``."""
    method = "egrl" if ("egrl", workload) in results else next(
        (m for m in METHODS if (m, workload) in results and m != "compiler"), None)
    runs = [r for r in results.get((method, workload), []) if r.mapping is not None]
    if not runs:
        return
    best = max(runs, key=lambda r: r.speedup)
    chip = Chip(graph.workload, noise=0.0, spec=settings.chip)
    weights, acts = compiler_mapping(chip)
    plot_mapping(best.mapping, np.stack([weights, acts], axis=1), graph.names,
                 f"{workload}: best {method} mapping (speedup {best.speedup:.2f}) and the compiler's",
                 os.path.join(out, f"mapping_{workload}.png"))
    with open(os.path.join(out, f"mapping_{workload}.json"), "w") as handle:
        json.dump(mapping_record(graph, best.mapping, chip, f"{method} seed {best.seed}"), handle, indent=1)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m algorithms.egrl bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", nargs="+", default=["egrl", "ea", "pg", "greedy", "compiler"],
                        choices=METHODS)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget", type=int, default=4000, help="simulator evaluations per run")
    parser.add_argument("--generations-per-step", type=int, default=5,
                        help="population generations per gradient step of the RT learner")
    parser.add_argument("--steps-per-generation", type=int, default=1,
                        help="gradient steps of the RT learner per generation (20: about one per evaluation, the "
                             "paper's rate; needs --generations-per-step 1)")
    parser.add_argument("--chip", default=DEFAULT_PATH, help="the chip's JSON file (default: the NNP-I's)")
    parser.add_argument("--optimum", help="the JSON of `ceiling --exact --json` for this chip: the run ends with "
                                          "`report`'s tables (every baseline, fraction of the optimum's gain)")
    parser.add_argument("--backend", default="torch", choices=("reference", "torch", "jax"))
    parser.add_argument("--workers", type=int, default=0,
                        help="local Ray actors for the population's evaluations (0: in this process; same results)")
    local_ray.add_address_argument(parser)
    parser.add_argument("--out", default="results/egrl", help="folder for the PNGs, table.txt, results.json")
    args = parser.parse_args(argv)
    local_ray.use_address(getattr(args, "ray_address", None))
    if args.steps_per_generation > 1 and args.generations_per_step > 1:
        parser.error("--steps-per-generation above 1 needs --generations-per-step 1")
    settings = Settings(budget=args.budget, generations_per_step=args.generations_per_step,
                        steps_per_generation=args.steps_per_generation, backend=args.backend, workers=args.workers,
                        chip=load_spec(args.chip))
    text = bench(args.methods, args.workloads, args.seeds, settings, args.out)
    print(f"\nSpeedup over the compiler, mean ± std over {args.seeds} seeds, {args.budget} evaluations each")
    print(text)
    if args.optimum:
        tables = report.report([os.path.join(args.out, "runs.jsonl")], args.optimum, args.methods)
        print("\nEvery baseline and the fraction of the optimum's gain:\n" + tables)
        with open(os.path.join(args.out, "report.md"), "w") as handle:
            handle.write(tables + "\n")
    return text
