import numpy as np
import pytest

from algorithms.mmap.__main__ import main
from algorithms.mmap.baselines import AGENTS
from algorithms.mmap.baselines.evolution import benefit_prior, centred_ranks, decode
from algorithms.mmap.bench import bench_workload, markdown
from algorithms.mmap.check import check_mapping
from algorithms.mmap.problem import build_problem
from mmap_suite import game_test_workloads

NAMES = ["synthetic_3_60"] + sorted(game_test_workloads(), key=lambda n: build_problem(n).num_buffers)[:1]


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


def test_msa_prefetch_steps_and_densities_are_hand_derived():
    from algorithms.mmap.baselines.msa import copy_steps, densities
    from mmap_handmade import problem as handmade_problem

    # six 1-flop instructions (1 us each); supply of an empty step is 1 us = 10^6 ps
    problem = handmade_problem([1] * 6, [
        (1, None, 2, True, 0, (0, 5)),  # output, 2 bytes: demand 2 us -> steps 1, 2 evict it -> holds 3 steps
        (2, None, 1, False, 3, (0, 3)),  # 1 byte: L = max(1, 1) = max(1, 0.25): no benefit
        (0, None, 3, False, 5, (0, 5)),  # input, 3 bytes: demand 3 us -> prefetch over steps 2, 3, 4 -> holds 4
    ], fast_memory_bytes=8)
    assert [copy_steps(problem, b) for b in range(3)] == [3, 2, 4]
    # output: L({}) = max(1, 2) = 2, L({b}) = max(1, 0.5) = 1; input: L({}) = 3, L({b}) = max(1, 0.75) = 1
    assert densities(problem).tolist() == pytest.approx([1 / (2 * 3), 0.0, 2 / (3 * 4)])


@pytest.mark.parametrize("name", ["mlp_sgd", "cnn_sgd"])
def test_msa_is_ahead_of_random_play_and_the_old_heuristic(name):
    problem = build_problem(name)
    budget = 20 * problem.num_buffers
    msa = AGENTS["msa"](problem, seed=0, budget=budget)
    assert msa.reward > AGENTS["random"](problem, seed=0, budget=budget).reward
    assert msa.reward > AGENTS["heuristic"](problem, seed=0, budget=budget).reward
