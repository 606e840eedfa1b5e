"""Turning mappings into rewards, and the shared replay buffer.

Rewards follow the paper's Algorithm 1 (extraction 003): a valid mapping runs and earns ``speedup ** 2``,
``speedup = compiler latency / measured latency``; an invalid one does not run and earns ``-ε_M``, the
fraction of bytes the compiler had to move (we take ``-ε_M`` rather than Table 2's constant ``-1`` so that
"almost valid" is better than "far from valid", which the population's ranking and the critic both use).
Every method counts its simulator evaluations against the same budget; the deployed mapping is the best valid
one found, re-measured without noise for reporting.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from algorithms.egrl.chip import Assessment, Chip, compiler_mapping


class Evaluator:
    """A chip with its baseline, a budget of evaluations, and the best valid mapping seen."""

    def __init__(self, chip: Chip, budget: int) -> None:
        self.chip, self.budget = chip, budget
        self.baseline = chip.latency(*compiler_mapping(chip), noisy=False)
        self.used = 0
        self.best_reward, self.best = -np.inf, None
        self.curve: list[tuple[int, float]] = []  # (evaluations so far, best speedup so far)

    @property
    def exhausted(self) -> bool:
        return self.used >= self.budget

    def reward(self, mapping: np.ndarray, assessment: Assessment | None = None) -> float:
        """``mapping``: (N, 2) int levels, column 0 the weights, column 1 the activation; ``assessment``: its
        `Chip.assess`, when a worker made it already."""
        if assessment is None:
            assessment = self.chip.assess(mapping[:, 0], mapping[:, 1])
        repair, latency = self.chip.measure(assessment)
        self.used += 1
        if latency is None:
            reward = -repair.epsilon
        else:
            reward = (self.baseline / latency) ** 2
            if reward > self.best_reward:
                self.best_reward, self.best = reward, mapping.copy()
        self.curve.append((self.used, self.best_speedup()))
        return reward

    def best_speedup(self) -> float:
        """The best valid mapping's speedup over the compiler, measured without noise (0 before any)."""
        if self.best is None:
            return 0.0
        return self.baseline / self.chip.latency(self.best[:, 0], self.best[:, 1], noisy=False)


@dataclass
class Replay:
    """A cyclic buffer of (mapping, reward) pairs: one-step episodes, so no next state."""

    size: int
    nodes: int
    actions: np.ndarray = field(init=False)
    rewards: np.ndarray = field(init=False)
    count: int = 0

    def __post_init__(self) -> None:
        # levels fit in int8: at 100,000 entries of BERT's 366 nodes, int64 would hold 585 MB, int8 73 MB
        self.actions = np.zeros((self.size, self.nodes, 2), dtype=np.int8)
        self.rewards = np.zeros(self.size, dtype=np.float32)

    def add(self, mapping: np.ndarray, reward: float) -> None:
        slot = self.count % self.size
        self.actions[slot], self.rewards[slot] = mapping, reward
        self.count += 1

    def sample(self, batch: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        index = rng.integers(0, min(self.count, self.size), size=batch)
        return self.actions[index].astype(np.int64), self.rewards[index]


def sample_mapping(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One categorical draw per node and tensor from ``logits`` (N, 2, 3), by Gumbel-max."""
    return np.argmax(logits + rng.gumbel(size=logits.shape), axis=-1)
