"""BRKGA runs in parallel on local Ray (``--workers N``), for the reward inside training and for the bench.

A job is ``(graph, kind, budget, actions, seed)``: one BRKGA run, ``actions`` None for uniform BRKGA. Each
run is fully determined by its job (its own seeded generator), so the costs do not depend on which worker
ran it or in what order: ``run_jobs(jobs, workers)`` returns exactly what ``workers=1`` (plain serial calls)
returns. Jobs are cut into chunks, a few per worker, so that a task carries several runs of ~50 ms each
rather than one (Ray's per-task overhead is about a millisecond, its object transfer more for big graphs);
results come back in job order.

Ray starts once per process, on first use (`algorithms.local_ray`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import ray

from algorithms import local_ray
from algorithms.regal import brkga, features
from algorithms.regal.graph import CompGraph

Job = tuple[CompGraph, str, int, "np.ndarray | None", int]
CHUNKS_PER_WORKER = 4


def brkga_cost(job: Job) -> float:
    """One BRKGA run's best cost."""
    graph, kind, budget, actions, seed = job
    proposal = None if actions is None else features.proposal(graph, actions)
    return brkga.optimize(graph, kind, budget, proposal, seed).best_cost


def brkga_best(job: Job) -> np.ndarray:
    """One BRKGA run's best chromosome."""
    graph, kind, budget, actions, seed = job
    proposal = None if actions is None else features.proposal(graph, actions)
    return brkga.optimize(graph, kind, budget, proposal, seed).best


@ray.remote
def _chunk(run: Callable[[Job], Any], jobs: list[Job]) -> list:
    return [run(job) for job in jobs]


def _map(run: Callable[[Job], Any], jobs: list[Job], workers: int) -> list:
    if workers <= 1 or len(jobs) <= 1:
        return [run(job) for job in jobs]
    local_ray.start(workers)
    size = max(1, -(-len(jobs) // (workers * CHUNKS_PER_WORKER)))
    futures = [_chunk.remote(run, jobs[first:first + size]) for first in range(0, len(jobs), size)]
    return [result for chunk in ray.get(futures) for result in chunk]


def run_jobs(jobs: list[Job], workers: int = 1) -> np.ndarray:
    """The best cost of every job, in order; ``workers`` > 1 runs them as Ray tasks."""
    return np.array(_map(brkga_cost, jobs, workers), dtype=np.float64)


def best_solutions(jobs: list[Job], workers: int = 1) -> list[np.ndarray]:
    """The best chromosome of every job, in order (the distillation data of `train.distil`)."""
    return _map(brkga_best, jobs, workers)
