"""BRKGA: elitism, the evaluation budget, the proposal distribution, and search beating random sampling."""

import numpy as np
import pytest

from algorithms.regal import brkga
from algorithms.regal.data import generate
from algorithms.regal.perfmodel import chromosome_length, objective


class Counting:
    """A cost function that records every chromosome it is asked about."""

    def __init__(self, fn):
        self.fn, self.seen = fn, []

    def __call__(self, chromosomes):
        self.seen.append(chromosomes.copy())
        return self.fn(chromosomes)


def sphere(chromosomes):
    return ((chromosomes - 0.3) ** 2).sum(axis=1)


@pytest.mark.parametrize("budget", [1, 37, 100, 1234])
def test_budget_is_exact(budget):
    cost = Counting(sphere)
    result = brkga.run(cost, 10, budget=budget)
    assert sum(len(c) for c in cost.seen) == budget == result.evaluations


def test_elites_survive_and_best_never_worsens():
    cost = Counting(sphere)
    result = brkga.run(cost, 12, budget=600)
    assert (np.diff(result.curve[:, 1]) <= 0).all()
    seen = np.concatenate(cost.seen)
    assert result.best_cost == pytest.approx(sphere(seen).min())
    assert sphere(result.best[None])[0] == pytest.approx(result.best_cost)


def test_defaults_are_goncalves_resende():
    config = brkga.Config()
    assert 0.10 <= config.elite_fraction <= 0.25 and 0.10 <= config.mutant_fraction <= 0.30
    assert 0.5 <= config.elite_bias <= 0.8


def test_mutants_follow_the_proposal():
    cost = Counting(sphere)
    proposal = brkga.Proposal(np.full(8, 20.0), np.full(8, 2.0))  # mean 10/11
    brkga.run(cost, 8, budget=100, proposal=proposal)
    assert cost.seen[0].mean() == pytest.approx(20 / 22, abs=0.02)


@pytest.mark.parametrize("kind", ["runtime", "peak_memory"])
def test_beats_random_sampling_with_the_same_budget(kind):
    graphs = generate(3, 1, ops=(16, 20), seed=5)
    wins = 0
    for graph in graphs:
        rng = np.random.default_rng(1)
        random_best = objective(graph, rng.random((800, chromosome_length(graph))), kind).min()
        wins += brkga.optimize(graph, kind, budget=800, seed=1).best_cost < random_best
    assert wins == len(graphs)
