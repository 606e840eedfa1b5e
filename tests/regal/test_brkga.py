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
    proposal = brkga.Proposal(np.r_[np.full(8, 20.0), np.full(4, 0.5)], np.r_[np.full(8, 2.0), np.full(4, 0.5)])
    brkga.run(cost, 12, budget=400, proposal=proposal)
    genes = cost.seen[0]
    assert genes[:, :8].mean() == pytest.approx(20 / 22, abs=0.01)
    assert genes[:, :8].var() == pytest.approx(20 * 2 / (22**2 * 23), rel=0.15)
    assert genes[:, 8:].var() == pytest.approx(0.125, rel=0.15)  # Beta(1/2, 1/2): mean 1/2, variance 1/8


def test_common_random_numbers():
    """With one seed, a uniform run and a run whose proposal is uniform on every gene but one draw the
    same genes everywhere else."""
    skewed = brkga.Proposal(np.r_[5.0, np.ones(9)], np.r_[1.0, np.ones(9)])
    first, second = Counting(sphere), Counting(sphere)
    brkga.run(first, 10, budget=50, seed=4)
    brkga.run(second, 10, budget=50, proposal=skewed, seed=4)
    np.testing.assert_array_equal(first.seen[0][:, 1:], second.seen[0][:, 1:])
    assert (first.seen[0][:, 0] <= second.seen[0][:, 0]).all()  # the quantile map of Beta(5, 1) is above u


@pytest.mark.parametrize("kind", ["runtime", "peak_memory"])
def test_beats_random_sampling_with_the_same_budget(kind):
    graphs = generate(3, 1, ops=(16, 20), seed=5)
    searched, sampled = [], []
    for graph in graphs:
        rng = np.random.default_rng(1)
        sampled.append(objective(graph, rng.random((800, chromosome_length(graph))), kind).min())
        searched.append(brkga.optimize(graph, kind, budget=800, seed=1).best_cost)
    # random sampling can hit the optimum of an easy graph too: never worse, better on most
    assert (np.array(searched) <= np.array(sampled)).all()
    assert (np.array(searched) < np.array(sampled)).sum() >= 2
