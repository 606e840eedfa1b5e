"""Is there anything for a learned proposal to gain, and how much? Proposals that are known in advance,
measured the way the bench measures REGAL (improvement of BRKGA-budget with the proposal over uniform
BRKGA-budget, the same seed, common random numbers):

- ``uniform, other seed``: uniform BRKGA with a different seed. Not a proposal: the spread of the search's
  own luck, which is the noise that REINFORCE's reward carries when the two runs do not share a seed.
- ``oracle``: Betas centred on the keys of the best solution that BRKGA with ten times the budget finds
  (another seed), on every gene (transfers included), concentration 10. An upper bound of what a
  per-instance proposal can buy; no policy sees that solution.
- ``oracle, quantized``: the same, restricted to REGAL's action space (`features.solution_actions`):
  the solution's placement as affinity means 0.9 / 0.1, its op priorities and the transfer keys it reads
  rounded to the nearest of the 5 quantized means, concentration 10. What a perfect policy over our 16
  actions per head could reach if it knew the solution.
- ``oracle placement``: the quantized oracle's affinities alone (mean 0.9 for the solution's device,
  concentration 4), priorities and transfers uniform: what knowing only where each op runs buys.
- ``placement of a same-budget search``: the same, centred on the best solution of uniform BRKGA with the
  search's own budget (another seed) instead of ten times it. The two rows together say how good a
  placement must be to help: on the 12-28-op graphs at BRKGA-5K a BRKGA-50K placement gains +1.93% (97.5%
  of cases), a BRKGA-5K one +0.01% (90.0%), a BRKGA-500 one -1.98%.
- ``priority by height`` / ``priority by depth``: a graph-general rule a GNN can express from its node
  features: op priority mean rising with the op's longest path to a sink (critical-path list scheduling)
  or with its longest path from a source, quantized to the 5 means, concentration 4; affinities uniform.
- ``list schedule``: Betas centred on a HEFT list schedule (`features.list_schedule`, computed from the
  graph alone, no search): each op's affinity for the list schedule's device mean 0.9, for the other 0.1,
  its priority rising with how early it starts there (5 equal bins of the start rank), concentration 4
  throughout. A proposal a policy can express from its node features (the list schedule is three of them).
- ``list schedule where it fits``: the list schedule's proposal on graphs where the list schedule fits the
  memory limit (`features.list_schedule_fits`), uniform elsewhere: the runtime policy's imitation target.
- ``depth first where wide``: `features.depth_order_actions` (op priorities rising with depth, concentration
  `features.DEPTH_CONCENTRATION`, affinities uniform) on graphs with a depth level of 4 ops or more
  (`features.is_wide`), uniform elsewhere: the peak-memory policy's imitation target.
- ``transfers first``: every op priority Beta(3, 27) (mean 0.1), transfers uniform. The same Beta on every
  op keeps the ops' relative order (inversion sampling is monotone) and places them below the transfers,
  so a ready transfer runs before a ready op: a rule the first trained policies found on their own.

``python -m algorithms.regal diagnose`` prints one table per objective.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from algorithms.regal import brkga, features
from algorithms.regal.graph import CompGraph
from algorithms.regal.features import list_schedule_actions, rank_actions
from algorithms.regal.perfmodel import DEVICES


def oracle_proposal(graph: CompGraph, keys: np.ndarray, concentration: float = 10.0) -> brkga.Proposal:
    mean = np.clip(keys, 0.05, 0.95)
    return brkga.Proposal(mean * concentration, (1.0 - mean) * concentration)


def quantized_actions(graph: CompGraph, keys: np.ndarray, concentration: float = 10.0) -> np.ndarray:
    """(ops, HEADS) actions centred on the solution ``keys`` (`features.solution_actions`)."""
    return features.solution_actions(graph, keys, concentration)


def placement_actions(graph: CompGraph, keys: np.ndarray, concentration: float = 4.0) -> np.ndarray:
    """(ops, HEADS) actions with the solution ``keys``' placement as affinities (`features.solution_actions`)
    and every other head uniform."""
    actions = features.solution_actions(graph, keys, concentration)
    actions[:, DEVICES:] = features.UNIFORM
    return actions


def transfers_first(graph: CompGraph) -> np.ndarray:
    actions = np.full((graph.num_ops, features.HEADS), features.UNIFORM)
    actions[:, DEVICES] = features.grid_actions(np.zeros(graph.num_ops, int), 30.0)
    return actions


@dataclasses.dataclass(frozen=True)
class Gap:
    name: str
    improvement: np.ndarray  # (graphs, seeds) percent over uniform BRKGA with the same seed

    def row(self) -> str:
        per_graph = self.improvement.mean(axis=1)
        return (f"| {self.name} | {self.improvement.mean():+.2f}% | {np.mean(self.improvement >= -1e-7) * 100:.0f}% | "
                f"{np.mean(per_graph >= -1e-7) * 100:.0f}% | {per_graph.max():+.2f}% | {per_graph.min():+.2f}% |")


def gaps(graphs: list[CompGraph], kind: str, budget: int = 500, seeds: int = 3,
         oracle_budget: int | None = None) -> list[Gap]:
    oracle_budget = oracle_budget or 10 * budget
    names = ["uniform, other seed", "oracle", "oracle, quantized", "oracle placement",
             "placement of a same-budget search", "priority by height", "priority by depth", "list schedule",
             "list schedule where it fits", "depth first where wide", "transfers first"]
    result = np.zeros((len(names), len(graphs), seeds))
    for g, graph in enumerate(graphs):
        best = brkga.optimize(graph, kind, oracle_budget, seed=1_000_003).best
        peer = brkga.optimize(graph, kind, budget, seed=1_000_033).best
        depth, height = features.path_lengths(graph)
        actions = [quantized_actions(graph, best), placement_actions(graph, best), placement_actions(graph, peer),
                   rank_actions(graph, height), rank_actions(graph, depth),
                   list_schedule_actions(graph), features.imitation_target(graph, "runtime"),
                   features.imitation_target(graph, "peak_memory"), transfers_first(graph)]
        proposals = [None, oracle_proposal(graph, best)] + [features.proposal(graph, a) for a in actions]
        for seed in range(seeds):
            uniform = brkga.optimize(graph, kind, budget, seed=seed).best_cost
            for p, proposal in enumerate(proposals):
                other = seed + 7919 if proposal is None else seed
                cost = brkga.optimize(graph, kind, budget, proposal, seed=other).best_cost
                result[p, g, seed] = (uniform - cost) / uniform * 100.0
    return [Gap(name, result[p]) for p, name in enumerate(names)]


def markdown(kind: str, budget: int, rows: list[Gap]) -> str:
    lines = [f"| proposal ({kind}, BRKGA-{budget}) | mean improvement | matches or beats (graph, seed) | "
             f"matches or beats (graph, mean over seeds) | best graph | worst graph |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    return "\n".join(lines + [gap.row() for gap in rows])
