"""MuZero's search (Schrittwieser et al., 2020, Appendix B) as recurrent tensors: a batch of B searches over a
simulation dimension ``s``, the tree in fixed-size arrays laid out as `mctx` lays them out (node 0 is the root,
the node first expanded by simulation ``s`` is node ``s + 1``):

    node_visits, node_values, parents, action_from_parent             (B, N)       N = simulations + 1
    children_index (-1: unexpanded), children_prior_logits,
    children_values, children_visits, children_rewards                (B, N, A)
    embeddings                                                        (B, N, H)

One simulation ``s`` is one step of a recurrence over ``s`` with a fixed number of operations, whatever the depth
of the tree (mctx walks the path with a while loop; a walk of data-dependent length would be a depth dimension,
one group of small kernels per (simulation, depth) point):

- selection for every node at once: each node's pUCT action ``argmax_a Q_norm(a) + U(a)`` (c1 = 1.25,
  c2 = 19652), Q normalised by min-max over the node's value and its visited children's Q (mctx's
  ``qtransform_by_parent_and_siblings``; unvisited children score the minimum), the root's illegal actions
  masked. Selection does not change the tree, so the path mctx walks is the chain of nodes whose every
  ancestor edge is its parent's chosen action; pointer doubling over ``parents`` (ceil(log2(depth)) rounds of
  gathers) gives each node that test, its depth, and its discounted reward sum from the root. The path is
  the nodes that pass above the depth cap (``max_depth``, default: the number of simulations, mctx's
  default); the leaf's parent is the deepest of them;
- expansion of (leaf parent, action) with the ``recurrent_fn`` (the dynamics and prediction networks) into
  node ``s + 1`` (or, at the depth cut-off, re-evaluating the existing child, as mctx does);
- backup along the path: with rewards r_j on the path's edges, Z(n) = sum over the edges above n of
  discount^(start depth) r_j (from the doubling) and the leaf's value v at depth L, node n at depth k gets
  G = (Z(leaf) - Z(n) + discount^L v) / discount^k, ``value <- (value * visits + G) / (visits + 1)``, one more
  visit, and its chosen child's statistics are refreshed.

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
    min_q_range: float = 1e-8
    """The smallest range the min-max normalisation of Q divides by (mctx's epsilon by default). Self-play uses
    1.0 (`MuZeroConfig.min_q_range`): Q differences far below it are not stretched to the full [0, 1]."""

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

    def root_visits(self) -> RT:
        """(B, A) visit counts of the root's children."""
        return self.children_visits.spatial[:, 0]


def search(root: Root, recurrent_fn: Callable[[RT, RT], Step], invalid_actions: RT, noise: RT | None,
           config: SearchConfig, sim: trl.Symbol, noise_fraction: RT | None = None) -> Tree:
    """The tree after the last simulation. ``sim`` is a dimension of the current context bound (when
    compiling) to ``config.num_simulations``. ``invalid_actions`` (B, A) bool; ``noise`` (B, A) Dirichlet
    draws or None (no noise); ``noise_fraction`` replaces ``config.dirichlet_fraction`` by a tensor (e.g. a
    source, so one program searches with and without)."""
    trees = _simulations(root, recurrent_fn, invalid_actions, noise, config, sim, noise_fraction)
    return Tree(*(field[config.num_simulations - 1] for field in trees))


def search_root(root: Root, recurrent_fn: Callable[[RT, RT], Step], invalid_actions: RT, noise: RT | None,
                config: SearchConfig, sim: trl.Symbol, noise_fraction: RT | None = None) -> tuple[RT, RT]:
    """``search``'s root visit counts (B, A) and root value (B,) after the last simulation, taken from the tree
    at every simulation: a program that reads only these keeps no whole tree after its simulation loop (on jax
    a compiled loop stores, for every iteration, the values read after it)."""
    trees = _simulations(root, recurrent_fn, invalid_actions, noise, config, sim, noise_fraction)
    last = config.num_simulations - 1
    return trees.root_visits()[last], trees.node_values.spatial[:, 0][last]


def _simulations(root: Root, recurrent_fn: Callable[[RT, RT], Step], invalid_actions: RT, noise: RT | None,
                 config: SearchConfig, sim: trl.Symbol, noise_fraction: RT | None) -> Tree:
    """The trees over ``sim``: ``tree[s]`` is the tree after simulation ``s``."""
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

    path = _select(before, invalid_actions, config, nodes, actions)
    simulation = before.node_visits.spatial[:, 0].astype("int64")  # (B,) s + 1: the root gains a visit per simulation
    existing = _at(_rows(before.children_index, path.parent), path.action)
    leaf = F.where(existing == UNVISITED, simulation, existing)
    step = recurrent_fn(_rows(before.embeddings, path.parent), path.action)
    expanded = _expand(before, path.parent, path.action, leaf, step, nodes, actions, config.discount)
    backed = _backward(expanded, path, leaf, step, nodes, actions, config)
    for field_after, value in zip(after, backed):
        field_after[sim] = value
    return after


# ------------------------------------------------------------------------------------------------ the tree
def _tree_placeholders(batch: int, nodes: int, actions: int, hidden: int, domain) -> Tree:
    per_node, per_edge = (batch, nodes), (batch, nodes, actions)
    return Tree(trl.placeholder(per_node, "float32", domain), trl.placeholder(per_node, "float32", domain),
                trl.placeholder(per_node, "int64", domain), trl.placeholder(per_node, "int64", domain),
                trl.placeholder(per_edge, "int64", domain), trl.placeholder(per_edge, "float32", domain),
                trl.placeholder(per_edge, "float32", domain), trl.placeholder(per_edge, "float32", domain),
                trl.placeholder(per_edge, "float32", domain),
                trl.placeholder((batch, nodes, hidden), "float32", domain), trl.placeholder(per_node, "int64", domain),
                trl.placeholder(per_node, "float32", domain), trl.placeholder(per_node, "float32", domain))


def _initial_tree(root: Root, batch: int, nodes: int, actions: int, hidden: int) -> Tree:
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
        node_decay=F.ones((batch, nodes)))


