"""MuZero's search (Schrittwieser et al., 2020, Appendix B) as recurrent tensors: a batch of B searches over a
simulation dimension ``s`` and a selection-depth dimension ``d``, the tree in fixed-size arrays laid out as
`mctx` lays them out (node 0 is the root, the node first expanded by simulation ``s`` is node ``s + 1``):

    node_visits, node_values, parents, action_from_parent             (B, N)       N = simulations + 1
    children_index (-1: unexpanded), children_prior_logits,
    children_values, children_visits, children_rewards                (B, N, A)
    embeddings                                                        (B, N, H)

One simulation ``s`` is three steps, each written with gathers, one-hot masks and ``where`` on the arrays:

- selection, a recurrence over ``d``: ``cursor[s, d + 1] = step(cursor[s, d])`` while the chosen child is
  expanded; each step picks ``argmax_a Q_norm(a) + U(a)`` (pUCT with c1 = 1.25, c2 = 19652), with Q
  normalised by min-max over the node's value and its visited children's Q (mctx's
  ``qtransform_by_parent_and_siblings``; unvisited children score the minimum) and the root's illegal
  actions masked. At most ``max_depth`` steps (default: the number of simulations, mctx's default);
- expansion of (leaf parent, action) with the ``recurrent_fn`` (the dynamics and prediction networks) into
  node ``s + 1`` (or, at the depth cut-off, re-evaluating the existing child, as mctx does);
- backup along the path the cursor recorded (its states over all ``d`` are one range read, so the path needs
  no second loop): with path nodes n_0 = root .. n_L = leaf, rewards r_k on the edges and the leaf's value v,
  ``G_k = r_k + discount * G_{k+1}``, ``G_L = v``, computed at once as ``sum_j discount^(j-k) r_j +
  discount^(L-k) v``; every n_k (k < L) gets ``value <- (value * visits + G_k) / (visits + 1)`` and one more
  visit, and its child statistics are refreshed.

The trees at ``s`` are placeholders over ``(s,)``: ``tree[s]`` is the tree after simulation ``s``. Dirichlet
noise (fraction 0.25, alpha 0.03 in the paper's Table 6) is mixed into the root prior; its draws come from
the caller (a NumPy generator on the host feeds a source), since the engine draws only uniform and normal
numbers. Ties in the argmax go to the lowest action (mctx breaks them with a 1e-7 random score: the tests
use priors without ties).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

import timerl as trl
from timerl.rt import functional as F

RT = trl.RecurrentTensor
UNVISITED = -1
NO_PARENT = -1


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

    def root_visits(self) -> RT:
        """(B, A) visit counts of the root's children."""
        return self.children_visits.spatial[:, 0]


def search(root: Root, recurrent_fn: Callable[[RT, RT], Step], invalid_actions: RT, noise: RT | None,
           config: SearchConfig, sim: trl.Symbol, depth: trl.Symbol, noise_fraction: RT | None = None) -> Tree:
    """The tree after the last simulation. ``sim`` and ``depth`` are dimensions of the current context bound
    (when compiling) to ``config.num_simulations`` and ``config.depth``. ``invalid_actions`` (B, A) bool;
    ``noise`` (B, A) Dirichlet draws or None (no noise); ``noise_fraction`` replaces
    ``config.dirichlet_fraction`` by a tensor (e.g. a source, so one program searches with and without)."""
    batch, actions = (int(n) for n in root.prior_logits.shape)
    hidden = int(root.embedding.shape[-1])
    nodes = config.num_simulations + 1
    prior = F.softmax(root.prior_logits, dim=-1)
    if noise is not None:
        fraction = config.dirichlet_fraction if noise_fraction is None else noise_fraction
        prior = prior * (1.0 - fraction) + noise * fraction
    root_logits = _mask_invalid(F.log(F.maximum(prior, float(np.finfo(np.float32).tiny))), invalid_actions)
    initial = _initial_tree(Root(root_logits, root.value, root.embedding), batch, nodes, actions, hidden)

    before = _tree_placeholders(batch, nodes, actions, hidden, domain=(sim,))
    after = _tree_placeholders(batch, nodes, actions, hidden, domain=(sim,))
    for field_before, field_initial, field_after in zip(before, initial, after):
        field_before[0] = field_initial
        field_before[sim + 1] = field_after[sim]

    cursor = trl.placeholder((batch, 4), "int64", (sim, depth))  # [node, action, next node, step taken]
    start = F.tensor(np.tile(np.array([NO_PARENT, NO_PARENT, 0, 1], dtype=np.int64), (batch, 1)))
    cursor[sim, 0] = _select_step(before, start, invalid_actions, config, first=True)
    cursor[sim, depth + 1] = _select_step(before, cursor[sim, depth], invalid_actions, config, first=False)

    path = cursor[sim, 0:config.depth]  # (D, B, 4): the cursor after each step of simulation `sim`
    last = cursor[sim, config.depth - 1]
    parent, action = last.spatial[:, 0], last.spatial[:, 1]
    simulation = trl.source(lambda point: point[sim.name] + 1, (), "int64", (sim,))
    existing = _at(_rows(before.children_index, parent), action)
    leaf = F.where(existing == UNVISITED, simulation, existing)
    step = recurrent_fn(_rows(before.embeddings, parent), action)
    expanded = _expand(before, parent, action, leaf, step, nodes, actions)
    backed = _backward(expanded, path, leaf, nodes, actions, config)
    for field_after, value in zip(after, backed):
        field_after[sim] = value
    return Tree(*(field[config.num_simulations - 1] for field in after))


