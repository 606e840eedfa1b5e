"""BRKGA on local Ray (``--workers``): the same costs as serial runs, inside the reward and in the bench."""

import dataclasses

import numpy as np
import pytest

from algorithms.regal import bench, data, features, parallel, train
from tests.ray_cluster import local_ray  # noqa: F401  (the fixture)


@pytest.fixture
def two_workers(local_ray):
    return 2


def test_ray_jobs_equal_serial_runs(two_workers):
    graphs = data.generate(3, 1, ops=(8, 12), seed=4)
    rng = np.random.default_rng(0)
    jobs = [(graph, kind, 60, actions, seed)
            for graph in graphs for kind in ("runtime", "peak_memory") for seed in (0, 7)
            for actions in (None, rng.integers(0, features.CHOICES, (graph.num_ops, features.HEADS)))]
    serial = parallel.run_jobs(jobs, workers=1)
    np.testing.assert_array_equal(parallel.run_jobs(jobs, workers=two_workers), serial)
    assert serial.shape == (len(jobs),) and np.isfinite(serial).all()


def test_reward_and_bench_on_ray_equal_serial(two_workers):
    graphs = data.generate(4, 1, ops=(8, 10), seed=5)
    config = train.Config(kind="runtime", iterations=2, batch=4, samples=2, seeds=2, train_budget=40)
    batches = np.array([[0, 0, 3, 3], [1, 1, 2, 2]])
    actions = np.random.default_rng(1).integers(0, features.CHOICES, (4, max(g.num_ops for g in graphs),
                                                                      features.HEADS))
    serial = train._Reward(graphs, batches, config)({"i": 1}, actions)[0]
    on_ray = train._Reward(graphs, batches, dataclasses.replace(config, workers=two_workers))
    np.testing.assert_array_equal(on_ray({"i": 1}, actions)[0], serial)
    proposals = [actions[k, :g.num_ops] for k, g in enumerate(graphs)]
    one = bench.evaluate(graphs, proposals, "peak_memory", budget=40, big_budget=80)
    two = bench.evaluate(graphs, proposals, "peak_memory", budget=40, big_budget=80, workers=two_workers)
    for field in ("brkga", "regal", "brkga_big"):
        np.testing.assert_array_equal(getattr(two, field), getattr(one, field))