def _hot(index: RT, size: int) -> RT:
    """``index`` (...) as a one-hot bool (..., size), by comparison (indices here are in range by construction,
    so the range check of ``one_hot`` and ``gather`` is not needed; on jax it would cut the jitted group)."""
    return index.unsqueeze(-1) == F.arange(size)


def _rows(array: RT, node: RT) -> RT:
    """``array[b, node[b]]`` for every b: (B, N, ...) and (B,) -> (B, ...)."""
    return _of_nodes(array, node.unsqueeze(-1)).squeeze(1)


def _of_nodes(array: RT, node: RT) -> RT:
    """``array[b, node[b, k]]`` for every (b, k): (B, N, ...) and (B, K) -> (B, K, ...), as one selection of rows
    of the flattened array (XLA's CPU gather along an inner dimension recomputes its fused operand per element)."""
    batch, nodes = (int(d) for d in array.shape[:2])
    rest, picks = tuple(int(d) for d in array.shape[2:]), int(node.shape[1])
    offsets = F.tensor((np.arange(batch) * nodes).reshape(batch, 1))
    rows = (node + offsets).reshape((batch * picks,))
    flat = array.reshape((batch * nodes,) + (rest or (1,)))
    return F.index_select(flat, 0, rows).reshape((batch, picks) + rest)


def _at(row: RT, action: RT) -> RT:
    """``row[b, action[b]]``: (B, A) and (B,) -> (B,)."""
    return F.where(_hot(action, int(row.shape[1])), row, F.zeros((), row.dtype)).sum(dim=-1)


def _mask_invalid(logits: RT, invalid: RT) -> RT:
    """mctx's ``_mask_invalid_actions``: shifted so the largest is 0, the invalid at the lowest float."""
    shifted = logits - logits.max(dim=-1, keepdim=True)
    return F.where(invalid, float(np.finfo(np.float32).min), shifted)


# ----------------------------------------------------------------------------------------------- selection
class Path(NamedTuple):
    parent: RT  # (B,) the leaf's parent: the deepest node of the path
    action: RT  # (B,) its chosen action
    chosen: RT  # (B, N) every node's pUCT action
    on_path: RT  # (B, N) bool: the nodes the selection walks, the root to ``parent``
    reward_sum: RT  # (B, N) Z(n): sum over the edges from the root to n of discount^(start depth) * reward
    decay: RT  # (B, N) discount^depth(n)


def _select(tree: Tree, invalid: RT, config: SearchConfig, nodes: int, actions: int) -> Path:
    """The path mctx's selection loop walks, found for all nodes at once (module docstring): from the root, each
    node's chosen child (itself where that child is unexpanded: the walk stops there); node n is on the path
    when the walk of depth(n) steps from the root ends at n, which binary lifting finds in ceil(log2(depth))
    rounds (the 2^k-step jumps, and each node's walk along the bits of its depth)."""
    chosen = _puct_actions(tree, invalid, config, nodes)
    batch = int(tree.parents.shape[0])
    node = F.tensor(np.tile(np.arange(nodes), (batch, 1)))
    child = F.where(_hot(chosen, actions), tree.children_index, F.zeros((), "int64")).sum(dim=-1)
    jump = F.where(child < 0, node, child)  # (B, N): one step of the walk
    depth = tree.node_depth
    walked = F.full((batch, nodes), 0, "int64")  # every node's walk starts at the root
    deepest = max(1, min(config.depth, config.num_simulations))
    rounds = deepest.bit_length()  # depths below 2^rounds; deeper nodes are below the depth cap
    for k in range(rounds):
        walked = F.where(F.apply("remainder", depth, 2 ** (k + 1)) >= 2 ** k, _of_nodes(jump, walked), walked)
        if k + 1 < rounds:
            jump = _of_nodes(jump, jump)
    on_path = (walked == node) & (depth < config.depth)
    parent = F.where(on_path, depth, -1).argmax(dim=-1)
    return Path(parent, _at(chosen, parent), chosen, on_path, tree.node_reward_sum, tree.node_decay)


