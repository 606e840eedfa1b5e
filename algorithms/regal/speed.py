"""``python -m algorithms.regal speed``: the compiled decoder against the NumPy one (the oracle), decoding
one BRKGA population (100 chromosomes) of uniform random keys on synthetic graphs of several sizes, and a
whole uniform BRKGA-5K run with each; one core, best of ``repeats``."""

from __future__ import annotations

import time

import numpy as np

from algorithms.regal import brkga, data
from algorithms.regal.perfmodel import chromosome_length, evaluate, objective


def _best(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(sizes: tuple[int, ...] = (100, 200, 300), repeats: int = 3, budget: int = 5000) -> list[dict]:
    rows = []
    for ops in sizes:
        graph = data.generate(1, 1, (ops, ops), seed=ops)[0]
        population = np.random.default_rng(0).random((100, chromosome_length(graph)))
        evaluate(graph, population[:1])  # compiles (or loads numba's cache) outside the timing
        fast = _best(lambda: evaluate(graph, population), repeats)
        slow = _best(lambda: evaluate(graph, population, engine="numpy"), repeats)
        length = chromosome_length(graph)
        fast_run = _best(lambda: brkga.optimize(graph, "runtime", budget), 1)
        slow_run = _best(lambda: brkga.run(lambda c: objective(graph, c, "runtime", engine="numpy"), length,
                                           budget), 1)
        rows.append({"ops": ops, "compiled_per_s": 100 / fast, "numpy_per_s": 100 / slow, "speedup": slow / fast,
                     "brkga_compiled_s": fast_run, "brkga_numpy_s": slow_run})
    return rows


def markdown(rows: list[dict], budget: int = 5000) -> str:
    lines = ["| ops | compiled decodings/s | NumPy decodings/s | speedup | BRKGA-{0} compiled | BRKGA-{0} NumPy |"
             .format(f"{budget // 1000}K"), "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r['ops']} | {r['compiled_per_s']:,.0f} | {r['numpy_per_s']:,.0f} | {r['speedup']:.0f}x | "
              f"{r['brkga_compiled_s']:.2f} s | {r['brkga_numpy_s']:.1f} s |" for r in rows]
    return "\n".join(lines)
