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

With ``SearchConfig.search = "gumbel"`` the selection is Gumbel MuZero's (Danihelka et al., 2022, "Policy
improvement by planning with Gumbel"), everything else unchanged: at the root, Gumbel-top-k over the prior
(``g + logits``, the draws ``g`` from the caller) with sequential halving over the simulation budget, which is a
fixed schedule of the visit count a root action must have to be chosen at simulation ``s`` (`considered_visits`);
of the actions with that count the one with the largest ``g + logits + sigma(completed Q)`` is visited. At interior
nodes the deterministic rule: ``argmax_a pi'(a) - N(a) / (1 + sum_b N(b))`` with the improved policy
``pi' = softmax(logits + sigma(completed Q))``. Completed Q (the paper's Appendix D): a child's Q where visited, else
the mix of the node's network value and its visited children's Q weighted by the prior; min-max rescaled to [0, 1]
(dividing by at least ``min_q_range``) and ``sigma(q) = (maxvisit_init + max_b N(b)) * value_scale * q``. The search
returns the action (of the most visited ones, the largest ``g + logits + sigma(completed Q)``) and the improved
policy at the root, the policy target (`gumbel_search_root`). The network value of every node is kept
(``raw_values``), as completed Q needs it. The Gumbel rules are in `gumbel.py`; the settings, the tree's layout and
its indexing in `tree.py`.

