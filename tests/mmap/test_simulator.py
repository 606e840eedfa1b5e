"""The event-level latency simulator on hand-derived timelines, and against the reward model's latency."""

import numpy as np
import pytest

from algorithms.mmap.baselines import AGENTS
from algorithms.mmap.check import check_mapping
from algorithms.mmap.game import COPY, MMapGame
from algorithms.mmap.mapping import mapping_latency, mapping_records
from algorithms.mmap.problem import build_problem, with_copy_setup
from algorithms.mmap.simulator import DmaSpec, Transfer, mapping_transfers, simulate, simulate_mapping
from mmap_handmade import US
from mmap_handmade import problem as handmade_problem

# 1 byte per microsecond, no latency: a copy of n bytes takes n microseconds
SLOW_DMA = DmaSpec(bandwidth=1e6, latency_seconds=0.0)


def test_no_copies_is_the_sum_of_durations():
    timeline = simulate([1.0, 2.0, 3.0], [], SLOW_DMA)
    assert timeline.latency_us == 6.0 and timeline.stall_us == 0.0
    assert timeline.starts_us.tolist() == [0.0, 1.0, 3.0]


def test_a_prefetch_hidden_behind_compute_costs_nothing():
    # issued at 0, takes 2 us, needed by instruction 2, which starts at 1 + 2 = 3
    timeline = simulate([1.0, 2.0, 3.0], [Transfer(2, -1, 2)], SLOW_DMA)
    assert timeline.latency_us == 6.0 and timeline.copy_busy_us == 2.0


def test_a_late_prefetch_stalls_its_instruction():
    # issued when instruction 0 ends (t = 1), takes 5 us: instruction 2 waits until 6 instead of 3
    timeline = simulate([1.0, 2.0, 3.0], [Transfer(5, 0, 2)], SLOW_DMA)
    assert timeline.starts_us.tolist() == [0.0, 1.0, 6.0]
    assert timeline.latency_us == 9.0 and timeline.stall_us == 3.0


def test_copies_queue_on_one_engine_and_run_side_by_side_on_two():
    transfers = [Transfer(4, -1, 1), Transfer(4, -1, 1)]
    one = simulate([1.0, 1.0], transfers, SLOW_DMA)
    assert one.starts_us.tolist() == [0.0, 8.0] and one.latency_us == 9.0
    two = simulate([1.0, 1.0], transfers, DmaSpec(bandwidth=1e6, latency_seconds=0.0, engines=2))
    assert two.starts_us.tolist() == [0.0, 4.0] and two.latency_us == 5.0


def test_latency_delays_each_copy_but_overlaps_the_queue():
    # both issued at 0; the first byte moves at 0.5; the engine carries 0.5..2.5 then 2.5..4.5
    dma = DmaSpec(bandwidth=1e6, latency_seconds=0.5e-6)
    timeline = simulate([1.0, 1.0, 1.0], [Transfer(2, -1, 1), Transfer(2, -1, 2)], dma)
    assert timeline.starts_us.tolist() == [0.0, 2.5, 4.5] and timeline.copy_busy_us == 4.0
    # issued when instruction 0 ends (t = 3): 3.5..5.5
    timeline = simulate([3.0, 1.0, 1.0], [Transfer(2, 0, 2)], dma)
    assert timeline.starts_us.tolist() == [0.0, 3.0, 5.5]


def test_an_eviction_starts_after_its_producer_and_can_delay_the_end():
    # instruction 0 ends at 2, the eviction runs 2..7 and must be done by the program's end (instruction 2 ends at 4)
    timeline = simulate([2.0, 1.0, 1.0], [Transfer(5, 0, 3)], SLOW_DMA)
    assert timeline.ends_us[-1] == 4.0 and timeline.latency_us == 7.0
    # needed by instruction 2 instead: it waits for the eviction
    timeline = simulate([2.0, 1.0, 1.0], [Transfer(5, 0, 2)], SLOW_DMA)
    assert timeline.starts_us.tolist() == [0.0, 2.0, 7.0] and timeline.latency_us == 8.0


