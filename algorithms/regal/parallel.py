"""BRKGA runs in parallel on local Ray (``--workers N``), for the reward inside training and for the bench.

A job is ``(graph, kind, budget, actions, seed[, uniform_share])`` (`Job`): one BRKGA run, ``actions`` None for
uniform BRKGA, ``uniform_share`` (default 0) the share of the proposal's samples drawn uniform. Each
run is fully determined by its job (its own seeded generator), so the costs do not depend on which worker
ran it or in what order: ``run_jobs(jobs, workers)`` returns exactly what ``workers=1`` (plain serial calls)
returns. Jobs are cut into chunks, a few per worker, so that a task carries several runs of ~50 ms each
rather than one (Ray's per-task overhead is about a millisecond, its object transfer more for big graphs);
results come back in job order.

Ray starts once per process, on first use (`algorithms.local_ray`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import ray

from algorithms import local_ray
from algorithms.regal import brkga, features
from algorithms.regal.graph import CompGraph


class Job(NamedTuple):
    """One BRKGA run; plain 5-tuples (no hedge) are accepted wherever a job is."""

    graph: CompGraph
    kind: str
    budget: int
    actions: np.ndarray | None  # None: uniform BRKGA
    seed: int
    uniform_share: float = 0.0  # `brkga.Proposal.uniform_share`


CHUNKS_PER_WORKER = 4


def _search(job: tuple) -> brkga.Result:
    job = Job(*job)
    proposal = None if job.actions is None else features.proposal(job.graph, job.actions, job.uniform_share)
    return brkga.optimize(job.graph, job.kind, job.budget, proposal, job.seed)


def brkga_cost(job: tuple) -> float:
    """One BRKGA run's best cost."""
    return _search(job).best_cost


def brkga_best(job: tuple) -> np.ndarray:
    """One BRKGA run's best chromosome."""
    return _search(job).best


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
