"""EGRL against EA alone on ResNet-50 at a small budget, measured as the fraction of the exact optimum's gain over
the liveness compiler (the Fig. 3 table's measure); every map found stays at or above the optimum's latency."""

from __future__ import annotations

import numpy as np

from algorithms.egrl.ceiling import exact_optimum, gain_fraction
from algorithms.egrl.chip import Chip, compiler_mapping
from algorithms.egrl.learners import Settings, run
from algorithms.egrl.workloads import load


def test_egrl_closes_more_of_the_optimums_gain_than_ea_on_resnet50():
    graph = load("resnet50")
    chip = Chip(graph.workload, noise=0.0)
    baseline = chip.latency(*compiler_mapping(chip), noisy=False)
    optimum = exact_optimum(chip, gap=0.0).latency
    # 600 evaluations (the bench spends 4,000), one gradient step per generation; the reference backend compiles
    # the learner in seconds
    settings = Settings(budget=600, generations_per_step=1, backend="reference")
    fractions = {method: [] for method in ("egrl", "ea")}
    for seed in (0, 1):
        for method in fractions:
            result = run(method, graph, seed, settings)
            latency = chip.latency(result.mapping[:, 0], result.mapping[:, 1], noisy=False)
            assert latency >= optimum * (1 - 1e-9)  # no map beats the MILP's
            fractions[method].append(gain_fraction(baseline, latency, optimum))
    assert np.mean(fractions["egrl"]) > np.mean(fractions["ea"])
