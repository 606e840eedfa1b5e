"""The chip simulator and its compiler against latencies and capacities derived by hand."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.egrl.chip import CAPACITY, DRAM, LLC, SRAM, Chip, Workload, compiler_mapping

DRAM_BW, LLC_BW, SRAM_BW = 67.2e9, 672e9, 6720e9  # the documented constants, restated


def three_layers(weight_bytes=(0.0, 2e6, 1e6), act_bytes=(1e6, 1e6, 4e5), skip=True, ops=(0.0, 5e7, 5e7),
                 weight_reads=None):
    edges = [(0, 1), (1, 2)] + ([(0, 2)] if skip else [])
    return Workload("toy", np.array(ops), np.array(weight_bytes), np.array(act_bytes), 0.0,
                    np.array(edges, dtype=np.int64), None if weight_reads is None else np.array(weight_reads))


def test_latency_all_dram_by_hand():
    chip = Chip(three_layers(), noise=0.0)
    zeros = np.zeros(3, dtype=np.int64)
    by_hand = (1e6 + (2e6 + 1e6 + 1e6) + (1e6 + 4e5 + 1e6 + 1e6)) / DRAM_BW  # each layer memory-bound
    assert chip.latency(zeros, zeros) == pytest.approx(by_hand, rel=1e-12)


def test_latency_mixed_levels_by_hand():
    chip = Chip(three_layers(), noise=0.0)
    weights, acts = np.array([DRAM, SRAM, LLC]), np.array([SRAM, LLC, DRAM])
    layer0 = 1e6 / SRAM_BW
    layer1 = 2e6 / SRAM_BW + 1e6 / LLC_BW + 1e6 / SRAM_BW
    layer2 = 1e6 / LLC_BW + 4e5 / DRAM_BW + 1e6 / LLC_BW + 1e6 / SRAM_BW
    assert chip.repair(weights, acts).valid
    assert chip.latency(weights, acts) == pytest.approx(layer0 + layer1 + layer2, rel=1e-12)


def test_embedding_reads_its_rows_but_stores_its_table():
    # layer 1 is a 20 MB table of which an inference reads 1e5 bytes: the time counts the rows, capacity the table
    chip = Chip(three_layers(weight_bytes=(0.0, 2e7, 1e6), weight_reads=(0.0, 1e5, 1e6), ops=(0, 0, 0)), noise=0.0)
    weights, acts = np.array([DRAM, LLC, DRAM]), np.array([SRAM, SRAM, SRAM])
    layer0 = 1e6 / SRAM_BW
    layer1 = 1e5 / LLC_BW + 1e6 / SRAM_BW + 1e6 / SRAM_BW
    layer2 = 1e6 / DRAM_BW + 1e6 / SRAM_BW + 1e6 / SRAM_BW + 4e5 / SRAM_BW
    assert chip.repair(weights, acts).valid
    assert chip.latency(weights, acts) == pytest.approx(layer0 + layer1 + layer2, rel=1e-12)
    assert not chip.repair(np.array([DRAM, SRAM, DRAM]), acts).valid  # the table does not fit in SRAM


def test_compute_bound_layer_takes_compute_time():
    chip = Chip(three_layers(ops=(0.0, 5e9, 0.0)), noise=0.0)
    sram = np.full(3, SRAM)
    layer1_compute = 5e9 / 50e12
    assert layer1_compute > (2e6 + 2e6) / SRAM_BW
    expected = 1e6 / SRAM_BW + layer1_compute + (1e6 + 4e5 + 2e6) / SRAM_BW
    weights = np.array([SRAM, SRAM, SRAM])
    assert chip.latency(weights, sram) == pytest.approx(expected, rel=1e-12)


def test_disjoint_lifetimes_share_sram_overlapping_do_not():
    big = 3e6  # two of them exceed SRAM's 4 MiB
    chain = three_layers(weight_bytes=(0, 0, 0), act_bytes=(big, 1e3, big), skip=False)
    chip = Chip(chain, noise=0.0)
    dram = np.zeros(3, dtype=np.int64)
    assert chip.repair(dram, np.array([SRAM, DRAM, SRAM])).valid  # act 0 dies at step 1, act 2 born at 2
    overlapping = Chip(three_layers(weight_bytes=(0, 0, 0), act_bytes=(big, big, 1e3), skip=False), noise=0.0)
    repair = overlapping.repair(dram, np.array([SRAM, SRAM, DRAM]))
    assert not repair.valid
    assert repair.epsilon == pytest.approx(big / (2 * big + 1e3))
    assert sorted(repair.acts[:2].tolist()) == [LLC, SRAM]


def test_repair_demotes_largest_and_reports_epsilon():
    chip = Chip(three_layers(weight_bytes=(0.0, 3e6, 2e6)), noise=0.0)
    repair = chip.repair(np.array([DRAM, SRAM, SRAM]), np.zeros(3, dtype=np.int64))
    total = 3e6 + 2e6 + 1e6 + 1e6 + 4e5
    assert repair.weights.tolist() == [DRAM, LLC, SRAM]
    assert repair.epsilon == pytest.approx(3e6 / total)
    assert chip.repair(repair.weights, repair.acts).valid


def test_repair_cascades_sram_overflow_into_full_llc():
    # 22 MiB of weights in LLC plus the 3 MiB weight SRAM sheds overflow LLC's 24 MiB: the largest goes on
    mib = 2.0**20
    chip = Chip(three_layers(weight_bytes=(22 * mib, 3 * mib, 2 * mib), act_bytes=(mib, mib, mib)), noise=0.0)
    repair = chip.repair(np.array([LLC, SRAM, SRAM]), np.array([SRAM, DRAM, DRAM]))
    assert repair.weights.tolist() == [DRAM, LLC, SRAM]
    assert repair.epsilon == pytest.approx((22 + 3) / (22 + 3 + 2 + 3))
    usage = chip.usage(repair.weights, repair.acts)
    assert np.all(usage[1:] <= CAPACITY[1:, None])


def test_compiler_mapping_is_valid_and_leaves_weights_out_of_sram():
    rng = np.random.default_rng(0)
    n = 40
    edges = np.array([(k, k + 1) for k in range(n - 1)] + [(k, k + 3) for k in range(n - 3)], dtype=np.int64)
    workload = Workload("random", rng.uniform(1e6, 1e9, n), rng.uniform(0, 4e6, n), rng.uniform(1e4, 3e6, n),
                        0.0, edges)
    chip = Chip(workload, noise=0.0)
    weights, acts = compiler_mapping(chip)
    assert chip.repair(weights, acts).valid
    assert not np.any(weights == SRAM)
    assert np.any(acts == SRAM) and np.any(weights == LLC)


def test_measurement_noise_is_small_and_centered():
    chip = Chip(three_layers(), noise=0.01, seed=3)
    zeros = np.zeros(3, dtype=np.int64)
    exact = chip.latency(zeros, zeros, noisy=False)
    samples = np.array([chip.latency(zeros, zeros) for _ in range(2000)]) / exact
    assert abs(samples.mean() - 1) < 2e-3 and 0.008 < samples.std() < 0.012