def test_a_copy_issued_later_waits_for_the_queue_ahead_of_it():
    # first copy occupies the engine 0..6; the second (issued at 1) runs 6..8; instruction 3 waits until 8
    timeline = simulate([1.0, 1.0, 1.0, 1.0], [Transfer(6, -1, 3), Transfer(2, 0, 3)], SLOW_DMA)
    assert timeline.starts_us.tolist() == [0.0, 1.0, 2.0, 8.0]


def test_malformed_transfers_are_refused():
    with pytest.raises(ValueError, match="needed by"):
        simulate([1.0], [Transfer(1, 0, 0)], SLOW_DMA)


@pytest.mark.parametrize("agent", ["heuristic", "random"])
def test_with_free_copies_the_simulation_is_the_reward_models_latency(agent):
    problem = build_problem("mlp_sgd")
    result = AGENTS[agent](problem, seed=0, budget=2 * problem.num_buffers)
    free = DmaSpec(bandwidth=1e30, latency_seconds=0.0)
    assert simulate_mapping(problem, result.mapping, free).latency_us == pytest.approx(
        mapping_latency(problem, result.mapping), rel=1e-12)
    real = simulate_mapping(problem, result.mapping)
    assert real.latency_us >= mapping_latency(problem, result.mapping) - 1e-9
    copies = [r for r in result.mapping if r["action"] == "copy"]
    assert len(mapping_transfers(problem, result.mapping)) == len(copies)


def test_prefetch_and_eviction_of_a_mapping_are_placed_by_their_intervals():
    problem = build_problem("mlp_sgd")
    records = [
        {"index": 0, "action": "copy", "offset": 0, "is_output": False, "size": 64, "target_time": 5, "start": 2,
         "end": 5},
        {"index": 1, "action": "copy", "offset": 0, "is_output": True, "size": 128, "target_time": 3, "start": 3,
         "end": 7},
        {"index": 2, "action": "nocopy", "offset": 64, "is_output": False, "size": 64, "target_time": 4, "start": 3,
         "end": 4},
        {"index": 3, "action": "drop", "offset": None, "is_output": False, "size": 64, "target_time": 4,
         "start": None, "end": None},
    ]
    assert mapping_transfers(problem, records) == [Transfer(64, 1, 5), Transfer(128, 3, 8)]


def test_an_infeasible_game_is_the_all_slow_program():
    problem = build_problem("mlp_sgd")
    assert simulate_mapping(problem, None).latency_us == pytest.approx(problem.latency_all_slow)
    assert np.isclose(simulate_mapping(problem, None).stall_us, 0.0)


def test_a_copy_setup_time_widens_the_copy_window_and_removes_the_stall():
    # instructions of 3, 3 and 1 us (supplies 3, 3, 1); input a (2 bytes: 2 us of bytes) read at time 2
    base = handmade_problem([3, 3, 1], [("a", None, 2, False, 2, (0, 2))])
    setup = with_copy_setup(base, 1.5e-6)
    assert base.demand == (2 * US,) and setup.demand == (int(3.5 * US),)
    assert setup.supply.tolist() == base.supply.tolist() and setup.initial_benefit == base.initial_benefit
    dma = DmaSpec(bandwidth=1e6, latency_seconds=1.5e-6)
    # bytes only: the window is instruction 1 (3 us >= 2 us); issued at 3, first byte at 4.5, done at 6.5,
    # instruction 2 waits 0.5 us. With the setup 3.5 us need instructions 0 and 1: issued at 0, done at 3.5
    for problem, start, stall in ((base, 1, 0.5), (setup, 0, 0.0)):
        game = MMapGame(problem)
        game.play(COPY)
        records = mapping_records(game)
        assert records[0]["action"] == "copy" and records[0]["start"] == start
        check_mapping(base, records)  # valid in the bytes-only game too
        assert simulate_mapping(base, records, dma).stall_us == pytest.approx(stall)


def test_a_copy_setup_time_leaves_zero_size_buffers_without_demand():
    base = handmade_problem([1, 1], [("a", None, 0, False, 1, (0, 1)), ("b", None, 1, False, 1, (0, 1))])
    assert with_copy_setup(base, 0.5e-6).demand == (0, US + US // 2)
    with pytest.raises(ValueError, match="negative"):
        with_copy_setup(base, -1.0)