# ------------------------------------------------------------------------------------------------ the tree
def _tree_placeholders(batch: int, nodes: int, actions: int, hidden: int, domain) -> Tree:
    per_node, per_edge = (batch, nodes), (batch, nodes, actions)
    return Tree(trl.placeholder(per_node, "float32", domain), trl.placeholder(per_node, "float32", domain),
                trl.placeholder(per_node, "int64", domain), trl.placeholder(per_node, "int64", domain),
                trl.placeholder(per_edge, "int64", domain), trl.placeholder(per_edge, "float32", domain),
                trl.placeholder(per_edge, "float32", domain), trl.placeholder(per_edge, "float32", domain),
                trl.placeholder(per_edge, "float32", domain), trl.placeholder((batch, nodes, hidden), "float32", domain))


def _initial_tree(root: Root, batch: int, nodes: int, actions: int, hidden: int) -> Tree:
    """mctx's ``instantiate_tree_from_root``: empty arrays with the root written into node 0."""
    root_node = F.one_hot(F.tensor(np.zeros(batch, dtype=np.int64)), nodes) > 0  # (B, N)
    zeros_edge = F.zeros((batch, nodes, actions))
    return Tree(
        node_visits=F.where(root_node, 1.0, F.zeros((batch, nodes))),
        node_values=F.where(root_node, root.value.unsqueeze(-1), F.zeros((batch, nodes))),
        parents=F.full((batch, nodes), NO_PARENT, "int64"),
        action_from_parent=F.full((batch, nodes), NO_PARENT, "int64"),
        children_index=F.full((batch, nodes, actions), UNVISITED, "int64"),
        children_prior_logits=F.where(root_node.unsqueeze(-1), root.prior_logits.unsqueeze(1), zeros_edge),
        children_values=zeros_edge, children_visits=zeros_edge, children_rewards=zeros_edge,
        embeddings=F.where(root_node.unsqueeze(-1), root.embedding.unsqueeze(1), F.zeros((batch, nodes, hidden))))


def _rows(array: RT, node: RT) -> RT:
    """``array[b, node[b]]`` for every b: (B, N, ...) and (B,) -> (B, ...)."""
    shape = tuple(int(n) for n in array.shape)
    index = node.reshape((shape[0], 1) + (1,) * (len(shape) - 2)).expand((shape[0], 1) + shape[2:])
    return F.gather(array, 1, index).squeeze(1)


def _at(row: RT, action: RT) -> RT:
    """``row[b, action[b]]``: (B, A) and (B,) -> (B,)."""
    return F.gather(row, 1, action.reshape((int(row.shape[0]), 1))).squeeze(1)


def _mask_invalid(logits: RT, invalid: RT) -> RT:
    """mctx's ``_mask_invalid_actions``: shifted so the largest is 0, the invalid at the lowest float."""
    shifted = logits - logits.max(dim=-1, keepdim=True)
    return F.where(invalid, float(np.finfo(np.float32).min), shifted)


def _qvalues(tree: Tree, node: RT, discount: float) -> tuple[RT, RT]:
    """(Q, visits) of the children of ``node``: Q = reward + discount * child value."""
    return (_rows(tree.children_rewards, node) + discount * _rows(tree.children_values, node),
            _rows(tree.children_visits, node))


# ----------------------------------------------------------------------------------------------- selection
def _select_step(tree: Tree, cursor: RT, invalid: RT, config: SearchConfig, first: bool) -> RT:
    """One selection step from the cursor's next node, taken only where that node is expanded."""
    node = cursor.spatial[:, 2]
    going = node != UNVISITED
    safe_node = F.maximum(node, 0)
    action = _puct_action(tree, safe_node, invalid, config)
    child = _at(_rows(tree.children_index, safe_node), action)
    stepped = F.stack([safe_node, action, child, going.astype("int64")], dim=1)
    if first:
        return stepped
    kept = F.stack([cursor.spatial[:, 0], cursor.spatial[:, 1], node, node * 0], dim=1)
    return F.where(going.unsqueeze(-1), stepped, kept)


