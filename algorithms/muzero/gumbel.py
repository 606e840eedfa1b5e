"""Gumbel MuZero's selection and outcome (Danihelka et al., 2022, "Policy improvement by planning with Gumbel"),
the rules `mcts.py` applies under ``SearchConfig.search = "gumbel"`` (its module docstring states them): at the root,
Gumbel-top-k with sequential halving as a fixed schedule (`considered_visits`), elsewhere the deterministic rule over
the improved policy ``softmax(logits + sigma(completed Q))`` (`completed_q`); the improved policy and the action at
the root (`gumbel_outcome`)."""

from __future__ import annotations

import math

import numpy as np

from algorithms.muzero.tree import RT, SearchConfig, Tree, at, hot, mask_invalid
from timerl.rt import functional as F

LOW_LOGIT = -1e9  # Gumbel MuZero's root score floor: an illegal action's logit is the lowest float


def gumbel_outcome(visits: RT, qvalues: RT, raw_value: RT, logits: RT, gumbel: RT, invalid: RT,
                   config: SearchConfig) -> tuple[RT, RT]:
    """The improved policy (B, A) and the action (B,) at a root with children ``visits`` and ``qvalues`` (B, A),
    network value ``raw_value`` (B,), masked prior ``logits`` and scaled ``gumbel`` (B, A): of the most visited
    actions, the one with the largest ``g + logits + sigma(completed Q)``."""
    completed = completed_q(qvalues, visits, raw_value, logits, config)
    policy = F.softmax(mask_invalid(logits + completed, invalid), dim=-1)
    most = visits.max(dim=-1, keepdim=True)
    score = considered_score(most, gumbel, logits, completed, visits)
    return policy, F.where(invalid, float("-inf"), score).argmax(dim=-1)


def considered_visits(max_considered: int, simulations: int) -> tuple[int, ...]:
    """Sequential halving as a schedule: at simulation s, the visit count a root action must have to be visited
    (of those, the best scored is). The considered actions are visited in turns of one visit each, each phase
    giving every one of them max(1, floor(n / (ceil(log2 m) * considered))) turns, after which the considered
    halve (down to 2, not below), until the n simulations are used (the paper's Section 3.2 with mctx's choices:
    m <= 1 visits one action throughout)."""
    if max_considered <= 1:
        return tuple(range(simulations))
    phases = math.ceil(math.log2(max_considered))
    schedule: list[int] = []
    considered, visits = max_considered, 0  # every considered action has ``visits`` at the start of a turn
    while len(schedule) < simulations:
        for _ in range(max(1, simulations // (phases * considered))):
            schedule.extend([visits] * considered)
            visits += 1
        considered = max(2, considered // 2)
    return tuple(schedule[:simulations])


def scaled_gumbel(gumbel: RT | None, scale: RT | None, logits: RT) -> RT:
    if gumbel is None:
        return F.zeros(tuple(int(d) for d in logits.shape))
    return gumbel if scale is None else gumbel * scale


def gumbel_actions(tree: Tree, invalid: RT, gumbel: RT, config: SearchConfig, nodes: int) -> RT:
    """(B, N): every node's Gumbel MuZero action, the root's by sequential halving, the others' by the
    deterministic rule (module docstring)."""
    visits = tree.children_visits
    qvalues = tree.children_rewards + config.discount * tree.children_values
    completed = completed_q(qvalues, visits, tree.raw_values, tree.children_prior_logits, config)  # (B, N, A)
    improved = F.softmax(tree.children_prior_logits + completed, dim=-1)
    interior = (improved - visits / (1.0 + visits.sum(dim=-1, keepdim=True))).argmax(dim=-1)
    root_visits = visits.spatial[:, 0]
    schedule = considered_schedule(invalid, config)  # (B, S)
    simulation = root_visits.sum(dim=-1).astype("int64")  # (B,) s: every simulation visits one root child
    considered = at(schedule, simulation).unsqueeze(-1)
    score = considered_score(considered, gumbel, tree.children_prior_logits.spatial[:, 0], completed.spatial[:, 0],
                              root_visits)
    root_action = F.where(invalid, float("-inf"), score).argmax(dim=-1)
    at_root = F.tensor((np.arange(nodes) == 0).reshape(1, nodes))
    return F.where(at_root, root_action.unsqueeze(-1), interior)


def considered_schedule(invalid: RT, config: SearchConfig) -> RT:
    """(B, S): `considered_visits` for each search's number of considered actions, min(max_considered, legal)."""
    actions = int(invalid.shape[-1])
    table = np.array([considered_visits(min(legal, config.max_considered), config.num_simulations)
                      for legal in range(actions + 1)], np.float32)  # row: the number of legal actions
    legal = F.where(invalid, 0, 1).sum(dim=-1)
    return F.matmul(hot(legal, actions + 1).astype("float32"), F.tensor(table))


def considered_score(considered: RT, gumbel: RT, logits: RT, completed: RT, visits: RT) -> RT:
    """``g + logits + sigma(completed Q)`` (floored at LOW_LOGIT) for the actions with ``considered`` visits,
    -inf for the others."""
    shifted = logits - logits.max(dim=-1, keepdim=True)
    score = F.maximum(gumbel + shifted + completed, LOW_LOGIT)
    return F.where(visits == considered, score, float("-inf"))


def completed_q(qvalues: RT, visits: RT, raw_value: RT, logits: RT, config: SearchConfig) -> RT:
    """sigma(completed Q) over the last dimension (actions), for any leading dimensions (module docstring): the
    unvisited children's Q is the mixed value (raw_value + sum_b N(b) * sum_{visited} pi(a) Q(a) / sum_{visited}
    pi(a)) / (1 + sum_b N(b))."""
    visited = visits > 0
    prior = F.maximum(F.softmax(logits, dim=-1), float(np.finfo(np.float32).tiny))
    total = visits.sum(dim=-1)
    visited_prior = F.where(visited, prior, 0.0).sum(dim=-1, keepdim=True)
    weighted = F.where(visited, prior * qvalues / F.where(visited, visited_prior, 1.0), 0.0).sum(dim=-1)
    mixed = (raw_value + total * weighted) / (total + 1.0)
    completed = F.where(visited, qvalues, mixed.unsqueeze(-1))
    low, high = completed.min(dim=-1, keepdim=True), completed.max(dim=-1, keepdim=True)
    rescaled = (completed - low) / F.maximum(high - low, config.min_q_range)
    return ((config.maxvisit_init + visits.max(dim=-1)) * config.value_scale).unsqueeze(-1) * rescaled
