"""The methods of the paper's Fig. 3, each spending the same budget of simulator evaluations on one workload:

- ``egrl``: the population (20, a fraction 0.5 Boltzmann: with the paper's 0.2, our GNN members, whose
  weight mutations barely change their maps, crowd the chromosomes out; 0.5 is in its explored range) and
  the SAC-discrete GNN learner (`sac`, as RTs) sharing one replay buffer; per generation the policy makes one
  rollout and every member one; the policy migrates into the population every ``migrate_every`` generations;
  fresh policies and members lean to DRAM by `policy.dram_bias` (about 10 tensors off DRAM per map);
- ``ea``: the same population alone (no gradient learner, no migration);
- ``pg``: the SAC learner alone, making as many rollouts per step as the population would (20);
- ``greedy``: Greedy-DP, from the all-DRAM map, one node at a time, keep the best of the node's 9
  (weights, activation) choices with the others fixed; passes repeat until the budget is spent;
- ``compiler``: the compiler's own map (speedup 1 by definition).

Update rate: the paper takes about one gradient step per environment step. The RT learner takes
``steps_per_generation`` gradient steps per ``generations_per_step`` generations (one of them is 1): a generation
is 21 evaluations for EGRL (the policy's rollout and 20 members) and 20 rollouts for PG, so
``--steps-per-generation 20`` is about one step per evaluation. The bench's default, ``--generations-per-step
5``, takes about 40 steps in 4,000 evaluations (for run time: see the docs page). The learner runs on the torch
backend, compiled once per workload and shared by every seed and method (`learner_for`); on the ``reference``
backend, which memoizes every point of every iteration by design, memory grows with the steps (BERT's (heads,
366, 366) attention tensors took it past 19 GB).
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass, field

import numpy as np

from algorithms.egrl import sac
from algorithms.egrl.chip import Assessment, Chip, compiler_mapping
from algorithms.egrl.evaluate import Evaluator, Replay, sample_mapping
from algorithms.egrl.policy import Architecture, coarsen
from algorithms.egrl.population import Population
from algorithms.egrl.spec import NNPI, ChipSpec
from algorithms.egrl.workers import Workers
from algorithms.egrl.workloads import WorkloadGraph

METHODS = ("egrl", "ea", "pg", "greedy", "compiler")


@dataclass(frozen=True)
class Settings:
    budget: int = 4000
    population: int = 20
    boltzmann_fraction: float = 0.5
    replay: int = 100_000
    migrate_every: int = 5
    generations_per_step: int = 1
    steps_per_generation: int = 1  # gradient steps per generation (> 1 only with generations_per_step == 1)
    noise: float = 0.01
    arch: Architecture = Architecture()
    sac: sac.SACConfig = sac.SACConfig()
    backend: str = "torch"
    optimize: bool = True
    workers: int = 0  # Ray actors for the population's evaluations (0: in this process); same results either way
    chip: ChipSpec = NNPI

    def __post_init__(self) -> None:
        if self.steps_per_generation < 1 or self.generations_per_step < 1:
            raise ValueError("steps_per_generation and generations_per_step must be at least 1")
        if self.steps_per_generation > 1 and self.generations_per_step > 1:
            raise ValueError("several steps per generation and several generations per step do not combine")


@dataclass
class Result:
    method: str
    workload: str
    seed: int
    speedup: float                   # the best valid mapping's, over the compiler, noise-free
    curve: list[tuple[int, float]]   # (evaluations, best speedup so far)
    mapping: np.ndarray | None       # (N, 2) levels of the best valid mapping
    extra: dict = field(default_factory=dict)


def run(method: str, graph: WorkloadGraph, seed: int, settings: Settings = Settings()) -> Result:
    chip = Chip(graph.workload, noise=settings.noise, seed=seed, spec=settings.chip)
    evaluator = Evaluator(chip, settings.budget)
    rng = np.random.default_rng(seed)
    if method == "compiler":
        weights, acts = compiler_mapping(chip)
        return Result(method, graph.workload.name, seed, 1.0, [(0, 1.0)], np.stack([weights, acts], axis=1))
    extra: dict = {}
    if method == "greedy":
        _greedy(evaluator)
    elif method == "ea":
        population = _population(graph, settings, rng)
        workers = _workers(graph, population, settings)
        while not evaluator.exhausted:
            population.generation(lambda *measured: _within_budget(evaluator, *measured), workers)
    elif method in ("egrl", "pg"):
        extra = _learn(method, graph, evaluator, rng, seed, settings)
    else:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    return Result(method, graph.workload.name, seed, evaluator.best_speedup(), evaluator.curve, evaluator.best,
                  extra)


def _population(graph: WorkloadGraph, settings: Settings, rng: np.random.Generator) -> Population:
    hierarchy = coarsen(graph.workload.edges, graph.workload.size, settings.arch.depth)
    return Population(settings.population, settings.boltzmann_fraction, graph.normalized_features(), hierarchy,
                      settings.arch, rng)


_WORKERS: dict[tuple, Workers] = {}


def _identity(graph: WorkloadGraph) -> tuple:
    """What makes two workloads the same for a compiled learner or a set of workers: the name alone does not (two
    user models of one class may differ in size)."""
    w = graph.workload
    return (w.name, w.size, hashlib.sha1(graph.features.tobytes() + w.edges.tobytes() + w.act_bytes.tobytes() +
                                         w.weight_bytes.tobytes()).hexdigest())


def _workers(graph: WorkloadGraph, population: Population | None, settings: Settings) -> Workers | None:
    """The Ray actors for ``population``'s evaluations (None: in this process). One set at a time, started for a
    workload and count and shared by its seeds and methods, as `learner_for` shares the learner: an actor's
    start (a process that imports torch) costs seconds. A set of another workload, or of an earlier Ray
    session, is ended first (the actors hold a CPU each)."""
    if population is None or settings.workers == 0:
        return None
    key = (_identity(graph), settings.workers, settings.arch, settings.chip)
    if key not in _WORKERS or not _WORKERS[key].alive:
        for stale in _WORKERS.values():
            stale.close()
        _WORKERS.clear()
        _WORKERS[key] = Workers(settings.workers, graph.workload, population.context, settings.chip)
    return _WORKERS[key]


def close_workers() -> None:
    """End the shared Ray actors (they hold a CPU each), for a process that goes on to use Ray otherwise."""
    for workers in _WORKERS.values():
        workers.close()
    _WORKERS.clear()


def _within_budget(evaluator: Evaluator, mapping: np.ndarray, assessment: Assessment | None = None) -> float:
    """The reward, or -inf (never selected, never stored) once the budget is spent mid-generation."""
    return evaluator.reward(mapping, assessment) if not evaluator.exhausted else -np.inf


def _greedy(evaluator: Evaluator) -> None:
    nodes = evaluator.chip.workload.size
    current = np.zeros((nodes, 2), dtype=np.int64)
    current_reward = evaluator.reward(current)
    choices = [(w, a) for w in range(3) for a in range(3)]
    while not evaluator.exhausted:
        for node in range(nodes):
            for choice in choices:
                if evaluator.exhausted:
                    return
                if tuple(current[node]) == choice:
                    continue
                candidate = current.copy()
                candidate[node] = choice
                reward = evaluator.reward(candidate)
                if reward > current_reward:
                    current, current_reward = candidate, reward


class _Driver:
    """The udf behind the RT learner: rollouts into the shared replay, then a minibatch for the update."""

    def __init__(self, method: str, evaluator: Evaluator, population: Population | None, settings: Settings,
                 rng: np.random.Generator, workers: Workers | None) -> None:
        self.evaluator, self.population, self.settings, self.rng = evaluator, population, settings, rng
        self.workers = workers
        self.rollouts = 1 if method == "egrl" else settings.population
        self.replay = Replay(settings.replay, evaluator.chip.workload.size)
        self.generation = 0

    def __call__(self, iteration: int, logits: np.ndarray, weights: dict[str, np.ndarray]):
        if iteration % self.settings.steps_per_generation and self.replay.count:
            return self.replay.sample(self.settings.sac.batch, self.rng)  # another step on the same experience
        for _ in range(self.settings.generations_per_step):
            if self.evaluator.exhausted:
                break
            for _ in range(self.rollouts):
                self._store(sample_mapping(logits, self.rng))
            if self.population is not None:
                self.generation += 1
                if self.generation % self.settings.migrate_every == 0:
                    self.population.migrate(weights)
                self.population.generation(self._store, self.workers)
        return self.replay.sample(self.settings.sac.batch, self.rng)

    def _store(self, mapping: np.ndarray, assessment: Assessment | None = None) -> float:
        reward = _within_budget(self.evaluator, mapping, assessment)
        if np.isfinite(reward):
            self.replay.add(mapping, reward)
        return reward


_LEARNERS: dict[tuple, sac.Learner] = {}


def learner_iterations(settings: Settings) -> int:
    """Gradient steps the learner is compiled for: enough for PG alone (``population`` rollouts a generation)
    to spend the budget, ``steps_per_generation`` per generation."""
    return settings.steps_per_generation * math.ceil(
        settings.budget / (settings.population * settings.generations_per_step))


def learner_for(graph: WorkloadGraph, settings: Settings) -> sac.Learner:
    """The compiled learner for a workload and settings, made once per process and shared by every seed and by
    ``egrl`` and ``pg``: it takes as many steps as PG alone needs to spend the budget (EGRL, which spends it in
    slightly fewer, takes its last step or so after the budget is gone: no evaluation, no effect on results)."""
    iterations = learner_iterations(settings)
    key = (_identity(graph), iterations, settings.sac, settings.arch, settings.backend, settings.optimize)
    if key not in _LEARNERS:
        hierarchy = coarsen(graph.workload.edges, graph.workload.size, settings.arch.depth)
        _LEARNERS[key] = sac.Learner(graph.normalized_features(), hierarchy, iterations, settings.sac, settings.arch,
                                     settings.backend, optimize=settings.optimize)
    return _LEARNERS[key]


def _learn(method: str, graph: WorkloadGraph, evaluator: Evaluator, rng: np.random.Generator, seed: int,
           settings: Settings) -> dict:
    population = _population(graph, settings, rng) if method == "egrl" else None
    learner = learner_for(graph, settings)
    started = time.perf_counter()
    learner.run(_Driver(method, evaluator, population, settings, rng, _workers(graph, population, settings)), seed)
    return {"compile_seconds": learner.compile_seconds, "run_seconds": time.perf_counter() - started}
