"""Move sequences played through the NumPy game (the ground truth), recorded move by move for the RT game's
differential tests: random, heuristic and ES-decoded play, with or without Drop-backup (the paper's clean
backup point, the one the RT game implements)."""

from __future__ import annotations

import numpy as np

from algorithms.mmap.baselines.evolution import benefit_prior
from algorithms.mmap.baselines.heuristic import planned_units, tensor_units
from algorithms.mmap.baselines.policies import first_legal, legal_list
from algorithms.mmap.game import COPY, DROP, NO_COPY, MMapGame


def random_policy(problem, seed):
    rng = np.random.default_rng(seed)

    def choose(game):
        legal = legal_list(game)
        return legal[int(rng.integers(len(legal)))]

    return choose


def heuristic_policy(problem, seed=0):
    """heuristic_play's move rule (baselines/heuristic.py), played online in whichever game it is given."""
    planned, unit_of_tensor = planned_units(problem), tensor_units(problem)

    def choose(game):
        if unit_of_tensor[problem.tensor[game.position]] in planned:
            return first_legal(game, (NO_COPY, COPY, DROP))
        return first_legal(game, (DROP, NO_COPY, COPY))

    return choose


def es_policy(problem, seed):
    """Greedy decoding of one ES population member, theta = benefit prior + sigma * eps (evolution.py)."""
    theta = benefit_prior(problem) + 0.5 * np.random.default_rng(seed).standard_normal((problem.num_buffers, 3))

    def choose(game):
        legal, row = game.legal_actions(), theta[game.position]
        return max((a for a in range(3) if legal[a]), key=row.__getitem__)

    return choose


POLICIES = {"random": random_policy, "heuristic": heuristic_policy, "es": es_policy}


def numpy_trace(problem, policy, drop_backup: bool, max_moves: int | None = None) -> dict:
    """Per move: mask before it, the Copy/NoCopy candidates, the action, reward, chosen placement, and
    position, done, feasible, return, supply and used copy edges after it."""
    game = MMapGame(problem, drop_backup=drop_backup)
    rows: dict = {key: [] for key in ("legal", "copy", "no_copy", "action", "reward", "placement", "position",
                                      "done", "feasible", "total", "supply", "edges")}
    while not game.done and (max_moves is None or game.moves < max_moves):
        copy, no_copy, _ = game.candidates
        rows["legal"].append(game.legal_actions())
        rows["copy"].append(None if copy is None else (copy.start, copy.end, copy.column, copy.copy_first,
                                                       copy.copy_last))
        rows["no_copy"].append(None if no_copy is None else (no_copy.start, no_copy.end, no_copy.column,
                                                             no_copy.reuses))
        action = policy(game)
        chosen = game.candidates[action] if action != DROP else None
        rows["action"].append(action)
        rows["placement"].append((-1, -1, -1) if chosen is None else (chosen.start, chosen.end, chosen.column))
        rows["reward"].append(game.play(action))
        rows["position"].append(game.position)
        rows["done"].append(game.done)
        rows["feasible"].append(game.feasible)
        rows["total"].append(game.total_reward)
        rows["supply"].append(game.supply.copy())
        rows["edges"].append(game.copy_edges.copy())
    rows["restores"] = game.restores
    return rows
