"""The data of MuZero's search (`mcts.py`): its settings, the root and step a network gives, the tree in fixed-size
arrays laid out as `mctx` lays them out, and the indexing every rule of the search uses (rows of nodes, one action
of a row, masks)."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

import timerl as trl
from timerl.rt import functional as F

RT = trl.RecurrentTensor
UNVISITED = -1
NO_PARENT = -1
SEARCHES = ("puct", "gumbel")


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    num_simulations: int = 16
    max_depth: int | None = None
    """Most edges from the root to a leaf; None: ``num_simulations`` (mctx's default)."""
    discount: float = 0.9999
    pb_c_init: float = 1.25
    pb_c_base: float = 19652.0
    dirichlet_fraction: float = 0.25
    dirichlet_alpha: float = 0.03
    min_q_range: float = 1e-8
    """The smallest range the min-max normalisation of Q divides by (mctx's epsilon by default), in both
    searches. Self-play uses 1.0 (`MuZeroConfig.min_q_range`): Q differences far below it are not stretched to
    the full [0, 1]."""
    search: str = "puct"
    """The selection rule: "puct" (MuZero's) or "gumbel" (Gumbel MuZero's, module docstring)."""
    max_considered: int = 16
    """Gumbel: the most root actions sampled (without replacement) for sequential halving (mctx's default)."""
    value_scale: float = 0.1
    maxvisit_init: float = 50.0
    """Gumbel: sigma(q) = (maxvisit_init + max visits) * value_scale * q (the paper's c_visit and c_scale)."""

    def __post_init__(self):
        if self.search not in SEARCHES:
            raise ValueError(f"SearchConfig.search must be one of {SEARCHES}, got {self.search!r}")

    @property
    def depth(self) -> int:
        return self.num_simulations if self.max_depth is None else self.max_depth


class Root(NamedTuple):
    prior_logits: RT  # (B, A)
    value: RT  # (B,)
    embedding: RT  # (B, H)


class Step(NamedTuple):
    """What ``recurrent_fn(embedding (B, H), action (B,) int64)`` returns."""

    reward: RT  # (B,)
    prior_logits: RT  # (B, A)
    value: RT  # (B,)
    embedding: RT  # (B, H)


class Tree(NamedTuple):
    node_visits: RT
    node_values: RT
    parents: RT
    action_from_parent: RT
    children_index: RT
    children_prior_logits: RT
    children_values: RT
    children_visits: RT
    children_rewards: RT
    embeddings: RT
    node_depth: RT  # (B, N) int64: edges from the root, set when the node is expanded
    node_reward_sum: RT  # (B, N) Z(n): sum over the edges from the root to n of discount^(start depth) * reward
    node_decay: RT  # (B, N) discount^depth(n)
    raw_values: RT  # (B, N) the network's value of the node when it was (last) evaluated

    def root_visits(self) -> RT:
        """(B, A) visit counts of the root's children."""
        return self.children_visits.spatial[:, 0]


def tree_placeholders(batch: int, nodes: int, actions: int, hidden: int, domain) -> Tree:
    per_node, per_edge = (batch, nodes), (batch, nodes, actions)
    return Tree(trl.placeholder(per_node, "float32", domain), trl.placeholder(per_node, "float32", domain),
                trl.placeholder(per_node, "int64", domain), trl.placeholder(per_node, "int64", domain),
                trl.placeholder(per_edge, "int64", domain), trl.placeholder(per_edge, "float32", domain),
                trl.placeholder(per_edge, "float32", domain), trl.placeholder(per_edge, "float32", domain),
                trl.placeholder(per_edge, "float32", domain),
                trl.placeholder((batch, nodes, hidden), "float32", domain), trl.placeholder(per_node, "int64", domain),
                trl.placeholder(per_node, "float32", domain), trl.placeholder(per_node, "float32", domain),
                trl.placeholder(per_node, "float32", domain))


def initial_tree(root: Root, batch: int, nodes: int, actions: int, hidden: int) -> Tree:
    """mctx's ``instantiate_tree_from_root``: empty arrays with the root written into node 0."""
    root_node = F.tensor(np.tile(np.arange(nodes) == 0, (batch, 1)))  # (B, N)
    zeros_edge = F.zeros((batch, nodes, actions))
    return Tree(
        node_visits=F.where(root_node, 1.0, F.zeros((batch, nodes))),
        node_values=F.where(root_node, root.value.unsqueeze(-1), F.zeros((batch, nodes))),
        parents=F.full((batch, nodes), NO_PARENT, "int64"),
        action_from_parent=F.full((batch, nodes), NO_PARENT, "int64"),
        children_index=F.full((batch, nodes, actions), UNVISITED, "int64"),
        children_prior_logits=F.where(root_node.unsqueeze(-1), root.prior_logits.unsqueeze(1), zeros_edge),
        children_values=zeros_edge, children_visits=zeros_edge, children_rewards=zeros_edge,
        embeddings=F.where(root_node.unsqueeze(-1), root.embedding.unsqueeze(1), F.zeros((batch, nodes, hidden))),
        node_depth=F.full((batch, nodes), 0, "int64"), node_reward_sum=F.zeros((batch, nodes)),
        node_decay=F.ones((batch, nodes)),
        raw_values=F.where(root_node, root.value.unsqueeze(-1), F.zeros((batch, nodes))))


def hot(index: RT, size: int) -> RT:
    """``index`` (...) as a one-hot bool (..., size), by comparison (indices here are in range by construction,
    so the range check of ``one_hot`` and ``gather`` is not needed; on jax it would cut the jitted group)."""
    return index.unsqueeze(-1) == F.arange(size)


def rows(array: RT, node: RT) -> RT:
    """``array[b, node[b]]`` for every b: (B, N, ...) and (B,) -> (B, ...)."""
    return of_nodes(array, node.unsqueeze(-1)).squeeze(1)


def of_nodes(array: RT, node: RT) -> RT:
    """``array[b, node[b, k]]`` for every (b, k): (B, N, ...) and (B, K) -> (B, K, ...), as one selection of rows
    of the flattened array (XLA's CPU gather along an inner dimension recomputes its fused operand per element)."""
    batch, nodes = (int(d) for d in array.shape[:2])
    rest, picks = tuple(int(d) for d in array.shape[2:]), int(node.shape[1])
    offsets = F.tensor((np.arange(batch) * nodes).reshape(batch, 1))
    rows = (node + offsets).reshape((batch * picks,))
    flat = array.reshape((batch * nodes,) + (rest or (1,)))
    return F.index_select(flat, 0, rows).reshape((batch, picks) + rest)


def at(row: RT, action: RT) -> RT:
    """``row[b, action[b]]``: (B, A) and (B,) -> (B,)."""
    return F.where(hot(action, int(row.shape[1])), row, F.zeros((), row.dtype)).sum(dim=-1)


def mask_invalid(logits: RT, invalid: RT) -> RT:
    """mctx's ``_mask_invalid_actions``: shifted so the largest is 0, the invalid at the lowest float."""
    shifted = logits - logits.max(dim=-1, keepdim=True)
    return F.where(invalid, float(np.finfo(np.float32).min), shifted)
