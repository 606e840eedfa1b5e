"""The committed REINFORCE-trained peak-memory policy (``python -m algorithms.regal paper --objectives
peak_memory``, `paper.RECIPES`) against uniform BRKGA at equal budget on held-out graphs of 100-300 ops: the
first graphs of the synthetic test split, never trained on, each with BRKGA seeds shared by both searches."""

import numpy as np
import pytest

from algorithms.regal import datasets, paper, train
from algorithms.regal.bench import Outcome
from algorithms.regal.parallel import run_jobs

KIND = "peak_memory"
BUDGET = 1000
CASES = 4
SEEDS = 2


def test_reinforce_trained_proposal_beats_uniform_brkga_on_held_out_graphs():
    graphs = datasets.paper_splits(KIND).test[:CASES]
    assert min(graph.num_ops for graph in graphs) >= 100
    assert paper.RECIPES[KIND].iterations > 0  # trained by REINFORCE (after its named warm start)
    trained = paper.load(KIND, graphs)
    actions = train.propose(trained, graphs)
    jobs = [(graph, KIND, BUDGET, proposal, seed) for seed in range(SEEDS)
            for graph, action in zip(graphs, actions) for proposal in (action, None)]
    costs = run_jobs(jobs).reshape(-1, 2)
    improvement = (costs[:, 1] - costs[:, 0]) / costs[:, 1]
    assert improvement.mean() > 0.0
    assert np.mean(costs[:, 0] <= costs[:, 1]) > 0.5


def test_large_budget_columns_cover_the_cases_it_ran_on():
    """`bench.Outcome.summary` with the large budget run on the first two of three cases (NaN on the last):
    its columns are over those two, by hand."""
    outcome = Outcome("runtime", ["a", "b", "c"], brkga=np.array([10.0, 20.0, 40.0]),
                      regal=np.array([9.0, 21.0, 30.0]), brkga_big=np.array([9.5, 19.0, np.nan]),
                      budget=5000, big_budget=50000)
    s = outcome.summary()
    assert s["big_cases"] == 2 and s["match_or_beat"] == pytest.approx(200 / 3)
    assert s["brkga_big_improvement"] == pytest.approx((5.0 + 5.0) / 2)
    assert s["regal_on_big_cases"] == pytest.approx((10.0 - 5.0) / 2)
    assert s["regal_vs_big"] == 50.0
