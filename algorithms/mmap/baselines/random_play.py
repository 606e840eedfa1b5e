"""Random baseline: uniformly random legal moves, episode after episode until the budget is spent; keeps the best."""

from __future__ import annotations

import numpy as np

from algorithms.mmap.baselines.policies import legal_list
from algorithms.mmap.baselines.result import Result, new_game, result_of
from algorithms.mmap.problem import Problem


def random_play(problem: Problem, seed: int = 0, budget: int | None = None) -> Result:
    """`budget`: game moves; at least one episode is always played."""
    rng = np.random.default_rng(seed)
    budget = problem.num_buffers if budget is None else budget
    best, best_actions, moves_used = None, (), 0
    while best is None or moves_used < budget:
        game = new_game(problem)
        actions = []
        while not game.done:
            legal = legal_list(game)
            action = legal[int(rng.integers(len(legal)))]
            game.play(action)
            actions.append(action)
        moves_used += game.moves
        if best is None or game.total_reward > best.total_reward:
            best, best_actions = game, actions
    return result_of("random", best, best_actions, moves_used)
