import numpy as np
import pytest

from algorithms.mmap.costmodel import HardwareSpec, latency_table, program_latency
from mmap_handmade import ROUND_HARDWARE, US, problem


def test_roofline_table_of_two_buffers():
    # flops 9 us of compute; two 8-byte operands: 8 us each from slow memory, 2 us from fast memory.
    table = latency_table(9.0, [8, 8], 0, ROUND_HARDWARE)
    assert table.tolist() == pytest.approx([16.0, 10.0, 10.0, 9.0])


def test_default_hardware_is_tpu_like():
    hardware = HardwareSpec()
    assert hardware.fast_bandwidth / hardware.slow_bandwidth == pytest.approx(4.0)
    table = latency_table(0.0, [614_000], 0, hardware)
    assert table[0] == pytest.approx(0.5 + 1.0)  # overhead + 614 kB at 614 GB/s, in microseconds
    assert table[1] == pytest.approx(0.5 + 0.25)


def test_benefits_supply_and_demand_follow_appendix_a():
    p = problem([9], [(0, None, 8, False, 0, (0, 0)), (1, None, 8, False, 0, (0, 0))])
    assert p.initial_benefit == pytest.approx((6.0, 6.0))  # L({}) - L({b}) = 16 - 10
    assert p.supply.tolist() == [9 * US]  # L(B(I)) = 9
    assert p.demand == (8 * US, 8 * US)  # size / copy bandwidth
    assert p.latency_all_slow == pytest.approx(16.0)
    assert p.latency_all_fast == pytest.approx(9.0)


def test_only_the_eight_largest_buffers_get_slots():
    sizes = [5, 1, 9, 2, 7, 3, 8, 4, 6, 10]
    p = problem([0], [(t, None, size, False, 0, (0, 0)) for t, size in enumerate(sizes)], fast_memory_bytes=64)
    unslotted = [b for b in range(len(sizes)) if p.slot[b] < 0]
    assert [sizes[b] for b in unslotted] == [1, 2]
    assert all(p.initial_benefit[b] == 0.0 for b in unslotted)
    assert sorted(p.slot[b] for b in range(len(sizes)) if p.slot[b] >= 0) == list(range(8))
    # The two unslotted buffers always count at slow bandwidth: 3 us on top of the slotted ones.
    assert p.latency_tables[0][0] == pytest.approx(sum(sizes))
    assert p.latency_tables[0][-1] == pytest.approx(3 + (sum(sizes) - 3) / 4)


def test_program_latency_sums_instruction_tables():
    p = problem([9, 1], [(0, None, 8, False, 0, (0, 1)), (1, None, 8, False, 0, (0, 0)),
                         (0, None, 8, False, 1, (0, 1))])
    assert program_latency(p.latency_tables, p.target, p.slot, [False] * 3) == pytest.approx(16 + 8)
    assert program_latency(p.latency_tables, p.target, p.slot, [True, False, True]) == pytest.approx(10 + 2)
    assert isinstance(p.latency_tables[0], np.ndarray)
