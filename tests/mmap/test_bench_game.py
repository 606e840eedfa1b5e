"""One game for every agent of the bench: the setup game by default, the bytes-only game on request,
and the large suite's budget that grows with the workload."""

from __future__ import annotations

import pytest

from algorithms.mmap.__main__ import main
from algorithms.mmap.baselines import AGENTS
from algorithms.mmap.bench import (COPY_SETUP_SECONDS, LARGE_WORKLOADS, SCALE_BUFFERS, WORKLOADS, game_problem,
                                   markdown, run_bench, scaled_seconds, score_agents)
from algorithms.mmap.check import check_mapping
from algorithms.mmap.problem import build_problem
from algorithms.mmap.simulator import DmaSpec
from algorithms.mmap.workloads import list_workloads, load_workload

NAME = "synthetic_3_60"
SETUP_PICOSECONDS = 500_000  # the simulator's DMA setup time, 0.5 us


def test_the_setup_game_adds_the_simulators_dma_setup_to_every_copy_demand():
    assert COPY_SETUP_SECONDS == DmaSpec().latency_seconds == 0.5e-6
    bytes_only, setup = build_problem(NAME), game_problem(NAME)
    assert setup.demand == tuple(d + SETUP_PICOSECONDS if d > 0 else 0 for d in bytes_only.demand)
    assert game_problem(NAME, 0.0).demand == bytes_only.demand
    # rewards stay the cost model's: benefits, supplies and latency tables are the bytes-only game's
    assert setup.initial_benefit == bytes_only.initial_benefit and (setup.supply == bytes_only.supply).all()
    assert setup.latency_lists == bytes_only.latency_lists


def recording(agent, seen):
    def play(problem, seed=0, budget=None):
        seen[agent] = problem.demand
        return AGENTS[agent](problem, seed=seed, budget=budget)
    return play


@pytest.mark.parametrize("setup", [COPY_SETUP_SECONDS, 0.0])
def test_every_agent_plays_the_one_game(setup):
    seen: dict = {}
    agents = ("heuristic", "random", "es", "mcts")
    registry = {agent: recording(agent, seen) for agent in agents}
    problem = game_problem(NAME, setup)
    scores = score_agents(NAME, budget=3, agents=agents, registry=registry, copy_setup_seconds=setup)
    assert seen == {agent: problem.demand for agent in agents}
    assert set(scores) == set(agents)


def test_the_setup_games_mappings_are_valid_in_both_games():
    setup, bytes_only = game_problem(NAME), build_problem(NAME)
    for agent in ("heuristic", "es"):
        result = AGENTS[agent](setup, seed=0, budget=5 * setup.num_buffers)
        check_mapping(setup, result.mapping)
        check_mapping(bytes_only, result.mapping)


def test_scaled_budget_and_the_report_states_game_and_budget():
    assert scaled_seconds(10.0, 100) == scaled_seconds(10.0, SCALE_BUFFERS) == 10.0
    assert scaled_seconds(10.0, 3 * SCALE_BUFFERS) == pytest.approx(30.0)
    agents = ("heuristic", "random")
    (report,) = run_bench([NAME], seconds=0.05, agents=agents, jobs=1, scale=True)
    assert report.copy_setup_seconds == COPY_SETUP_SECONDS
    assert report.budget_seconds == pytest.approx(scaled_seconds(0.05, report.buffers))
    assert "the setup game (copy demand: DMA setup 0.5 us" in markdown([report], agents, "heuristic")
    (bytes_report,) = run_bench([NAME], budget=1, agents=agents, jobs=1, copy_setup_seconds=0.0)
    assert bytes_report.copy_setup_seconds == 0.0 and bytes_report.budget_seconds is None
    assert "Every agent played the bytes-only game" in markdown([bytes_report], agents, "heuristic")


def test_cli_bytes_only_flag(capsys):
    main(["bench", "--workloads", NAME, "--agents", "heuristic", "random", "--budget", "1", "--jobs", "1",
          "--reference", "heuristic", "--bytes-only"])
    assert "Every agent played the bytes-only game" in capsys.readouterr().out


def test_suites_span_the_papers_sizes():
    names = set(list_workloads())
    assert set(WORKLOADS) <= names and set(LARGE_WORKLOADS) <= names
    sizes = [load_workload(name).num_buffers for name in LARGE_WORKLOADS]
    assert sizes == sorted(sizes) and sizes[0] >= 300 and sizes[-1] >= 5000 and len(sizes) == 8
    assert max(load_workload(name).num_buffers for name in WORKLOADS) < sizes[0]
