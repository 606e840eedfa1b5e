"""The Biased Random-Key Genetic Algorithm (Gonçalves & Resende, 2011) as REGAL uses it (paper §2.2): the
mutant distribution D is a product of per-gene Beta distributions, uniform (Beta(1, 1)) by default.

Defaults. Gonçalves & Resende recommend a population ``p = a * n`` (a >= 1, n the chromosome length),
``0.10 p <= p_e <= 0.25 p`` elites, ``0.10 p <= p_m <= 0.30 p`` mutants, and an elite bias
``0.5 <= rho_e <= 0.8``. We take ``p_e = 0.20 p``, ``p_m = 0.15 p``, ``rho_e = 0.7`` and, because our
chromosomes are 100-600 genes long and the budget is 5,000 evaluations, cap the population at 100 (``a = 1``
would leave fewer than 20 generations); graphs with shorter chromosomes use ``p = max(n, 20)``.

One generation: keep the elites (not re-evaluated), add ``p - p_e - p_m`` children of one elite and one
non-elite parent, each gene from the elite with probability ``rho_e``, and ``p_m`` mutants drawn from D.
The initial population is drawn from D too. The budget counts calls of the cost per chromosome; the last
generation evaluates only as many new chromosomes as the budget has left.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import numpy as np
import scipy.special

from algorithms.regal.graph import CompGraph
from algorithms.regal.perfmodel import chromosome_length, objective

Cost = Callable[[np.ndarray], np.ndarray]  # (P, n) chromosomes -> (P,) costs, lower is better


@dataclasses.dataclass(frozen=True)
class Config:
    max_population: int = 100
    min_population: int = 20
    elite_fraction: float = 0.20
    mutant_fraction: float = 0.15
    elite_bias: float = 0.7

    def population(self, length: int) -> int:
        return int(min(self.max_population, max(self.min_population, length)))


@dataclasses.dataclass(frozen=True)
class Result:
    best_cost: float
    best: np.ndarray
    evaluations: int
    curve: np.ndarray  # (generations, 2): evaluations so far, best cost so far


@dataclasses.dataclass(frozen=True)
class Proposal:
    """Per-gene Beta(alpha, beta) mutant distribution.

    Genes are drawn by inversion: one uniform draw per gene, mapped through the gene's Beta quantile
    function (a 4097-point table per distinct (alpha, beta), linearly interpolated; Beta(1, 1) genes keep
    the draw). So every proposal consumes the random stream identically, and two BRKGA runs with one seed
    differ only by their proposals (common random numbers: REGAL's reward and the bench compare
    proposals, not the luck of the search).

    ``uniform_share`` hedges the proposal: of every ``count`` chromosomes sampled (the initial population,
    each generation's mutants) the first ``floor(uniform_share * count + 1/2)`` keep their uniform draws,
    the rest go through the Betas. No draw is added or skipped, so the stream stays common: share 0 is the
    plain proposal, share 1 uniform BRKGA, bit for bit; in between a bad proposal costs less while a good
    one still seeds most mutants."""

    alpha: np.ndarray
    beta: np.ndarray
    uniform_share: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.uniform_share <= 1.0:
            raise ValueError(f"a proposal's uniform_share is a fraction in [0, 1], got {self.uniform_share}")

    @classmethod
    def uniform(cls, length: int) -> Proposal:
        return cls(np.ones(length), np.ones(length))

    @functools.cached_property
    def groups(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(quantile table, genes) per distinct non-uniform (alpha, beta)."""
        pairs = np.stack([self.alpha, self.beta], axis=1)
        distinct, which = np.unique(pairs, axis=0, return_inverse=True)
        return [(_quantiles(float(a), float(b)), np.flatnonzero(which.ravel() == k))
                for k, (a, b) in enumerate(distinct) if not (a == 1.0 and b == 1.0)]

    def sample(self, rng: np.random.Generator, count: int) -> np.ndarray:
        genes = rng.random((count, self.alpha.size))
        hedged = int(np.floor(self.uniform_share * count + 0.5))
        for table, columns in self.groups:
            genes[hedged:, columns] = np.interp(genes[hedged:, columns], _GRID, table)
        return genes


_GRID = np.linspace(0.0, 1.0, 4097)


@functools.lru_cache(maxsize=256)
def _quantiles(alpha: float, beta: float) -> np.ndarray:
    return scipy.special.betaincinv(alpha, beta, _GRID)


def run(cost: Cost, length: int, budget: int = 5000, proposal: Proposal | None = None, seed: int = 0,
        config: Config = Config()) -> Result:
    """Minimize ``cost`` over [0, 1]^length with at most ``budget`` evaluations."""
    if budget < 1:
        raise ValueError(f"BRKGA needs a positive evaluation budget, got {budget}")
    proposal = Proposal.uniform(length) if proposal is None else proposal
    if proposal.alpha.shape != (length,) or proposal.beta.shape != (length,):
        raise ValueError(f"proposal of {proposal.alpha.shape} genes for chromosomes of length {length}")
    rng = np.random.default_rng(seed)
    size = config.population(length)
    elites = max(1, round(config.elite_fraction * size))
    mutants = max(1, round(config.mutant_fraction * size))
    children = size - elites - mutants

    population = proposal.sample(rng, min(size, budget))
    costs = cost(population)
    evaluations = population.shape[0]
    curve = [(evaluations, costs.min())]
    while evaluations < budget:
        ranked = np.argsort(costs, kind="stable")
        elite, rest = ranked[:elites], ranked[elites:]
        fresh = np.concatenate([_crossover(population[elite], population[rest], children, config.elite_bias, rng),
                                proposal.sample(rng, mutants)])[:budget - evaluations]
        fresh_costs = cost(fresh)
        evaluations += fresh.shape[0]
        population = np.concatenate([population[elite], fresh])
        costs = np.concatenate([costs[elite], fresh_costs])
        curve.append((evaluations, costs.min()))
    best = int(np.argmin(costs))
    return Result(float(costs[best]), population[best], evaluations, np.asarray(curve, np.float64))


def _crossover(elite: np.ndarray, rest: np.ndarray, count: int, bias: float, rng: np.random.Generator) -> np.ndarray:
    if count <= 0 or rest.shape[0] == 0:
        return np.empty((0, elite.shape[1]))
    mother = elite[rng.integers(0, elite.shape[0], count)]
    father = rest[rng.integers(0, rest.shape[0], count)]
    return np.where(rng.random(mother.shape) < bias, mother, father)


def optimize(graph: CompGraph, kind: str, budget: int = 5000, proposal: Proposal | None = None, seed: int = 0,
             config: Config = Config()) -> Result:
    """BRKGA on one graph's performance model (``kind``: "runtime" or "peak_memory")."""
    return run(lambda chromosomes: objective(graph, chromosomes, kind), chromosome_length(graph), budget,
               proposal, seed, config)
