"""The exact optimum (HiGHS's MILP) against exhaustive search over every map of small random workloads."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from algorithms.egrl.ceiling import exact_optimum, gain_fraction, latency_bound
from algorithms.egrl.ceiling import main as ceiling_main
from algorithms.egrl.chip import BASELINES, Chip, Workload, compiler_mapping
from algorithms.egrl.spec import spec_from_dict
from algorithms.egrl.workloads import load

MIB = 2.0**20


def small_chip(overlap: str) -> dict:
    return {"capacity_bytes": {"DRAM": 2**30, "LLC": 3 * MIB, "SRAM": 1 * MIB},
            "bandwidth_bytes_per_second": {"DRAM": 67.2e9, "LLC": 672e9, "SRAM": 6.72e12},
            "compute_ops_per_second": 50e12, "dtype": "int8", "overlap": overlap}


def random_workload(rng: np.random.Generator, n: int) -> Workload:
    edges = {(k, k + 1) for k in range(n - 1)} | {(a, b) for a in range(n) for b in range(a + 2, n)
                                                  if rng.random() < 0.3}
    ops = rng.uniform(0, 3e8, n) * (rng.random(n) < 0.7)  # some layers compute-bound, some memory-bound
    weights = rng.uniform(0.1, 2.0, n) * MIB * (rng.random(n) < 0.8)
    acts = rng.uniform(0.05, 1.0, n) * MIB
    return Workload("random", ops, weights, acts, float(rng.uniform(0, 0.5) * MIB),
                    np.array(sorted(edges), dtype=np.int64))


def exhaustive(chip: Chip) -> float:
    """The least noise-free latency over all 9^n maps the compiler leaves as they are."""
    n = chip.workload.size
    best = np.inf
    for levels in itertools.product(range(3), repeat=2 * n):
        weights, acts = np.array(levels[:n]), np.array(levels[n:])
        usage = chip.usage(weights, acts)
        if np.all(usage[1:] <= chip.capacity[1:, None]):
            best = min(best, chip.latency(weights, acts, noisy=False))
    return best


@pytest.mark.parametrize("seed,overlap", [(0, "max"), (1, "max"), (2, "max"), (3, "sum"), (4, "sum")])
def test_optimum_equals_exhaustive_search(seed, overlap):
    rng = np.random.default_rng(seed)
    chip = Chip(random_workload(rng, 4), noise=0.0, spec=spec_from_dict(small_chip(overlap)))
    best = exhaustive(chip)
    optimum = exact_optimum(chip, gap=0.0)
    assert optimum.latency == pytest.approx(best, rel=1e-9)
    weights, acts = optimum.mapping[:, 0], optimum.mapping[:, 1]
    assert chip.repair(weights, acts).valid
    assert latency_bound(chip) <= best * (1 + 1e-9)
    assert optimum.lower <= best * (1 + 1e-9)


def test_optimum_never_undercuts_compute_time():
    # a compute-bound workload: every layer's time is its compute, whatever the map; in seconds, HiGHS's 1e-7
    # feasibility tolerance would be a tenth of a layer's time
    rng = np.random.default_rng(7)
    workload = random_workload(rng, 4)
    workload = Workload("compute", np.full(4, 5e9), workload.weight_bytes, workload.act_bytes, 0.0, workload.edges)
    chip = Chip(workload, noise=0.0, spec=spec_from_dict(small_chip("max")))
    optimum = exact_optimum(chip, gap=0.0)
    assert optimum.latency == pytest.approx(4 * 5e9 / 50e12, rel=1e-12)
    assert optimum.lower >= chip.compute_seconds.sum() * (1 - 1e-9)


def test_gain_fraction():
    assert gain_fraction(10.0, 8.0, 6.0) == pytest.approx(0.5)
    assert gain_fraction(10.0, 6.0, 6.0) == pytest.approx(1.0)
    assert gain_fraction(10.0, 11.0, 6.0) == pytest.approx(-0.25)
    assert np.isnan(gain_fraction(6.0, 6.0, 6.0))


def test_ceiling_command_on_resnet50(tmp_path):
    out = tmp_path / "optimum.json"
    ceiling_main(["resnet50", "--exact", "--json", str(out)])
    row = json.loads(out.read_text())["workloads"]["resnet50"]
    chip = Chip(load("resnet50").workload, noise=0.0)
    mapping = np.array(row["optimum_mapping"])
    assert chip.repair(mapping[:, 0], mapping[:, 1]).valid
    assert row["optimum"] == pytest.approx(chip.latency(mapping[:, 0], mapping[:, 1], noisy=False), rel=1e-12)
    assert chip.compute_seconds.sum() <= row["optimum_lower"] <= row["optimum"]  # no layer beats its compute
    for name in BASELINES:
        compiler = chip.latency(*compiler_mapping(chip, name), noisy=False)
        assert row["baselines"][name]["latency"] == pytest.approx(compiler)
        assert row["baselines"][name]["exact_ceiling"] == pytest.approx(compiler / row["optimum"])
        assert compiler >= row["optimum"]
