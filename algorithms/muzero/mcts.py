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
(``raw_values``), as completed Q needs it.

The trees at ``s`` are placeholders over ``(s,)``: ``tree[s]`` is the tree after simulation ``s``. Dirichlet
noise (fraction 0.25, alpha 0.03 in the paper's Table 6) is mixed into the root prior; its draws come from
the caller (a NumPy generator on the host feeds a source), since the engine draws only uniform and normal
numbers. Ties in the argmax go to the lowest action (mctx breaks them with a 1e-7 random score: the tests
use priors without ties).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

import timerl as trl
from timerl.rt import functional as F

RT = trl.RecurrentTensor
UNVISITED = -1
NO_PARENT = -1
SEARCHES = ("puct", "gumbel")
LOW_LOGIT = -1e9  # Gumbel MuZero's root score floor: an illegal action's logit is the lowest float


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
    policy, action = gumbel_outcome(visits, qvalues, root.value, logits, _scaled_gumbel(gumbel, gumbel_scale, logits),
                                    invalid_actions, config)
    return GumbelRoot(visits, trees.node_values.spatial[:, 0][last], policy, action)


def gumbel_outcome(visits: RT, qvalues: RT, raw_value: RT, logits: RT, gumbel: RT, invalid: RT,
                   config: SearchConfig) -> tuple[RT, RT]:
    """The improved policy (B, A) and the action (B,) at a root with children ``visits`` and ``qvalues`` (B, A),
    network value ``raw_value`` (B,), masked prior ``logits`` and scaled ``gumbel`` (B, A): of the most visited
    actions, the one with the largest ``g + logits + sigma(completed Q)``."""
    completed = _completed_q(qvalues, visits, raw_value, logits, config)
    policy = F.softmax(_mask_invalid(logits + completed, invalid), dim=-1)
    most = visits.max(dim=-1, keepdim=True)
    score = _considered_score(most, gumbel, logits, completed, visits)
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
    initial = _initial_tree(Root(root_logits, root.value, root.embedding), batch, nodes, actions, hidden)

    before = _tree_placeholders(batch, nodes, actions, hidden, domain=(sim,))
    after = _tree_placeholders(batch, nodes, actions, hidden, domain=(sim,))
    for field_before, field_initial, field_after in zip(before, initial, after):
        field_before[0] = field_initial
        field_before[sim + 1] = field_after[sim]

    if config.search == "gumbel":
        chosen = _gumbel_actions(before, invalid_actions, _scaled_gumbel(noise, noise_fraction, root_logits),
                                 config, nodes)
    else:
        chosen = _puct_actions(before, invalid_actions, config, nodes)
    path = _select(before, chosen, config, nodes, actions)
    simulation = before.node_visits.spatial[:, 0].astype("int64")  # (B,) s + 1: the root gains a visit per simulation
    existing = _at(_rows(before.children_index, path.parent), path.action)
    leaf = F.where(existing == UNVISITED, simulation, existing)
    step = recurrent_fn(_rows(before.embeddings, path.parent), path.action)
    expanded = _expand(before, path.parent, path.action, leaf, step, nodes, actions, config.discount)
    backed = _backward(expanded, path, leaf, step, nodes, actions, config)
    for field_after, value in zip(after, backed):
        field_after[sim] = value
    return after


def _root_logits(root: Root, invalid: RT, noise: RT | None, config: SearchConfig, noise_fraction: RT | None) -> RT:
    """The root's prior logits, masked: pUCT mixes the Dirichlet ``noise`` into the prior first (as mctx's
    ``muzero_policy``); Gumbel MuZero masks the logits as they are (its noise enters the root's scores)."""
    if config.search == "gumbel":
        return _mask_invalid(root.prior_logits, invalid)
    prior = F.softmax(root.prior_logits, dim=-1)
    if noise is not None:
        fraction = config.dirichlet_fraction if noise_fraction is None else noise_fraction
        prior = prior * (1.0 - fraction) + noise * fraction
    return _mask_invalid(F.log(F.maximum(prior, float(np.finfo(np.float32).tiny))), invalid)


def _scaled_gumbel(gumbel: RT | None, scale: RT | None, logits: RT) -> RT:
    if gumbel is None:
        return F.zeros(tuple(int(d) for d in logits.shape))
    return gumbel if scale is None else gumbel * scale


# ------------------------------------------------------------------------------------------------ the tree
def _tree_placeholders(batch: int, nodes: int, actions: int, hidden: int, domain) -> Tree:
    per_node, per_edge = (batch, nodes), (batch, nodes, actions)
    return Tree(trl.placeholder(per_node, "float32", domain), trl.placeholder(per_node, "float32", domain),
                trl.placeholder(per_node, "int64", domain), trl.placeholder(per_node, "int64", domain),
                trl.placeholder(per_edge, "int64", domain), trl.placeholder(per_edge, "float32", domain),
                trl.placeholder(per_edge, "float32", domain), trl.placeholder(per_edge, "float32", domain),
                trl.placeholder(per_edge, "float32", domain),
                trl.placeholder((batch, nodes, hidden), "float32", domain), trl.placeholder(per_node, "int64", domain),
                trl.placeholder(per_node, "float32", domain), trl.placeholder(per_node, "float32", domain),
                trl.placeholder(per_node, "float32", domain))


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
        node_decay=F.ones((batch, nodes)),
        raw_values=F.where(root_node, root.value.unsqueeze(-1), F.zeros((batch, nodes))))


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


