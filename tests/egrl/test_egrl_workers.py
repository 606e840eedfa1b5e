"""The population's evaluations on 2 local Ray actors give the same run as in one process, seed for seed."""

from __future__ import annotations

import numpy as np

from algorithms.egrl.learners import Settings, close_workers, run
from algorithms.egrl.workloads import load
from tests.ray_cluster import local_ray  # noqa: F401  (the fixture)


def test_ea_on_two_workers_matches_serial(local_ray):
    graph = load("resnet50")
    serial = run("ea", graph, seed=3, settings=Settings(budget=260))
    try:
        parallel = run("ea", graph, seed=3, settings=Settings(budget=260, workers=2))
    finally:
        close_workers()  # the shared Ray stays up for the other tests
    # 260 is not a multiple of the population (20): the last generation stops mid-way in both
    assert parallel.curve == serial.curve
    assert parallel.speedup == serial.speedup
    np.testing.assert_array_equal(parallel.mapping, serial.mapping)
    assert serial.curve[-1][0] == 260
