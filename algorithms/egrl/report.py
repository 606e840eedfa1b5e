"""The Fig. 3 table: each method's speedup over every declared compiler baseline and its fraction of the exact
optimum's gain, mean ± std over seeds, from runs as `bench` records them (``runs.jsonl``: method, workload,
seed, and the best map's noise-free latency) and the optimum as ``python -m algorithms.egrl ceiling --exact
--json`` writes it.

``python -m algorithms.egrl report RUNS.jsonl [RUNS2.jsonl ...] --optimum optimum.json`` prints the markdown.
"""

from __future__ import annotations

import argparse

import numpy as np

from algorithms.egrl.ceiling import gain_fraction
from algorithms.egrl.chip import BASELINES
from timerl.errors import FileFormatError
from timerl.files import parse_json, read_bytes, read_json

PAPER = {"egrl": (1.28, 1.78, 1.66), "ea": (1.06, 1.47, 1.64), "greedy": (0.72, 1.27, 0.67),
         "pg": (0.29, 0.23, 0.21)}
PAPER_WORKLOADS = ("resnet50", "resnet101", "bert")
TITLES = {"resnet50": "ResNet-50", "resnet101": "ResNet-101", "bert": "BERT-large-128", "bert_base": "BERT-base-128"}
METHOD_NAMES = {"egrl": "EGRL", "ea": "EA alone", "pg": "PG alone", "greedy": "Greedy-DP",
                "compiler": "liveness compiler"}


def read_runs(paths: list[str]) -> dict[tuple[str, str], dict[int, float]]:
    """``{(method, workload): {seed: latency}}``; a later file's run replaces an earlier one's."""
    runs: dict[tuple[str, str], dict[int, float]] = {}
    for path in paths:
        for number, line in enumerate(read_bytes(path, "runs file").decode("utf-8", "replace").splitlines(), 1):
            if line.strip():
                record = parse_json(line, f"{path}:{number}", "run record")
                if not isinstance(record, dict) or not {"method", "workload", "seed"} <= set(record):
                    raise FileFormatError(f"{path}:{number}: a run record has method, workload, seed and latency")
                if record.get("latency") is not None:
                    runs.setdefault((record["method"], record["workload"]), {})[record["seed"]] = record["latency"]
    return runs


def method_name(method: str) -> str:
    """``egrl`` -> ``EGRL``; a variant ``egrl@label`` (a run of the method under other settings) -> ``EGRL
    (label)``."""
    base, _, label = method.partition("@")
    name = METHOD_NAMES.get(base, base)
    return f"{name} ({label})" if label else name


def _cell(values: list[float], digits: int = 2) -> str:
    return f"{np.mean(values):.{digits}f} ± {np.std(values):.{digits}f}" if values else "-"


def workload_table(workload: str, runs: dict, optimum: dict, methods: list[str]) -> str:
    """One workload's markdown table: a row per method, per baseline its speedup and fraction of the optimum's
    gain; the optimum's row gives the largest speedup any map reaches."""
    baselines = optimum["baselines"]
    best = optimum["optimum"]
    header = "| method | n | " + " | ".join(f"speedup vs {b} | fraction vs {b}" for b in BASELINES) + " | paper |"
    lines = [header, "|" + "---|" * (3 + 2 * len(BASELINES))]
    for method in methods:
        latencies = list(runs.get((method, workload), {}).values())
        if not latencies:
            continue
        cells = []
        for name in BASELINES:
            base = baselines[name]["latency"]
            cells.append(_cell([base / latency for latency in latencies]))
            cells.append(_cell([gain_fraction(base, latency, best) for latency in latencies]))
        paper = PAPER.get(method)  # a variant ran under other settings than the paper's
        paper_cell = f"{paper[PAPER_WORKLOADS.index(workload)]:.2f}" if paper and workload in PAPER_WORKLOADS else ""
        lines.append(f"| {method_name(method)} | {len(latencies)} | " + " | ".join(cells) +
                     f" | {paper_cell} |")
    optimum_cells = []
    for name in BASELINES:
        optimum_cells += [f"**{baselines[name]['latency'] / best:.2f}**", "1"]
    gap = optimum.get("optimum_gap", 0.0)
    label = "*optimum (MILP)*" + (f" (gap {gap:.1e})" if gap > 1e-9 else "")
    lines.append(f"| {label} | | " + " | ".join(optimum_cells) + " | |")
    latencies_us = ", ".join(f"{name} {baselines[name]['latency'] * 1e6:.1f}" for name in BASELINES)
    lines.append("")
    lines.append(f"Latencies (µs): {latencies_us}; optimum {best * 1e6:.1f}.")
    return "\n".join(lines)


