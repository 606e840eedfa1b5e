"""MuZero's place in `python -m algorithms.mmap bench`: a wall-clock budget turned into game moves at random play's
measured speed, a learning agent's curve carried to the report and drawn, and the table's MuZero rows (seconds,
"prod" speedup, counts against the reference and ES). A cheap stand-in learner keeps it fast: the real agents
(`algorithms.muzero.bench.MUZERO_AGENTS`) compile and train for minutes."""

from __future__ import annotations

import dataclasses

from algorithms.mmap.baselines import AGENTS, Result
from algorithms.mmap.bench import markdown, run_bench
from algorithms.mmap.plot import plot_curves
from algorithms.muzero.bench import MUZERO_AGENTS, VARIANTS, LearnedResult

def learner_stand_in(problem, seed: int = 0, budget: int | None = None) -> LearnedResult:
    """Random play's best game with a made-up two-point curve."""
    result = AGENTS["random"](problem, seed=seed, budget=budget)
    fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(Result)}
    return LearnedResult(**{**fields, "agent": "learner"}, curve=({"seconds": 0.1, "mean": 0.2},
                                                                 {"seconds": 0.2, "mean": 0.3}))


def test_seconds_budget_curves_and_table(tmp_path):
    registry = {**AGENTS, "learner": learner_stand_in}
    agents = ("heuristic", "es", "learner")
    reports = run_bench(["synthetic_3_60"], seconds=0.2, agents=agents, jobs=1, registry=registry)
    (report,) = reports
    assert report.scores["learner"].curve[1]["mean"] == 0.3 and report.scores["es"].curve is None
    assert report.scores["es"].seconds < 30  # ES got the moves of 0.2 s of random play, not episodes
    table = markdown(reports, agents, "heuristic")
    for line in ("Seconds each agent took", "Mean 'prod' speedup vs heuristic",
                 "Workloads where the agent is faster than heuristic", "Workloads where the agent's reward >= ES's"):
        assert line in table
    out = tmp_path / "curves.png"
    plot_curves(reports, str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(MUZERO_AGENTS) == set(VARIANTS) == {"muzero", "muzero_nosearch", "muzero_nolearn", "muzero_puct",
                                                   "muzero_gumbel_t"}
    assert VARIANTS["muzero_nolearn"].learner.lr == 0.0 and VARIANTS["muzero_nosearch"].simulations == 1
