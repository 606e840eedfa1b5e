"""The chip as a data file (`spec`) and the declared family of compiler baselines, against values by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_egrl_chip import DRAM_BW, LLC_BW, SRAM_BW, three_layers

from algorithms.egrl.chip import BASELINES, CAPACITY, DRAM, LLC, SRAM, Chip, Workload, compiler_mapping
from algorithms.egrl.spec import NNPI, ChipSpecError, load_spec, spec_from_dict


def nnpi_dict(**changes) -> dict:
    data = NNPI.to_json()
    data.update(changes)
    return data


def test_default_file_is_the_nnpi():
    assert NNPI.capacity == (32 * 2**30, 24 * 2**20, 4 * 2**20)
    assert NNPI.bandwidth == pytest.approx((DRAM_BW, LLC_BW, SRAM_BW))
    assert NNPI.compute == 50e12 and NNPI.dtype == "int8" and NNPI.overlap == "max"
    assert spec_from_dict(NNPI.to_json()) == NNPI


def test_dtype_scales_bytes_and_overlap_sum_adds_compute():
    zeros = np.zeros(3, dtype=np.int64)
    by_hand = (1e6 + (2e6 + 1e6 + 1e6) + (1e6 + 4e5 + 1e6 + 1e6)) / DRAM_BW  # int8, memory-bound: the chip test's
    half = Chip(three_layers(), noise=0.0, spec=spec_from_dict(nnpi_dict(dtype="float16")))
    assert half.latency(zeros, zeros) == pytest.approx(2 * by_hand, rel=1e-12)
    assert half.bytes.sum() == pytest.approx(2 * (3e6 + 2.4e6))
    summed = Chip(three_layers(), noise=0.0, spec=spec_from_dict(nnpi_dict(overlap="sum")))
    assert summed.latency(zeros, zeros) == pytest.approx(by_hand + 1e8 / 50e12, rel=1e-12)


@pytest.mark.parametrize("change,message", [
    ({"dtype": "int4"}, "dtype"), ({"overlap": "partial"}, "overlap"),
    ({"capacity_bytes": {"DRAM": 1, "LLC": 0, "SRAM": 1}}, "capacity_bytes.LLC"),
    ({"bandwidth_bytes_per_second": {"DRAM": 1, "LLC": 1}}, "bandwidth_bytes_per_second")])
def test_bad_chip_files_are_refused_by_name(tmp_path, change, message):
    path = tmp_path / "mychip.json"
    path.write_text(json.dumps(nnpi_dict(**change)))
    with pytest.raises(ChipSpecError, match=f"mychip.json.*{message}"):
        load_spec(str(path))
    path.write_text("{not json")
    with pytest.raises(ChipSpecError, match="mychip.json"):
        load_spec(str(path))


def test_the_three_baselines_by_hand():
    # a chain: activations 3e6, 1e3, 3e6 bytes; weights 0, 2e6, 1e6; SRAM 4 MiB, LLC 5e6 bytes
    chain = three_layers(weight_bytes=(0.0, 2e6, 1e6), act_bytes=(3e6, 1e3, 3e6), skip=False)
    capacities = {"DRAM": 2**30, "LLC": 5e6, "SRAM": 4 * 2**20}
    chip = Chip(chain, noise=0.0, spec=spec_from_dict(nnpi_dict(capacity_bytes=capacities)))
    maps = {name: [m.tolist() for m in compiler_mapping(chip, name)] for name in BASELINES}
    # liveness: activation 0 is dead when activation 2 is born, so all three share SRAM; the weights fit LLC
    assert maps["liveness"] == [[LLC, LLC, LLC], [SRAM, SRAM, SRAM]]
    # static: activation 2 finds SRAM held by 0 and 1 and takes 3e6 of LLC, leaving 2e6: weights 1 fit, 2 do not
    assert maps["static"] == [[LLC, LLC, DRAM], [SRAM, SRAM, LLC]]
    # layer-wise: the weights take LLC as their layers come, so activation 2 finds neither SRAM nor LLC
    assert maps["layerwise"] == [[LLC, LLC, LLC], [SRAM, SRAM, DRAM]]
    with pytest.raises(ValueError, match="unknown baseline"):
        compiler_mapping(chip, "optimal")


def test_every_baseline_is_valid_and_keeps_weights_out_of_sram():
    rng = np.random.default_rng(0)
    n = 40
    edges = np.array([(k, k + 1) for k in range(n - 1)] + [(k, k + 3) for k in range(n - 3)], dtype=np.int64)
    workload = Workload("random", rng.uniform(1e6, 1e9, n), rng.uniform(0, 4e6, n), rng.uniform(1e4, 3e6, n),
                        0.0, edges)
    chip = Chip(workload, noise=0.0)
    for name in BASELINES:
        weights, acts = compiler_mapping(chip, name)
        assert chip.repair(weights, acts).valid
        assert not np.any(weights == SRAM)
        held = chip.usage(weights, acts)
        assert np.all(held[1:] <= CAPACITY[1:, None])
        if name != "liveness":  # without reuse, what each level holds over the whole run fits it
            levels = np.concatenate([acts, weights])
            for level in (LLC, SRAM):
                assert chip.bytes[levels == level].sum() <= CAPACITY[level]
    assert DRAM == 0
