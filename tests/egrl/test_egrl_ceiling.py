"""The LP bound on latency against every mapping of small workloads, enumerated (9^3 = 729 maps)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_egrl_chip import three_layers

from algorithms.egrl.ceiling import latency_bound, speedup_ceiling
from algorithms.egrl.chip import SRAM, Chip


def valid_latencies(chip: Chip) -> list[float]:
    latencies = []
    for levels in itertools.product(range(3), repeat=6):
        weights, acts = np.array(levels[:3]), np.array(levels[3:])
        if chip.repair(weights, acts).valid:
            latencies.append(chip.latency(weights, acts, noisy=False))
    return latencies


@pytest.mark.parametrize("weight_bytes,act_bytes,weight_reads", [
    ((0.0, 2e6, 1e6), (1e6, 1e6, 4e5), None),            # SRAM binds
    ((0.0, 3e6, 2.5e6), (1e6, 1.5e6, 4e5), None),        # SRAM binds more
    ((0.0, 2e7, 1e7), (3e6, 2e6, 1e6), None),            # LLC binds too
    ((0.0, 2e7, 1e7), (3e6, 2e6, 1e6), (0.0, 1e5, 1e7))])  # an embedding: reads 1e5 of its 2e7 bytes
def test_bound_is_below_every_valid_mapping(weight_bytes, act_bytes, weight_reads):
    chip = Chip(three_layers(weight_bytes, act_bytes, weight_reads=weight_reads), noise=0.0)
    best = min(valid_latencies(chip))
    bound = latency_bound(chip)
    assert bound <= best * (1 + 1e-9)
    assert bound >= 0.5 * best  # and not vacuous


def test_bound_is_exact_when_everything_fits_in_sram():
    chip = Chip(three_layers((0.0, 1e6, 5e5), (5e5, 5e5, 2e5)), noise=0.0)
    sram = np.full(3, SRAM)
    assert chip.repair(sram, sram).valid
    assert latency_bound(chip) == pytest.approx(chip.latency(sram, sram, noisy=False), rel=1e-6)
    baseline, _, ceiling = speedup_ceiling(chip)
    assert ceiling == pytest.approx(baseline / chip.latency(sram, sram, noisy=False), rel=1e-6)