def _puct_actions(tree: Tree, invalid: RT, config: SearchConfig, nodes: int) -> RT:
    """(B, N): every node's pUCT action (the root's illegal actions masked)."""
    visits = tree.node_visits
    qvalues = tree.children_rewards + config.discount * tree.children_values
    pb_c = config.pb_c_init + F.log((visits + config.pb_c_base + 1.0) / config.pb_c_base)
    prior = F.softmax(tree.children_prior_logits, dim=-1)
    policy_score = (F.sqrt(visits) * pb_c).unsqueeze(-1) * prior / (tree.children_visits + 1.0)
    score = _normalised_q(qvalues, tree.children_visits, tree.node_values, config.min_q_range) + policy_score
    at_root = F.tensor((np.arange(nodes) == 0).reshape(1, nodes, 1))
    return F.where(invalid.unsqueeze(1) & at_root, float("-inf"), score).argmax(dim=-1)


def _normalised_q(qvalues: RT, child_visits: RT, node_value: RT, epsilon: float = 1e-8) -> RT:
    """Min-max over the node's value and its visited children's Q; unvisited children score 0."""
    visited = child_visits > 0
    safe = F.where(visited, qvalues, node_value.unsqueeze(-1))
    low = F.minimum(node_value, safe.min(dim=-1)).unsqueeze(-1)
    high = F.maximum(node_value, safe.max(dim=-1)).unsqueeze(-1)
    return (F.where(visited, qvalues, low) - low) / F.maximum(high - low, epsilon)


# ----------------------------------------------------------------------------------- expansion and backup
def _expand(tree: Tree, parent: RT, action: RT, leaf: RT, step: Step, nodes: int, actions: int,
            discount: float) -> Tree:
    leaf_mask = _hot(leaf, nodes)  # (B, N)
    edge = _hot(parent, nodes).unsqueeze(-1) & _hot(action, actions).unsqueeze(1)  # (B, N, A)
    leaf_row = leaf_mask.unsqueeze(-1)
    parent_decay = _at(tree.node_decay, parent)
    return tree._replace(
        node_depth=F.where(leaf_mask, (_at(tree.node_depth, parent) + 1).unsqueeze(-1), tree.node_depth),
        node_reward_sum=F.where(leaf_mask,
                                (_at(tree.node_reward_sum, parent) + parent_decay * step.reward).unsqueeze(-1),
                                tree.node_reward_sum),
        node_decay=F.where(leaf_mask, (parent_decay * discount).unsqueeze(-1), tree.node_decay),
        node_visits=F.where(leaf_mask, tree.node_visits + 1.0, tree.node_visits),
        node_values=F.where(leaf_mask, step.value.unsqueeze(-1), tree.node_values),
        parents=F.where(leaf_mask, parent.unsqueeze(-1), tree.parents),
        action_from_parent=F.where(leaf_mask, action.unsqueeze(-1), tree.action_from_parent),
        children_index=F.where(edge, leaf.reshape((-1, 1, 1)), tree.children_index),
        children_rewards=F.where(edge, step.reward.reshape((-1, 1, 1)), tree.children_rewards),
        children_prior_logits=F.where(leaf_row, step.prior_logits.unsqueeze(1), tree.children_prior_logits),
        embeddings=F.where(leaf_row, step.embedding.unsqueeze(1), tree.embeddings))


def _backward(tree: Tree, path: Path, leaf: RT, step: Step, nodes: int, actions: int, config: SearchConfig) -> Tree:
    """Back up the leaf's value along the path (module docstring)."""
    parent_decay = _at(path.decay, path.parent)
    leaf_sum = _at(path.reward_sum, path.parent) + parent_decay * step.reward  # Z(leaf)
    leaf_value = _rows(tree.node_values.unsqueeze(-1), leaf).squeeze(-1)
    ahead = (leaf_sum + parent_decay * config.discount * leaf_value).unsqueeze(-1)  # Z(leaf) + discount^L v
    returns = (ahead - path.reward_sum) / path.decay  # (B, N): G at every node of the path
    on_path = path.on_path
    values = F.where(on_path, (tree.node_values * tree.node_visits + returns) / (tree.node_visits + 1.0),
                     tree.node_values)
    edges = on_path.unsqueeze(-1) & _hot(path.chosen, actions)  # (B, N, A)
    child_values = F.gather(values.unsqueeze(-1).expand(values.shape[0], nodes, actions), 1,
                            F.maximum(tree.children_index, 0))
    return tree._replace(
        node_values=values,
        node_visits=F.where(on_path, tree.node_visits + 1.0, tree.node_visits),
        children_values=F.where(edges, child_values, tree.children_values),
        children_visits=F.where(edges, tree.children_visits + 1.0, tree.children_visits))
