"""`timerl bench`'s seconds per iteration (issue 8): the median of the timed iterations on both sides, so that one
slow iteration (another process's burst on shared cores) does not move a row; the long recurrence's value."""

from __future__ import annotations

import statistics

import pytest

from benchmarks.eager_reinforce import train_eager
from benchmarks.long_recurrence import measure
from timerl.cli import WARM_UP, _warm_up_and_rest


def test_timerl_rows_are_the_median_after_the_warm_up_iterations():
    seconds = [3.0, 0.8] + [0.10, 0.11, 0.90, 0.09, 0.12]  # warm-up, then one slow timed iteration
    first, per_iteration = _warm_up_and_rest([{"iteration_seconds": s} for s in seconds])
    assert WARM_UP == 2 and first == pytest.approx(3.8)
    assert per_iteration == 0.11


def test_eager_records_each_iterations_seconds():
    seconds: list[float] = []
    mean = train_eager(iterations=3, num_envs=2, steps=5, seconds=seconds)
    assert len(seconds) == 3 and all(s > 0 for s in seconds)
    assert statistics.mean(seconds) <= mean + 1e-9  # the mean also counts the loop between iterations


def test_long_recurrence_benchmark_checks_its_sum():
    compiled, executed = measure(steps=1_000)  # raises if the running sum differs from sum(t % 3)
    assert compiled >= 0 and executed > 0
