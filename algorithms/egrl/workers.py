"""The population's evaluations on local Ray actors (``--workers N``), with the same results as in one process.

What a member's evaluation needs splits in two. Acting (the member's logits, which for a GNN member is the
Graph U-Net's forward pass, plus its Gumbel noise) and the chip's `Chip.assess` (repair and noise-free latency)
are pure functions of the member, its noise and the workload, so they run on the actors. The random draws stay
in the driving process: `Population.generation` draws every member's noise first, in member order, and the
driver's `Chip.measure` draws the measurement noise and counts the evaluation in member order once the results
are back. So a seed gives the same maps, fitnesses, curves and budget accounting with or without workers
(tested with 2 workers).

Each actor holds its own copy of the chip and the members' context, made once per run; a generation sends each
actor a share of the members (GNN members, whose forward pass is most of the cost, dealt out round-robin first,
then the Boltzmann chromosomes) with their noise.
"""

from __future__ import annotations

import numpy as np
import ray
import torch

from algorithms import local_ray
from algorithms.egrl.chip import Assessment, Chip, Workload
from algorithms.egrl.population import GNN, Context, Member
from algorithms.egrl.spec import NNPI, ChipSpec


class _Actor:
    """One worker: a noise-free chip and the members' context."""

    def __init__(self, workload: Workload, context: Context, spec: ChipSpec = NNPI) -> None:
        torch.set_num_threads(1)  # the kernels are small; one thread per worker process
        self.chip, self.context = Chip(workload, noise=0.0, spec=spec), context

    def act_and_assess(self, members: list[Member], noises: list[np.ndarray]) -> list[tuple[np.ndarray, Assessment]]:
        results = []
        for member, noise in zip(members, noises):
            mapping = self.context.act(member, noise)
            results.append((mapping, self.chip.assess(mapping[:, 0], mapping[:, 1])))
        return results


_RemoteActor = ray.remote(num_cpus=1)(_Actor)


class Workers:
    """``count`` Ray actors for one workload; `act_and_assess` is `population.Assessor`. Starts a local Ray with
    ``count`` CPUs when none is running. Call `close` (or use ``with``) to end the actors."""

    def __init__(self, count: int, workload: Workload, context: Context, spec: ChipSpec = NNPI) -> None:
        if count < 1:
            raise ValueError(f"workers: need at least 1, got {count}")
        local_ray.start(count)
        self.session = ray.get_runtime_context().get_job_id()
        self.actors = [_RemoteActor.remote(workload, context, spec) for _ in range(count)]

    @property
    def alive(self) -> bool:
        """Whether the Ray session that started the actors is still the running one."""
        return ray.is_initialized() and ray.get_runtime_context().get_job_id() == self.session

    def act_and_assess(self, members: list[Member], noises: list[np.ndarray]) -> list[tuple[np.ndarray, Assessment]]:
        is_gnn = [isinstance(member, GNN) for member in members]
        order = [k for k in range(len(members)) if is_gnn[k]] + [k for k in range(len(members)) if not is_gnn[k]]
        shares = [order[start::len(self.actors)] for start in range(len(self.actors))]
        futures = [actor.act_and_assess.remote([members[k] for k in share], [noises[k] for k in share])
                   for actor, share in zip(self.actors, shares) if share]
        results: list = [None] * len(members)
        for share, answers in zip([share for share in shares if share], ray.get(futures)):
            for k, answer in zip(share, answers):
                results[k] = answer
        return results

    def close(self) -> None:
        if self.alive:
            for actor in self.actors:
                ray.kill(actor)
        self.actors = []

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
