"""`timerl bench`'s seconds per iteration (issue 8): the median of the timed iterations on both sides, so that one
slow iteration (another process's burst on shared cores) does not move a row; the long recurrence's value."""

from __future__ import annotations

import statistics

import pytest

from algorithms.reinforce import train
from benchmarks.eager_reinforce import train_eager
from benchmarks.long_recurrence import measure
from benchmarks.__main__ import WARM_UP, _after_first, _warm_up_and_rest


def test_timerl_rows_are_the_median_after_the_warm_up_iterations():
    seconds = [3.0, 0.8] + [0.10, 0.11, 0.90, 0.09, 0.12]  # warm-up, then one slow timed iteration
    first, per_iteration = _warm_up_and_rest([{"iteration_seconds": s} for s in seconds])
    assert WARM_UP == 2 and first == pytest.approx(3.8)
    assert per_iteration == 0.11


def test_interleaved_rounds_count_each_runs_iterations_after_its_first():
    # a curve two runs of 3 iterations long: the second run's first row counts the other rows' runs in between
    curve = [{"iteration_seconds": s, "iteration_cpu_seconds": s / 2} for s in (3.0, 0.8, 0.1, 5.0, 0.11, 0.12)]
    assert _after_first(curve, 3) == ([0.11, 0.12], [0.055, 0.06])
    assert _after_first(curve[:3], 3) == ([0.8, 0.1], [0.4, 0.05])


def test_eager_records_each_iterations_seconds():
    seconds: list[float] = []
    cpu_seconds: list[float] = []
    mean = train_eager(iterations=3, num_envs=2, steps=5, seconds=seconds, cpu_seconds=cpu_seconds)
    assert len(seconds) == 3 and all(s > 0 for s in seconds)
    assert len(cpu_seconds) == 3 and all(s > 0 for s in cpu_seconds)
    assert statistics.mean(seconds) <= mean + 1e-9  # the mean also counts the loop between iterations


def test_long_recurrence_benchmark_checks_its_sum():
    compiled, executed = measure(steps=1_000)  # raises if the running sum differs from sum(t % 3)
    assert compiled >= 0 and executed > 0


def test_a_reinforce_executable_run_again_appends_its_iterations_rows():
    # `timerl bench` runs each variant's executable again in its rounds and reads the new rows of the same curve
    stats: dict = {}
    curve = train("CartPole-v1", iterations=3, num_envs=2, steps=5, backend="torch", stats=stats)
    stats["executable"].execute()
    assert [row["iteration"] for row in curve] == [0, 1, 2, 0, 1, 2]
    assert all(row["iteration_seconds"] > 0 and row["iteration_cpu_seconds"] >= 0 for row in curve)
