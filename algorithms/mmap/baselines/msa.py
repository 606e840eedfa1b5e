"""A compiler baseline built the way XLA's memory-space assignment (MSA) works, within the game's rules.

MSA sorts buffers by how much fast memory buys per byte and per unit of time they would hold it, allocates
them in that order (prefetching each use over an interval its cost model picks, evicting outputs), and
when an allocation fails it retries with a different limit. Here:

1. Rank. Every buffer with a positive initial benefit gets a density: benefit / (columns x steps held),
   the steps held being the shortest interval whose supply covers the copy's demand (MSA's cost-analysis
   prefetch picker: overlap the copy with just enough compute), and 1 for a reuse of an allocation that
   reaches the buffer's instruction.
2. Allocate, in program order (the game decides buffers chronologically): a buffer whose density is at least
   the pass's threshold takes the fast-memory placement holding the least space x time (a reuse, an
   extension of its tensor's allocation, or a prefetch / an eviction over the interval the game's supply
   accounting picks); every other buffer, and any whose placement does not fit, stays in slow memory.
   Alias groups are all in or all out (Drop-backup drops a group that no longer fits).
3. Retry. One pass per threshold, the density quantiles `1 - fraction` for `fraction` in `FRACTIONS`
   (all positive-benefit buffers first, then fewer and denser ones); the compiler keeps the pass its cost
   model (the game's return) rates best.
The budget is ignored: the passes are a fixed compile-time cost, as in a compiler.
"""

from __future__ import annotations

import numpy as np

from algorithms.mmap.baselines.policies import first_legal, smallest_placement
from algorithms.mmap.baselines.result import Result, new_game, result_of
from algorithms.mmap.game import COPY, DROP, NO_COPY
from algorithms.mmap.problem import Problem

FRACTIONS = (1.0, 0.8, 0.6, 0.45, 0.3, 0.2, 0.1, 0.05)


def copy_steps(problem: Problem, buffer: int) -> int:
    """Steps of the shortest copy interval whose supply covers the buffer's demand (live range permitting)."""
    target, demand = problem.target[buffer], problem.demand[buffer]
    if problem.is_output[buffer]:
        steps = range(target + 1, problem.live_end[buffer] + 1)
    else:
        steps = range(target - 1, problem.live_start[buffer] - 1, -1)
    covered, count = 0, 0
    for time in steps:
        if covered >= demand:
            break
        covered += int(problem.supply[time])
        count += 1
    return count + 1


def densities(problem: Problem) -> np.ndarray:
    """Benefit per column per step held; 0 for buffers fast memory does not speed up."""
    density = np.zeros(problem.num_buffers)
    for buffer in range(problem.num_buffers):
        benefit = problem.initial_benefit[buffer]
        if benefit > 0:
            density[buffer] = benefit / (max(problem.columns[buffer], 1) * copy_steps(problem, buffer))
    return density


def msa_pass(problem: Problem, density: np.ndarray, threshold: float):
    game = new_game(problem)
    actions = []
    while not game.done:
        buffer = game.position
        if density[buffer] > 0 and density[buffer] >= threshold and game.current_benefit() > 0:
            action = smallest_placement(game, (NO_COPY, COPY))
        else:
            action = first_legal(game, (DROP, NO_COPY, COPY))
        game.play(action)
        actions.append(action)
    return game, actions


def msa_play(problem: Problem, seed: int = 0, budget: int | None = None) -> Result:
    density = densities(problem)
    positive = density[density > 0]
    best, best_actions, moves = None, (), 0
    thresholds = sorted({float(np.quantile(positive, 1 - f)) for f in FRACTIONS}) if positive.size else [np.inf]
    for threshold in thresholds:
        game, actions = msa_pass(problem, density, threshold)
        moves += game.moves
        if best is None or game.total_reward > best.total_reward:
            best, best_actions = game, actions
    return result_of("msa", best, best_actions, moves)
