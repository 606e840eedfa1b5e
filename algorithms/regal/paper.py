"""REGAL at the paper's size: ``python -m algorithms.regal paper`` trains one policy per objective by
REINFORCE on the 100-300-op synthetic training split (`datasets.paper_splits`) and the real programs'
training split (`datasets.real_splits`, programs of at most ``--max-train-ops`` ops), then evaluates it on
both test splits: REGAL-5K against BRKGA-5K and BRKGA-50K (`bench.evaluate`), every row labelled with how
its policy was trained (`Recipe.label`).

Training (`fit`): an optional warm start, ``--warm-start N`` Adam steps of behaviour cloning of the
objective's heuristic proposal (`features.imitation_target`; 0: none), then ``--iterations`` REINFORCE
iterations (`train.train`): the reward ``-cost(REGAL) / cost(uniform BRKGA)`` with BRKGA-``--train-budget``
inside it, a batch of ``--batch`` episodes (``--samples`` sampled actions per graph, the mean reward of a
graph's samples the baseline of its advantage, the baseline GNN trained alongside), 16 quantized
(mean, concentration) actions per Beta. `RECIPES` holds the settings the committed weights
(``algorithms/regal/weights/paper_<objective>.npy``) were trained with.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import matplotlib
import numpy as np

from algorithms.regal import bench, datasets, features, train
from algorithms.regal.graph import CompGraph
from algorithms.regal.parallel import run_jobs
from algorithms.regal.policy import Sizes

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen before pyplot loads)

WEIGHTS = Path(__file__).parent / "weights"


@dataclasses.dataclass(frozen=True)
class Recipe:
    kind: str
    iterations: int = 30
    batch: int = 8
    samples: int = 4
    train_budget: int = 500
    lr: float = 1e-3
    warm_start: int = 200  # imitation steps of the warm target before REINFORCE (0: none)
    warm_target: str = "heuristic"  # a key of WARM_TARGETS
    imitation_lr: float = 1e-2
    seed: int = 0
    max_train_ops: int = 600
    uniform_logit: float = 3.0

    @property
    def sizes(self) -> Sizes:
        return Sizes(uniform_logit=self.uniform_logit)

    @property
    def label(self) -> str:
        reinforce = (f"REINFORCE, {self.iterations} it x {self.batch} episodes, BRKGA-{self.train_budget} reward"
                     if self.iterations else "no REINFORCE")
        if not self.warm_start:
            return reinforce + ", from scratch"
        return reinforce + f", warm start: {self.warm_start} steps imitating {WARM_NAMES[self.warm_target]}"


WARM_TARGETS = {"heuristic": features.imitation_target,
                "level": lambda graph, kind: features.level_order_actions(graph)}
WARM_NAMES = {"heuristic": "the objective's heuristic", "level": "a level order"}
RECIPES = {"runtime": Recipe("runtime", warm_target="level"),
           "peak_memory": Recipe("peak_memory")}


def training_graphs(kind: str, max_ops: int) -> list[CompGraph]:
    real = [graph for graph in datasets.real_splits().train if graph.num_ops <= max_ops]
    return datasets.paper_splits(kind).train + real


def fit(recipe: Recipe, graphs: list[CompGraph], progress: bool = False) -> train.Trained:
    config = train.Config(kind=recipe.kind, iterations=recipe.iterations, batch=recipe.batch,
                          train_budget=recipe.train_budget, lr=recipe.lr, sizes=recipe.sizes, seed=recipe.seed,
                          samples=recipe.samples)
    start = None
    if recipe.warm_start:
        targets = [WARM_TARGETS[recipe.warm_target](graph, recipe.kind) for graph in graphs]
        cloned = train.imitate(graphs, targets, dataclasses.replace(config, iterations=recipe.warm_start,
                                                                    lr=recipe.imitation_lr), progress=progress)
        if not recipe.iterations:
            return cloned
        start = cloned.weights
    return train.train(graphs, config, progress=progress, start=start)


def load(kind: str, graphs: list[CompGraph], folder: Path = WEIGHTS) -> train.Trained:
    recipe = RECIPES[kind]
    return train.load(folder / f"paper_{kind}.npy", recipe.sizes, max(graph.num_ops for graph in graphs))


def evaluate(trained: train.Trained, graphs: list[CompGraph], kind: str, budget: int = 5000,
             big_budget: int = 50000, seeds: int = 1, seed: int = 0, big_cases: int | None = None) -> bench.Outcome:
    """`bench.evaluate`'s comparison (test case k: BRKGA seed ``seed + k`` for every method), with uniform
    BRKGA at ``big_budget`` on the first ``big_cases`` cases only (all by default; NaN on the others)."""
    cases = graphs * seeds
    big_cases = len(cases) if big_cases is None else min(big_cases, len(cases))
    actions = train.propose(trained, cases, seed=seed)
    jobs = [job for k, (graph, action) in enumerate(zip(cases, actions))
            for job in ((graph, kind, budget, None, seed + k), (graph, kind, budget, action, seed + k))]
    jobs += [(graph, kind, big_budget, None, seed + k) for k, graph in enumerate(cases[:big_cases])]
    costs = run_jobs(jobs)
    small = costs[:2 * len(cases)].reshape(len(cases), 2)
    big = np.full(len(cases), np.nan)
    big[:big_cases] = costs[2 * len(cases):]
    return bench.Outcome(kind, [graph.name for graph in cases], small[:, 0], small[:, 1], big, budget, big_budget)


def limits_curve(trained: train.Trained, graphs: list[CompGraph], kind: str, budgets: tuple[int, ...],
                 reference: int = 5000, seed: int = 0) -> dict[str, np.ndarray]:
    """The paper's Fig. 3: mean improvement over uniform BRKGA-``reference`` of REGAL and of uniform BRKGA
    at each evaluation limit in ``budgets`` (test case k with BRKGA seed ``seed + k`` throughout)."""
    actions = train.propose(trained, graphs, seed=seed)
    jobs = [(graph, kind, reference, None, seed + k) for k, graph in enumerate(graphs)]
    for budget in budgets:
        jobs += [(graph, kind, budget, action, seed + k) for k, (graph, action) in enumerate(zip(graphs, actions))]
        jobs += [(graph, kind, budget, None, seed + k) for k, graph in enumerate(graphs)]
    costs = run_jobs(jobs).reshape(1 + 2 * len(budgets), len(graphs))
    improvement = (costs[0] - costs[1:]) / costs[0] * 100.0
    return {"budgets": np.asarray(budgets), "regal": improvement[0::2].mean(axis=1),
            "brkga": improvement[1::2].mean(axis=1)}


def plot_limits(curves: dict[str, dict[str, np.ndarray]], out: str, reference: int = 5000) -> None:
    """One panel per objective: mean % improvement over BRKGA-``reference`` against the evaluation limit."""
    figure, axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 3.6), dpi=120, squeeze=False)
    for axis, (kind, curve) in zip(axes[0], curves.items()):
        axis.plot(curve["budgets"], curve["regal"], "o-", label="REGAL")
        axis.plot(curve["budgets"], curve["brkga"], "s--", label="BRKGA")
        axis.axhline(0.0, color="black", linewidth=0.6)
        axis.set_xscale("log")
        axis.set_xlabel("evaluation limit")
        axis.set_ylabel(f"% improvement over BRKGA-{bench.budget_name(reference)}")
        axis.set_title(kind, fontsize=9)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out)
    plt.close(figure)


def markdown(rows: list[tuple[str, str, bench.Outcome]]) -> str:
    """One row per (objective, split): (split name, training label, outcome). The large budget's columns are
    over the cases it ran on, with REGAL's mean improvement on those same cases beside it."""
    first = rows[0][2]
    small, big = bench.budget_name(first.budget), bench.budget_name(first.big_budget)
    lines = [f"| objective | split | trained by | cases | REGAL-{small} matches or beats BRKGA-{small} | "
             f"mean improvement | best | worst | cases with BRKGA-{big} | REGAL-{small} / BRKGA-{big} mean "
             f"improvement there | REGAL-{small} <= BRKGA-{big} |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for split, label, outcome in rows:
        s = outcome.summary()
        lines.append(f"| {outcome.kind} | {split} | {label} | {s['graphs']} | {s['match_or_beat']:.1f}% | "
                     f"{s['mean_improvement']:+.2f}% | {s['best']:+.2f}% | {s['worst']:+.2f}% | {s['big_cases']} | "
                     f"{s['regal_on_big_cases']:+.2f}% / {s['brkga_big_improvement']:+.2f}% | "
                     f"{s['regal_vs_big']:.1f}% |")
    return "\n".join(lines)


def run(kinds: list[str], recipes: dict[str, Recipe], reuse: bool, folder: Path, budget: int, big_budget: int,
        seeds: int, splits: list[str], out: str, fig3: int = 0, limits: tuple[int, ...] = (1000, 2000, 5000, 10000),
        big_cases: int | None = None) -> None:
    """Train (or, with ``reuse``, load) and evaluate each objective; with ``fig3`` > 0, the paper's Fig. 3 on
    the first ``fig3`` synthetic test graphs at the evaluation ``limits`` (``<out>_<objective>_fig3.png``)."""
    rows = []
    for kind in kinds:
        recipe = recipes[kind]
        graphs = training_graphs(kind, recipe.max_train_ops)
        print(f"{kind}: training on {datasets.describe(graphs)}", flush=True)
        start = time.perf_counter()
        if reuse:
            trained = load(kind, graphs, folder)
        else:
            trained = fit(recipe, graphs, progress=True)
            folder.mkdir(parents=True, exist_ok=True)
            np.save(folder / f"paper_{kind}.npy", trained.weights)
            print(f"{kind}: trained in {time.perf_counter() - start:.0f} s ({recipe.label})", flush=True)
        real = sorted(datasets.real_splits().test, key=lambda graph: graph.num_ops)  # smallest first
        held_out = {"synthetic": datasets.paper_splits(kind).test, "real": real}
        for split in splits:
            start = time.perf_counter()
            outcome = evaluate(trained, held_out[split], kind, budget, big_budget, seeds, big_cases=big_cases)
            rows.append((split, recipe.label, outcome))
            print(f"{kind} on {split} ({datasets.describe(held_out[split])}): evaluated in "
                  f"{time.perf_counter() - start:.0f} s", flush=True)
            print(markdown(rows[-1:]), flush=True)
            bench.plot([outcome], f"{out}_{kind}_{split}.png")
        if fig3:
            curve = limits_curve(trained, held_out["synthetic"][:fig3], kind, limits, reference=budget)
            print(f"{kind} Fig. 3 on {fig3} synthetic test graphs:", {key: np.round(value, 2).tolist()
                                                                     for key, value in curve.items()}, flush=True)
            plot_limits({kind: curve}, f"{out}_{kind}_fig3.png", reference=budget)
    if rows:
        print(markdown(rows))
