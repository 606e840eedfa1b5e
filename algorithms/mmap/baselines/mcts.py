"""Pure MCTS on the true game dynamics (the "search only" arm of the paper's ablation, Figure 7).

For every buffer with more than one legal action, run UCT simulations from the current state:
- selection: untried actions first (in greedy-preference order), then the child maximising
  Q_norm + c * sqrt(ln N_parent / N_child), with Q min-max normalised over the tree (rewards are
  microseconds, so no fixed exploration constant fits every workload);
- expansion: one new child per simulation;
- evaluation: the rewards of a rollout of `rollout_depth` moves by the rollout policy ("greedy": take a
  positive benefit with the smallest footprint, else Drop; or "random") -- truncated because full
  episodes cost O(buffers) each. Depths 8, 16 and 32 were within noise of each other on the ten parsed
  workloads at a budget of 100 episodes (summed normalised rewards 5.95, 5.89, 6.01); 32 is the default;
- backup: undiscounted sums of rewards (single-player game, the paper's discount is 0.9999 ~ 1).
The most visited root action is played and its subtree kept for the next move.

Budget: total game moves, simulations included. Simulations per move are the budget left spread over the
decisions left (buffers with a positive initial benefit), capped at `simulations`. No search is spent on
a buffer whose current benefit is zero (it is dropped: placing it earns nothing and only takes space) nor
on a move whose share cannot try every legal action once (the greedy policy plays it). Drop-backup is on,
so every game completes. States are not stored in the
tree: each simulation clones the root game and replays the path.
"""

from __future__ import annotations

import math

import numpy as np

from algorithms.mmap.baselines.policies import greedy_action, legal_list
from algorithms.mmap.baselines.result import Result, new_game, result_of
from algorithms.mmap.game import DROP, MMapGame
from algorithms.mmap.problem import Problem


class Node:
    __slots__ = ("children", "visits", "return_sum", "untried")

    def __init__(self):
        self.children: dict = {}
        self.visits = 0
        self.return_sum = 0.0
        self.untried = None

    def mean(self) -> float:
        return self.return_sum / self.visits


def mcts_play(problem: Problem, seed: int = 0, budget: int | None = None, simulations: int = 16,
              rollout_depth: int = 32, exploration: float = 1.0, rollout: str = "greedy") -> Result:
    rng = np.random.default_rng(seed)
    rollout_policy = greedy_action if rollout == "greedy" else (lambda game: _random_action(game, rng))
    budget = simulations * (rollout_depth + 2) * problem.num_buffers if budget is None else budget
    game = new_game(problem)
    helps = np.array(problem.initial_benefit + (0.0,)) > 0
    decisions_from = np.cumsum(helps[::-1])[::-1].tolist()
    root = Node()
    actions = []
    moves_used = 0
    while not game.done:
        legal = legal_list(game)
        share = (budget - moves_used) // (max(decisions_from[game.position], 1) * (rollout_depth + 2))
        count = min(simulations, share)
        if len(legal) == 1 or count < len(legal) or (game.current_benefit() <= 0 and legal[-1] == DROP):
            action = legal[0] if len(legal) == 1 else greedy_action(game)
            root = Node()
        else:
            bounds = [math.inf, -math.inf]
            for _ in range(count):
                moves_used += _simulate(game, root, rollout_policy, rollout_depth, exploration, bounds)
            action = max(root.children.items(), key=lambda item: (item[1].visits, item[1].mean()))[0]
            root = root.children[action]
        position, restores = game.position, game.restores
        game.play(action)
        moves_used += 1
        actions.append(action)
        if game.restores != restores or game.position != position + 1:
            root = Node()
    return result_of("mcts", game, actions, moves_used)


def _simulate(root_game: MMapGame, root: Node, rollout_policy, depth: int, exploration: float, bounds) -> int:
    """One simulation; returns the game moves it spent."""
    game = root_game.clone()
    node, path, moves = root, [], 0
    while not game.done:
        if node.untried is None:
            preferred = greedy_action(game)
            node.untried = [preferred] + [a for a in legal_list(game) if a != preferred]
        if node.untried:
            action = node.untried.pop(0)
            child = node.children[action] = Node()
        else:
            action, child = _select(node, exploration, bounds)
        path.append((child, game.play(action)))
        moves += 1
        node = child
        if child.visits == 0:
            break
    value = 0.0
    for _ in range(depth):
        if game.done:
            break
        value += game.play(rollout_policy(game))
        moves += 1
    root.visits += 1
    for child, reward in reversed(path):
        value += reward
        child.visits += 1
        child.return_sum += value
        bounds[0], bounds[1] = min(bounds[0], child.mean()), max(bounds[1], child.mean())
    return moves


def _select(node: Node, exploration: float, bounds):
    low, high = bounds
    scale = high - low if high > low else 1.0
    log_visits = math.log(node.visits)

    def score(item):
        child = item[1]
        return (child.mean() - low) / scale + exploration * math.sqrt(log_visits / child.visits)

    return max(node.children.items(), key=score)


def _random_action(game: MMapGame, rng) -> int:
    legal = legal_list(game)
    return legal[int(rng.integers(len(legal)))]
