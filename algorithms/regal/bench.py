"""The paper's evaluation (§5.3-5.4): REGAL-5K against BRKGA-5K and BRKGA-50K on the test graphs.

Per test graph and objective: BRKGA with uniform proposals at the reference budget (5,000 evaluations),
BRKGA with the trained policy's proposals (each op's most likely action, or with ``--no-greedy`` one
action per op drawn from the policy) at the same budget, and uniform
BRKGA at ten times the budget (50,000), all with the same BRKGA seed. Improvement is
``(cost(BRKGA-5K) - cost(X)) / cost(BRKGA-5K)`` in percent; REGAL "matches or beats" BRKGA-5K when its cost
is not larger (relative tolerance 1e-9).
"""

from __future__ import annotations

import dataclasses

import matplotlib
import matplotlib.ticker
import numpy as np

from algorithms.regal.graph import CompGraph
from algorithms.regal.parallel import run_jobs

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen before pyplot loads)

TIE = 1e-9


@dataclasses.dataclass(frozen=True)
class Outcome:
    """Costs per test graph for one objective."""

    kind: str
    names: list[str]
    brkga: np.ndarray  # uniform BRKGA at the reference budget
    regal: np.ndarray  # the policy's proposals at the reference budget
    brkga_big: np.ndarray  # uniform BRKGA at the large budget
    budget: int
    big_budget: int

    def improvement(self, cost: np.ndarray) -> np.ndarray:
        return (self.brkga - cost) / self.brkga * 100.0

    def summary(self) -> dict[str, float]:
        """Over every case; the large budget's columns over the cases it ran on (NaN where it did not)."""
        regal, big = self.improvement(self.regal), self.improvement(self.brkga_big)
        ran = ~np.isnan(self.brkga_big)
        return {"graphs": len(self.names),
                "match_or_beat": float(np.mean(self.regal <= self.brkga * (1 + TIE)) * 100),
                "mean_improvement": float(regal.mean()), "best": float(regal.max()), "worst": float(regal.min()),
                "big_cases": int(ran.sum()), "regal_on_big_cases": float(regal[ran].mean()) if ran.any() else np.nan,
                "brkga_big_improvement": float(big[ran].mean()) if ran.any() else np.nan,
                "regal_vs_big": float(np.mean(self.regal[ran] <= self.brkga_big[ran] * (1 + TIE)) * 100)
                if ran.any() else np.nan}


def evaluate(graphs: list[CompGraph], actions: list[np.ndarray], kind: str, budget: int = 5000,
             big_budget: int = 50000, seed: int = 0, workers: int = 1, uniform_share: float = 0.0) -> Outcome:
    """Test case k: ``graphs[k]`` with BRKGA seed ``seed + k``; REGAL's proposal hedged by ``uniform_share``
    (`brkga.Proposal`)."""
    jobs = []
    for k, (graph, action) in enumerate(zip(graphs, actions)):
        jobs += [(graph, kind, budget, None, seed + k), (graph, kind, budget, action, seed + k, uniform_share),
                 (graph, kind, big_budget, None, seed + k)]
    costs = run_jobs(jobs, workers).reshape(len(graphs), 3)
    return Outcome(kind, [g.name for g in graphs], costs[:, 0], costs[:, 1], costs[:, 2], budget, big_budget)


def markdown(outcomes: list[Outcome]) -> str:
    """The README table: one row per objective."""
    first = outcomes[0]
    small, big = budget_name(first.budget), budget_name(first.big_budget)
    lines = [f"| objective | test graphs | REGAL-{small} matches or beats BRKGA-{small} | mean improvement | best | "
             f"worst | BRKGA-{big} mean improvement | REGAL-{small} <= BRKGA-{big} |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for outcome in outcomes:
        s = outcome.summary()
        lines.append(f"| {outcome.kind} | {s['graphs']} | {s['match_or_beat']:.1f}% | {s['mean_improvement']:+.2f}% | "
                     f"{s['best']:+.2f}% | {s['worst']:+.2f}% | {s['brkga_big_improvement']:+.2f}% | "
                     f"{s['regal_vs_big']:.1f}% |")
    return "\n".join(lines)


def plot(outcomes: list[Outcome], out: str) -> None:
    """The paper's Fig. 2 as sorted per-graph bars: REGAL's improvement over BRKGA at the same budget,
    green where REGAL is better, red where worse (ties drawn as zero-height bars, counted in the title)."""
    figure, axes = plt.subplots(1, len(outcomes), figsize=(6 * len(outcomes), 4), dpi=120, squeeze=False)
    for axis, outcome in zip(axes[0], outcomes):
        improvement = np.sort(outcome.improvement(outcome.regal))[::-1]
        colours = ["tab:green" if v > 0 else "tab:red" if v < 0 else "tab:gray" for v in improvement]
        axis.bar(np.arange(improvement.size), improvement, color=colours, width=0.9)
        axis.axhline(0.0, color="black", linewidth=0.6)
        s = outcome.summary()
        axis.set_title(f"{outcome.kind}: REGAL matches or beats BRKGA-{budget_name(outcome.budget)} on "
                       f"{s['match_or_beat']:.0f}%", fontsize=9)
        axis.set_xlabel("test graphs, sorted")
        axis.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        axis.set_ylabel(f"% improvement over BRKGA-{budget_name(outcome.budget)}")
    figure.tight_layout()
    figure.savefig(out)
    plt.close(figure)


def budget_name(evaluations: int) -> str:
    return f"{evaluations // 1000}K" if evaluations % 1000 == 0 else str(evaluations)