def _puct_action(tree: Tree, node: RT, invalid: RT, config: SearchConfig) -> RT:
    visits = _rows(tree.node_visits.unsqueeze(-1), node).squeeze(-1)  # (B,)
    qvalues, child_visits = _qvalues(tree, node, config.discount)
    node_value = _rows(tree.node_values.unsqueeze(-1), node).squeeze(-1)
    pb_c = config.pb_c_init + F.log((visits + config.pb_c_base + 1.0) / config.pb_c_base)
    prior = F.softmax(_rows(tree.children_prior_logits, node), dim=-1)
    policy_score = (F.sqrt(visits) * pb_c).unsqueeze(-1) * prior / (child_visits + 1.0)
    value_score = _normalised_q(qvalues, child_visits, node_value)
    score = value_score + policy_score
    at_root = (node == 0).unsqueeze(-1)
    return F.where(invalid & at_root, float("-inf"), score).argmax(dim=-1)


def _normalised_q(qvalues: RT, child_visits: RT, node_value: RT, epsilon: float = 1e-8) -> RT:
    """Min-max over the node's value and its visited children's Q; unvisited children score 0."""
    visited = child_visits > 0
    safe = F.where(visited, qvalues, node_value.unsqueeze(-1))
    low = F.minimum(node_value, safe.min(dim=-1)).unsqueeze(-1)
    high = F.maximum(node_value, safe.max(dim=-1)).unsqueeze(-1)
    return (F.where(visited, qvalues, low) - low) / F.maximum(high - low, epsilon)


# ----------------------------------------------------------------------------------- expansion and backup
def _expand(tree: Tree, parent: RT, action: RT, leaf: RT, step: Step, nodes: int, actions: int) -> Tree:
    leaf_mask = F.one_hot(leaf, nodes) > 0  # (B, N)
    edge = (F.one_hot(parent, nodes).unsqueeze(-1) * F.one_hot(action, actions).unsqueeze(1)) > 0  # (B, N, A)
    leaf_row = leaf_mask.unsqueeze(-1)
    return tree._replace(
        node_visits=F.where(leaf_mask, tree.node_visits + 1.0, tree.node_visits),
        node_values=F.where(leaf_mask, step.value.unsqueeze(-1), tree.node_values),
        parents=F.where(leaf_mask, parent.unsqueeze(-1), tree.parents),
        action_from_parent=F.where(leaf_mask, action.unsqueeze(-1), tree.action_from_parent),
        children_index=F.where(edge, leaf.reshape((-1, 1, 1)), tree.children_index),
        children_rewards=F.where(edge, step.reward.reshape((-1, 1, 1)), tree.children_rewards),
        children_prior_logits=F.where(leaf_row, step.prior_logits.unsqueeze(1), tree.children_prior_logits),
        embeddings=F.where(leaf_row, step.embedding.unsqueeze(1), tree.embeddings))


def _backward(tree: Tree, path: RT, leaf: RT, nodes: int, actions: int, config: SearchConfig) -> Tree:
    """Back up the leaf's value along the recorded path (module docstring)."""
    depth = config.depth
    taken = path.spatial[:, :, 3] > 0  # (D, B): step k descended from n_k along a_k
    path_nodes, path_actions = path.spatial[:, :, 0], path.spatial[:, :, 1]
    weight = F.where(taken, 1.0, 0.0)
    node_hot = F.one_hot(path_nodes, nodes) * weight.unsqueeze(-1)  # (D, B, N)
    action_hot = F.one_hot(path_actions, actions)  # (D, B, A)
    edge_hot = node_hot.unsqueeze(-1) * action_hot.unsqueeze(2)  # (D, B, N, A)
    rewards = (edge_hot * tree.children_rewards.unsqueeze(0)).sum(dim=-1).sum(dim=-1)  # (D, B): r_k
    steps = weight.sum(dim=0)  # (B,): L
    ahead = np.triu(config.discount ** (np.arange(depth)[None, :] - np.arange(depth)[:, None]))  # [k, j]
    leaf_value = _rows(tree.node_values.unsqueeze(-1), leaf).squeeze(-1)
    remaining = steps.unsqueeze(0) - F.arange(depth).astype("float32").unsqueeze(-1)  # (D, B): L - k
    returns = F.matmul(F.tensor(ahead.astype(np.float32)), rewards) + F.pow(config.discount, remaining) * leaf_value
    on_path = node_hot.sum(dim=0) > 0  # (B, N)
    path_return = (node_hot * returns.unsqueeze(-1)).sum(dim=0)  # (B, N): G_k at n_k
    values = F.where(on_path, (tree.node_values * tree.node_visits + path_return) / (tree.node_visits + 1.0),
                     tree.node_values)
    edges = edge_hot.sum(dim=0) > 0  # (B, N, A)
    child_values = F.gather(values.unsqueeze(-1).expand(values.shape[0], nodes, actions), 1,
                            F.maximum(tree.children_index, 0))
    return tree._replace(
        node_values=values,
        node_visits=F.where(on_path, tree.node_visits + 1.0, tree.node_visits),
        children_values=F.where(edges, child_values, tree.children_values),
        children_visits=F.where(edges, tree.children_visits + 1.0, tree.children_visits))