The trees at ``s`` are placeholders over ``(s,)``: ``tree[s]`` is the tree after simulation ``s``. Dirichlet
noise (fraction 0.25, alpha 0.03 in the paper's Table 6) is mixed into the root prior; its draws come from
the caller (a NumPy generator on the host feeds a source), since the engine draws only uniform and normal
numbers. Ties in the argmax go to the lowest action (mctx breaks them with a 1e-7 random score: the tests
use priors without ties).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

import timerl as trl
from algorithms.muzero.gumbel import gumbel_actions, gumbel_outcome, scaled_gumbel
from algorithms.muzero.tree import (RT, UNVISITED, Root, SearchConfig, Step, Tree, at, hot, initial_tree, mask_invalid,
                                    of_nodes, rows, tree_placeholders)
from timerl.rt import functional as F


def search(root: Root, recurrent_fn: Callable[[RT, RT], Step], invalid_actions: RT, noise: RT | None,
           config: SearchConfig, sim: trl.Symbol, noise_fraction: RT | None = None) -> Tree:
    """The tree after the last simulation. ``sim`` is a dimension of the current context bound (when
    compiling) to ``config.num_simulations``. ``invalid_actions`` (B, A) bool; ``noise`` (B, A) Dirichlet
    draws (pUCT) or Gumbel draws (gumbel), or None (no noise); ``noise_fraction`` replaces
    ``config.dirichlet_fraction`` by a tensor (e.g. a source, so one program searches with and without); under
    gumbel it scales the Gumbel draws (per game, (B, 1); None: 1)."""
    trees = _simulations(root, recurrent_fn, invalid_actions, noise, config, sim, noise_fraction)
    return Tree(*(field[config.num_simulations - 1] for field in trees))


class GumbelRoot(NamedTuple):
    visits: RT  # (B, A) the root's visit counts
    value: RT  # (B,) the root's search value
    policy: RT  # (B, A) the improved policy softmax(logits + sigma(completed Q)), illegal actions at 0
    action: RT  # (B,) int64: the action to play


def gumbel_search_root(root: Root, recurrent_fn: Callable[[RT, RT], Step], invalid_actions: RT, gumbel: RT | None,
                       config: SearchConfig, sim: trl.Symbol, gumbel_scale: RT | None = None) -> GumbelRoot:
    """Gumbel MuZero's search (``config.search == "gumbel"``) and its outcome at the root, read from the root's
    statistics at every simulation (as `search_root`). ``gumbel`` (B, A) standard Gumbel draws or None (none: the
    search and its action are deterministic), scaled by ``gumbel_scale`` (B, 1) where given."""
    if config.search != "gumbel":
        raise ValueError(f"gumbel_search_root needs SearchConfig.search == 'gumbel', got {config.search!r}")
    trees = _simulations(root, recurrent_fn, invalid_actions, gumbel, config, sim, gumbel_scale)
    last = config.num_simulations - 1
    visits = trees.root_visits()[last]
    qvalues = (trees.children_rewards.spatial[:, 0] + config.discount * trees.children_values.spatial[:, 0])[last]
    logits = _root_logits(root, invalid_actions, None, config, None)
    policy, action = gumbel_outcome(visits, qvalues, root.value, logits, scaled_gumbel(gumbel, gumbel_scale, logits),
                                    invalid_actions, config)
    return GumbelRoot(visits, trees.node_values.spatial[:, 0][last], policy, action)


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
    root_logits = _root_logits(root, invalid_actions, noise, config, noise_fraction)
    initial = initial_tree(Root(root_logits, root.value, root.embedding), batch, nodes, actions, hidden)

    before = tree_placeholders(batch, nodes, actions, hidden, domain=(sim,))
    after = tree_placeholders(batch, nodes, actions, hidden, domain=(sim,))
    for field_before, field_initial, field_after in zip(before, initial, after):
        field_before[0] = field_initial
        field_before[sim + 1] = field_after[sim]

    if config.search == "gumbel":
        chosen = gumbel_actions(before, invalid_actions, scaled_gumbel(noise, noise_fraction, root_logits),
                                 config, nodes)
    else:
        chosen = _puct_actions(before, invalid_actions, config, nodes)
    path = _select(before, chosen, config, nodes, actions)
    simulation = before.node_visits.spatial[:, 0].astype("int64")  # (B,) s + 1: the root gains a visit per simulation
    existing = at(rows(before.children_index, path.parent), path.action)
    leaf = F.where(existing == UNVISITED, simulation, existing)
    step = recurrent_fn(rows(before.embeddings, path.parent), path.action)
    expanded = _expand(before, path.parent, path.action, leaf, step, nodes, actions, config.discount)
    backed = _backward(expanded, path, leaf, step, nodes, actions, config)
    for field_after, value in zip(after, backed):
        field_after[sim] = value
    return after


def _root_logits(root: Root, invalid: RT, noise: RT | None, config: SearchConfig, noise_fraction: RT | None) -> RT:
    """The root's prior logits, masked: pUCT mixes the Dirichlet ``noise`` into the prior first (as mctx's
    ``muzero_policy``); Gumbel MuZero masks the logits as they are (its noise enters the root's scores)."""
    if config.search == "gumbel":
        return mask_invalid(root.prior_logits, invalid)
    prior = F.softmax(root.prior_logits, dim=-1)
    if noise is not None:
        fraction = config.dirichlet_fraction if noise_fraction is None else noise_fraction
        prior = prior * (1.0 - fraction) + noise * fraction
    return mask_invalid(F.log(F.maximum(prior, float(np.finfo(np.float32).tiny))), invalid)


# ----------------------------------------------------------------------------------------------- selection
class Path(NamedTuple):
    parent: RT  # (B,) the leaf's parent: the deepest node of the path
    action: RT  # (B,) its chosen action
    chosen: RT  # (B, N) every node's pUCT action
    on_path: RT  # (B, N) bool: the nodes the selection walks, the root to ``parent``
    reward_sum: RT  # (B, N) Z(n): sum over the edges from the root to n of discount^(start depth) * reward
    decay: RT  # (B, N) discount^depth(n)


def _select(tree: Tree, chosen: RT, config: SearchConfig, nodes: int, actions: int) -> Path:
    """The path mctx's selection loop walks, found for all nodes at once (module docstring): from the root, each
    node's ``chosen`` (B, N) child (itself where that child is unexpanded: the walk stops there); node n is on the
    path when the walk of depth(n) steps from the root ends at n, which binary lifting finds in ceil(log2(depth))
    rounds (the 2^k-step jumps, and each node's walk along the bits of its depth)."""
    batch = int(tree.parents.shape[0])
    node = F.tensor(np.tile(np.arange(nodes), (batch, 1)))
    child = F.where(hot(chosen, actions), tree.children_index, F.zeros((), "int64")).sum(dim=-1)
    jump = F.where(child < 0, node, child)  # (B, N): one step of the walk
    depth = tree.node_depth
    walked = F.full((batch, nodes), 0, "int64")  # every node's walk starts at the root
    deepest = max(1, min(config.depth, config.num_simulations))
    rounds = deepest.bit_length()  # depths below 2^rounds; deeper nodes are below the depth cap
    for k in range(rounds):
        walked = F.where(F.apply("remainder", depth, 2 ** (k + 1)) >= 2 ** k, of_nodes(jump, walked), walked)
        if k + 1 < rounds:
            jump = of_nodes(jump, jump)
    on_path = (walked == node) & (depth < config.depth)
    parent = F.where(on_path, depth, -1).argmax(dim=-1)
    return Path(parent, at(chosen, parent), chosen, on_path, tree.node_reward_sum, tree.node_decay)


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
    leaf_mask = hot(leaf, nodes)  # (B, N)
    edge = hot(parent, nodes).unsqueeze(-1) & hot(action, actions).unsqueeze(1)  # (B, N, A)
    leaf_row = leaf_mask.unsqueeze(-1)
    parent_decay = at(tree.node_decay, parent)
    return tree._replace(
        node_depth=F.where(leaf_mask, (at(tree.node_depth, parent) + 1).unsqueeze(-1), tree.node_depth),
        node_reward_sum=F.where(leaf_mask,
                                (at(tree.node_reward_sum, parent) + parent_decay * step.reward).unsqueeze(-1),
                                tree.node_reward_sum),
        node_decay=F.where(leaf_mask, (parent_decay * discount).unsqueeze(-1), tree.node_decay),
        node_visits=F.where(leaf_mask, tree.node_visits + 1.0, tree.node_visits),
        node_values=F.where(leaf_mask, step.value.unsqueeze(-1), tree.node_values),
        raw_values=F.where(leaf_mask, step.value.unsqueeze(-1), tree.raw_values),
        parents=F.where(leaf_mask, parent.unsqueeze(-1), tree.parents),
        action_from_parent=F.where(leaf_mask, action.unsqueeze(-1), tree.action_from_parent),
        children_index=F.where(edge, leaf.reshape((-1, 1, 1)), tree.children_index),
        children_rewards=F.where(edge, step.reward.reshape((-1, 1, 1)), tree.children_rewards),
        children_prior_logits=F.where(leaf_row, step.prior_logits.unsqueeze(1), tree.children_prior_logits),
        embeddings=F.where(leaf_row, step.embedding.unsqueeze(1), tree.embeddings))


def _backward(tree: Tree, path: Path, leaf: RT, step: Step, nodes: int, actions: int, config: SearchConfig) -> Tree:
    """Back up the leaf's value along the path (module docstring)."""
    parent_decay = at(path.decay, path.parent)
    leaf_sum = at(path.reward_sum, path.parent) + parent_decay * step.reward  # Z(leaf)
    leaf_value = rows(tree.node_values.unsqueeze(-1), leaf).squeeze(-1)
    ahead = (leaf_sum + parent_decay * config.discount * leaf_value).unsqueeze(-1)  # Z(leaf) + discount^L v
    returns = (ahead - path.reward_sum) / path.decay  # (B, N): G at every node of the path
    on_path = path.on_path
    values = F.where(on_path, (tree.node_values * tree.node_visits + returns) / (tree.node_visits + 1.0),
                     tree.node_values)
    edges = on_path.unsqueeze(-1) & hot(path.chosen, actions)  # (B, N, A)
    child_values = F.gather(values.unsqueeze(-1).expand(values.shape[0], nodes, actions), 1,
                            F.maximum(tree.children_index, 0))
    return tree._replace(
        node_values=values,
        node_visits=F.where(on_path, tree.node_visits + 1.0, tree.node_visits),
        children_values=F.where(edges, child_values, tree.children_values),
        children_visits=F.where(edges, tree.children_visits + 1.0, tree.children_visits))
