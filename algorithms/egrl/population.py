"""The evolutionary population of EGRL (Algorithm 2, after CERL): GNN members and Boltzmann chromosomes.

A Boltzmann chromosome holds, per node and tensor, prior logits ``P`` (3 levels) and a temperature ``T``; it
acts by sampling ``softmax(P / T)``. A GNN member holds a Graph U-Net's weights and acts by sampling its
output's softmax. One generation: every member acts once (its fitness is that rollout's reward), the ``elites``
best survive unchanged, the rest are tournament winners (size 3, with replacement), each crossed with a random
elite: single-point crossover over nodes (Boltzmann x Boltzmann) or over the network's layers (GNN x GNN);
across types, the Boltzmann member's prior is re-seeded from the GNN's posterior (its log-probabilities) when
that GNN is the best member (seeding from any GNN elite kept resetting the chromosomes to what untrained GNNs
propose; with the best one, a migrated policy that leads spreads to the chromosomes). Then
Gaussian mutation with probability ``mutation_probability``: 10 % of a member's entries get noise
(``prior_sigma`` for priors, which largely redraws them, ``weight_sigma`` times the magnitude for weights,
log-normal for temperatures); the sizes were tuned on ResNet-50 with the Boltzmann members alone. Migration replaces the
worst GNN member by a copy of the PG policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from algorithms.egrl.chip import Assessment
from algorithms.egrl.policy import Architecture, Hierarchy, dram_bias, eager_forward, init_weights


@dataclass
class Boltzmann:
    prior: np.ndarray        # (N, 2, 3)
    temperature: np.ndarray  # (N, 2, 1)

    def logits(self, context: "Context") -> np.ndarray:
        return self.prior / self.temperature

    def copy(self) -> "Boltzmann":
        return Boltzmann(self.prior.copy(), self.temperature.copy())


@dataclass
class GNN:
    weights: dict[str, np.ndarray]

    def logits(self, context: "Context") -> np.ndarray:
        out = eager_forward(self.weights, context.features, context.hierarchy, context.arch)
        return out.reshape(-1, 2, 3)

    def copy(self) -> "GNN":
        return GNN({name: value.copy() for name, value in self.weights.items()})


Member = Boltzmann | GNN


@dataclass(frozen=True)
class Context:
    """What a member needs to act: the workload's normalized features and pooling hierarchy, and the network."""

    features: np.ndarray
    hierarchy: Hierarchy
    arch: Architecture

    def act(self, member: Member, noise: np.ndarray) -> np.ndarray:
        """A member's mapping (N, 2) for the Gumbel ``noise`` (N, 2, 3): a categorical draw per node and tensor."""
        return np.argmax(member.logits(self) + noise, axis=-1)


class Assessor(Protocol):
    def act_and_assess(self, members: list[Member], noises: list[np.ndarray]) -> list[tuple[np.ndarray, Assessment]]:
        """Per member, in order: its mapping for its noise, and the chip's `Chip.assess` of it."""


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


class Population:
    def __init__(self, size: int, boltzmann_fraction: float, features: np.ndarray, hierarchy: Hierarchy,
                 arch: Architecture, rng: np.random.Generator, elite_fraction: float = 0.2,
                 mutation_probability: float = 0.9, prior_sigma: float = 10.0, weight_sigma: float = 1.0,
                 mutation_fraction: float = 0.1) -> None:
        self.context, self.rng = Context(features, hierarchy, arch), rng
        self.elites = max(1, int(round(elite_fraction * size)))
        self.mutation_probability, self.mutation_fraction = mutation_probability, mutation_fraction
        self.prior_sigma, self.weight_sigma = prior_sigma, weight_sigma
        nodes = features.shape[0]
        boltzmann = int(round(boltzmann_fraction * size))
        bias = dram_bias(nodes)  # fresh members lean to DRAM as the policy does (Table 2: initial action DRAM)
        self.members: list[Member] = [
            Boltzmann(rng.normal(0.0, 0.5, (nodes, 2, 3)) + bias.reshape(2, 3), rng.uniform(0.1, 1.0, (nodes, 2, 1)))
            for _ in range(boltzmann)]
        self.members += [GNN(init_weights(arch, int(rng.integers(2**31)), bias)) for _ in range(size - boltzmann)]

    def generation(self, fitness_of: Callable[..., float], workers: Assessor | None = None) -> np.ndarray:
        """Evaluate every member once through ``fitness_of(mapping)`` and breed the next generation; returns
        the fitnesses (in the evaluated members' order). Every member's Gumbel noise is drawn first, in member
        order, so ``workers`` (`workers.Workers`) can act and assess the members elsewhere: then
        ``fitness_of(mapping, assessment)`` is called in member order, and the results are the same."""
        nodes = self.context.features.shape[0]
        noises = [self.rng.gumbel(size=(nodes, 2, 3)) for _ in self.members]
        if workers is None:
            fitness = np.array([fitness_of(self.context.act(member, noise))
                                for member, noise in zip(self.members, noises)])
        else:
            fitness = np.array([fitness_of(mapping, assessment)
                                for mapping, assessment in workers.act_and_assess(self.members, noises)])
        ranked = [self.members[k] for k in np.argsort(-fitness, kind="stable")]
        elites = ranked[:self.elites]
        offspring = []
        for _ in range(len(self.members) - self.elites):
            contenders = self.rng.integers(0, len(self.members), size=3)
            winner = self.members[contenders[np.argmax(fitness[contenders])]].copy()
            partner = elites[self.rng.integers(len(elites))]
            winner = self._cross(winner, partner, partner is elites[0])
            if self.rng.random() < self.mutation_probability:
                self._mutate(winner)
            offspring.append(winner)
        self.members = [e.copy() for e in elites] + offspring
        return fitness

    def migrate(self, weights: dict[str, np.ndarray]) -> None:
        """The PG policy joins the population in place of the last GNN offspring (elites come first, so this
        is never an elite)."""
        for k in reversed(range(len(self.members))):
            if isinstance(self.members[k], GNN):
                self.members[k] = GNN({name: np.array(value, dtype=np.float32) for name, value in weights.items()})
                return

    def _cross(self, child: Member, partner: Member, partner_is_best: bool) -> Member:
        if isinstance(child, Boltzmann) and isinstance(partner, Boltzmann):
            cut = self.rng.integers(1, child.prior.shape[0])
            child.prior[cut:], child.temperature[cut:] = partner.prior[cut:], partner.temperature[cut:]
        elif isinstance(child, GNN) and isinstance(partner, GNN):
            names = list(child.weights)
            cut = self.rng.integers(1, len(names))
            for name in names[cut:]:
                child.weights[name] = partner.weights[name].copy()
        elif isinstance(child, Boltzmann) and partner_is_best:
            child.prior = _log_softmax(partner.logits(self.context))
        return child

    def _mutate(self, member: Member) -> None:
        rng = self.rng
        if isinstance(member, Boltzmann):
            chosen = rng.random(member.prior.shape[:2]) < self.mutation_fraction
            member.prior[chosen] += rng.normal(0.0, self.prior_sigma, (int(chosen.sum()), 3))
            member.temperature[chosen] *= np.exp(rng.normal(0.0, 0.2, (int(chosen.sum()), 1)))
            member.temperature.clip(0.05, 10.0, out=member.temperature)
            return
        for name, value in member.weights.items():
            chosen = rng.random(value.shape) < self.mutation_fraction
            noise = rng.normal(0.0, self.weight_sigma, value.shape).astype(np.float32) * np.abs(value)
            member.weights[name] = np.where(chosen, value + noise, value).astype(np.float32)
