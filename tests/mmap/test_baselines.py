import numpy as np
import pytest

from algorithms.mmap.__main__ import main
from algorithms.mmap.baselines import AGENTS
from algorithms.mmap.baselines.evolution import benefit_prior, centred_ranks, decode
from algorithms.mmap.bench import bench_workload, markdown
from algorithms.mmap.check import check_mapping
from algorithms.mmap.instance import available_workload_names
from algorithms.mmap.problem import build_problem

NAMES = ["synthetic_3_60"] + sorted(available_workload_names(), key=lambda n: build_problem(n).num_buffers)[:1]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("agent", list(AGENTS))
def test_agents_return_valid_deterministic_mappings(name, agent):
    problem = build_problem(name)
    budget = 6 * problem.num_buffers
    first = AGENTS[agent](problem, seed=5, budget=budget)
    check_mapping(problem, first.mapping)
    assert first.latency == pytest.approx(problem.latency_all_slow - first.reward, rel=1e-9)
    assert first.reward >= 0.0
    again = AGENTS[agent](problem, seed=5, budget=budget)
    assert (again.reward, again.actions) == (first.reward, first.actions)


def test_search_agents_spend_their_budget():
    problem = build_problem("synthetic_3_60")
    budget = 200 * problem.num_buffers
    for agent in ("random", "es"):
        assert AGENTS[agent](problem, seed=0, budget=budget).moves_used >= budget, agent
    mcts = AGENTS["mcts"](problem, seed=0, budget=budget)
    assert 2 * len(mcts.actions) < mcts.moves_used <= budget + len(mcts.actions)


def test_es_never_ends_below_its_starting_policy():
    problem = build_problem("synthetic_3_60")
    start, _ = decode(problem, benefit_prior(problem))
    assert AGENTS["es"](problem, seed=1, budget=30 * problem.num_buffers).reward >= start.total_reward


def test_centred_ranks():
    ranks = centred_ranks(np.array([[3.0, -1.0], [10.0, 0.5]]))
    assert np.allclose(ranks, [[1 / 6, -0.5], [0.5, -1 / 6]])


def test_bench_table_and_plot(tmp_path, capsys):
    report = bench_workload("synthetic_3_60", budget=2)
    table = markdown([report])
    assert "| synthetic_3_60 | 167 |" in table
    assert "mcts vs heuristic" in table
    out = tmp_path / "mapping.png"
    main(["plot", "synthetic_3_60", "--agent", "random", "--budget", "1", "--out", str(out)])
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "reward" in capsys.readouterr().out