def targets(runs: dict, optima: dict) -> str:
    """The issue's targets per workload: EGRL's mean above EA's and PG's (the same under every baseline: a
    ratio of latencies), EGRL's fraction of the optimum's gain per baseline (target >= 0.9), and EGRL's speedup
    over the static compiler (target >= 1.2) beside the most the optimum allows."""
    header = ("| workload | EGRL > EA alone | EGRL > PG alone | " +
              " | ".join(f"EGRL fraction vs {b}" for b in BASELINES) + " | EGRL vs static (optimum) |")
    lines = [header, "|" + "---|" * (4 + len(BASELINES))]
    for workload, optimum in optima.items():
        egrl = list(runs.get(("egrl", workload), {}).values())
        if not egrl:
            continue
        mean = {m: np.mean(list(runs[(m, workload)].values())) for m in ("egrl", "ea", "pg")
                if (m, workload) in runs}
        above = ["yes" if m in mean and mean["egrl"] < mean[m] else ("-" if m not in mean else "**no**")
                 for m in ("ea", "pg")]
        best = optimum["optimum"]
        fractions = []
        for name in BASELINES:
            base = optimum["baselines"][name]["latency"]
            value = np.mean([gain_fraction(base, latency, best) for latency in egrl])
            fractions.append(f"{value:.2f}" if value >= 0.9 else f"**{value:.2f}**")
        static = optimum["baselines"]["static"]["latency"]
        speedup = np.mean([static / latency for latency in egrl])
        cell = f"{speedup:.2f} ({static / best:.2f})"
        lines.append(f"| {TITLES.get(workload, workload)} | {above[0]} | {above[1]} | " + " | ".join(fractions) +
                     f" | {cell if speedup >= 1.2 else '**' + cell + '**'} |")
    return "\n".join(lines)


def report(run_paths: list[str], optimum_path: str, methods: list[str]) -> str:
    runs = read_runs(run_paths)
    optima = read_json(optimum_path, "ceiling file")
    if not isinstance(optima, dict) or not isinstance(optima.get("workloads"), dict):
        raise FileFormatError(f"{optimum_path}: a ceiling file (python -m algorithms.egrl ceiling --json) holds "
                              "a 'workloads' object")
    optima = optima["workloads"]
    goals = targets(runs, optima)
    sections = ["Targets (bold: not met)\n\n" + goals] if goals.count("\n") > 1 else []
    for workload, optimum in optima.items():
        if any(workload == w for _, w in runs):
            sections.append(f"### {TITLES.get(workload, workload)}\n\n" + workload_table(workload, runs, optimum,
                                                                                          methods))
    return "\n\n".join(sections)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m algorithms.egrl report", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="runs.jsonl files of `bench`")
    parser.add_argument("--optimum", required=True, help="the JSON of `ceiling --exact --json`")
    parser.add_argument("--methods", nargs="+", default=["egrl", "ea", "pg", "greedy", "compiler"],
                        help="rows, in order; a variant METHOD@LABEL is a run recorded under that name")
    args = parser.parse_args(argv)
    text = report(args.runs, args.optimum, args.methods)
    print(text)
    return text


if __name__ == "__main__":
    main()