def _select(tree: Tree, chosen: RT, config: SearchConfig, nodes: int, actions: int) -> Path:
    """The path mctx's selection loop walks, found for all nodes at once (module docstring): from the root, each
    node's ``chosen`` (B, N) child (itself where that child is unexpanded: the walk stops there); node n is on the
    path when the walk of depth(n) steps from the root ends at n, which binary lifting finds in ceil(log2(depth))
    rounds (the 2^k-step jumps, and each node's walk along the bits of its depth)."""
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


def _gumbel_actions(tree: Tree, invalid: RT, gumbel: RT, config: SearchConfig, nodes: int) -> RT:
    """(B, N): every node's Gumbel MuZero action, the root's by sequential halving, the others' by the
    deterministic rule (module docstring)."""
    visits = tree.children_visits
    qvalues = tree.children_rewards + config.discount * tree.children_values
    completed = _completed_q(qvalues, visits, tree.raw_values, tree.children_prior_logits, config)  # (B, N, A)
    improved = F.softmax(tree.children_prior_logits + completed, dim=-1)
    interior = (improved - visits / (1.0 + visits.sum(dim=-1, keepdim=True))).argmax(dim=-1)
    root_visits = visits.spatial[:, 0]
    schedule = _considered_schedule(invalid, config)  # (B, S)
    simulation = root_visits.sum(dim=-1).astype("int64")  # (B,) s: every simulation visits one root child
    considered = _at(schedule, simulation).unsqueeze(-1)
    score = _considered_score(considered, gumbel, tree.children_prior_logits.spatial[:, 0], completed.spatial[:, 0],
                              root_visits)
    root_action = F.where(invalid, float("-inf"), score).argmax(dim=-1)
    at_root = F.tensor((np.arange(nodes) == 0).reshape(1, nodes))
    return F.where(at_root, root_action.unsqueeze(-1), interior)


def _considered_schedule(invalid: RT, config: SearchConfig) -> RT:
    """(B, S): `considered_visits` for each search's number of considered actions, min(max_considered, legal)."""
    actions = int(invalid.shape[-1])
    table = np.array([considered_visits(min(legal, config.max_considered), config.num_simulations)
                      for legal in range(actions + 1)], np.float32)  # row: the number of legal actions
    legal = F.where(invalid, 0, 1).sum(dim=-1)
    return F.matmul(_hot(legal, actions + 1).astype("float32"), F.tensor(table))


def _considered_score(considered: RT, gumbel: RT, logits: RT, completed: RT, visits: RT) -> RT:
    """``g + logits + sigma(completed Q)`` (floored at LOW_LOGIT) for the actions with ``considered`` visits,
    -inf for the others."""
    shifted = logits - logits.max(dim=-1, keepdim=True)
    score = F.maximum(gumbel + shifted + completed, LOW_LOGIT)
    return F.where(visits == considered, score, float("-inf"))


def _completed_q(qvalues: RT, visits: RT, raw_value: RT, logits: RT, config: SearchConfig) -> RT:
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
        raw_values=F.where(leaf_mask, step.value.unsqueeze(-1), tree.raw_values),
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
