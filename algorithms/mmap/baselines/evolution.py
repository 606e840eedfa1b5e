"""Evolution strategies over action preferences (Salimans et al., 2017), the paper's ES baseline.

Parameters theta: one preference per (buffer, action), shape (num_buffers, 3). A parameter vector is
decoded greedily: at each buffer, the legal action with the highest preference. Each generation:

    eps_1..eps_n ~ N(0, I);  evaluate F(theta + sigma eps_i) and F(theta - sigma eps_i)   (antithetic pairs)
    u = centred ranks of all 2n fitnesses, in [-0.5, 0.5]                                 (rank-normalised)
    theta <- theta + lr / (2 n sigma) * sum_i (u_i+ - u_i-) eps_i

Fitness F is the game's return (Drop-backup on, so every decoding completes). The best game seen in any
evaluation is the result. Choices the paper leaves open: theta starts at zero (the first generation is
random search), sigma = 1, lr = 2 (greedy decoding is scale free, so only the ratio matters; 2 moves the
mean by about one noise standard deviation per generation), n = 4 pairs. Budget: game moves; at least
one generation runs.
"""

from __future__ import annotations

import numpy as np

from algorithms.mmap.baselines.result import Result, result_of
from algorithms.mmap.game import MMapGame
from algorithms.mmap.problem import Problem


def evolution_strategies(problem: Problem, seed: int = 0, budget: int | None = None, pairs: int = 4,
                         sigma: float = 1.0, learning_rate: float = 2.0) -> Result:
    rng = np.random.default_rng(seed)
    budget = 2 * pairs * problem.num_buffers if budget is None else budget
    theta = np.zeros((problem.num_buffers, 3))
    best = None
    moves_used = 0
    while best is None or moves_used < budget:
        noise = rng.standard_normal((pairs,) + theta.shape)
        fitness = np.empty((pairs, 2))
        for pair in range(pairs):
            for side, sign in enumerate((1.0, -1.0)):
                game, actions = decode(problem, theta + sign * sigma * noise[pair])
                moves_used += game.moves
                fitness[pair, side] = game.total_reward
                if best is None or game.total_reward > best[0].total_reward:
                    best = (game, actions)
        ranks = centred_ranks(fitness)
        step = np.tensordot(ranks[:, 0] - ranks[:, 1], noise, axes=1)
        theta += learning_rate / (2 * pairs * sigma) * step
    return result_of("es", best[0], best[1], moves_used)


def decode(problem: Problem, preferences: np.ndarray):
    """Play the game taking, at every buffer, the legal action with the highest preference."""
    game = MMapGame(problem, drop_backup=True)
    rows = preferences.tolist()
    actions = []
    while not game.done:
        legal = game.legal_actions()
        row = rows[game.position]
        action = max((a for a in range(3) if legal[a]), key=row.__getitem__)
        game.play(action)
        actions.append(action)
    return game, actions


def centred_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks of `values` scaled to [-0.5, 0.5], same shape (Salimans et al.'s fitness shaping)."""
    flat = values.ravel()
    ranks = np.empty(flat.size)
    ranks[flat.argsort(kind="stable")] = np.arange(flat.size)
    return (ranks / max(flat.size - 1, 1) - 0.5).reshape(values.shape)
