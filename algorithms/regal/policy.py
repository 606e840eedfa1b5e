"""REGAL's networks (paper §3.2) as recurrent tensors: a message-passing GNN over the op multigraph, a
policy head with per-op categorical distributions over quantized Beta parameters, and a baseline GNN.

    h_v^0       = MLP_n(x_v)                      e_uv = MLP_e(x_uv)
    m_v (fwd)   = sum over edges u -> v of  MLP_msg([h_u, e_uv])
    m_u (rev)   = sum over edges u -> v of  MLP_rev([h_v, e_uv])
    h_v^{t+1}   = h_v^t + MLP_node([h_v^t, m_v, m_u])          (T rounds, weights shared across rounds)
    logits_v    = MLP_a(h_v^T)  -> (d + 2) x 16   (affinities, op priority, output transfer priority)

Messages run over an edge list (`features.Batch`): each edge gathers its source's (forward) or target's
(reverse) state, and the messages are summed into the other end by a scatter-add (``bincount``), so a
round costs O(edges), not O(ops^2), and a graph of a thousand ops trains. A message MLP on the
concatenation ``[h_u, e_uv]`` is applied as ``h_u W_h + e_uv W_e + b``: the node part is computed once per
node and then gathered. The baseline is a second GNN whose node states are averaged over the real ops and
mapped to a scalar, as the paper's.

All weights live in one flat vector (a ``trl.param`` while training, a ``trl.tensor`` constant at
inference, so one forward function serves both) and each layer reads its slice of it: one parameter
instead of 56 keeps the optimizer's part of the program at one update instead of 56 (the program's
compile time grows with its node count).
"""

from __future__ import annotations

import dataclasses

import numpy as np

import timerl as trl
from timerl.rt import functional as F
from algorithms.regal.features import CHOICES, EDGE_FEATURES, HEADS, NODE_FEATURES, UNIFORM

RT = trl.RecurrentTensor


@dataclasses.dataclass(frozen=True)
class Sizes:
    hidden: int = 32
    edge_hidden: int = 16
    rounds: int = 2
    uniform_logit: float = 3.0  # initial logit of the uniform action over the others (see init_weights)


def _layers(sizes: Sizes) -> dict[str, tuple[int, int]]:
    """Every weight matrix, (fan in, fan out), of one GNN."""
    h, e = sizes.hidden, sizes.edge_hidden
    return {"node_in": (NODE_FEATURES, h), "node_out": (h, h), "edge_in": (EDGE_FEATURES, e), "edge_out": (e, e),
            "fwd_node": (h, h), "fwd_edge": (e, h), "fwd_out": (h, h),
            "rev_node": (h, h), "rev_edge": (e, h), "rev_out": (h, h),
            "update_in": (3 * h, h), "update_out": (h, h)}


def init_weights(sizes: Sizes = Sizes(), seed: int = 0, head_scale: float = 0.01) -> dict[str, np.ndarray]:
    """PyTorch-style uniform(-1/sqrt(fan in), 1/sqrt(fan in)) for the policy and baseline GNNs and heads;
    the last policy layer's weight matrix is scaled by ``head_scale``, its bias by 0.01, and the bias
    favours the uniform action (logit + 3 gives about 57% of the first choices to standard BRKGA's
    Beta(1, 1), + 5 gives 91%): REINFORCE starts from BRKGA, not from a random mix of skewed proposals,
    which searches worse. The small scale also divides every gradient reaching the GNN by 100: imitation
    (`train.imitate`) starts at ``head_scale`` 1, because from 0.01 it stalled on 2 training seeds of 3 at
    the marginal of the targets, the GNN's features unused. The baseline's output bias
    starts at -1, the reward of proposals as good as standard BRKGA, so its first predictions do not swamp
    the advantage."""
    rng = np.random.default_rng(seed)
    shapes = {f"{net}.{name}": shape for net in ("policy", "baseline") for name, shape in _layers(sizes).items()}
    heads = {"policy": HEADS * CHOICES, "baseline": 1}
    for net, outputs in heads.items():
        shapes.update({f"{net}.head_hidden": (sizes.hidden, sizes.hidden), f"{net}.head_out": (sizes.hidden, outputs)})
    weights = {}
    for name, (fan_in, fan_out) in shapes.items():
        limit = 1.0 / np.sqrt(fan_in)
        weights[f"{name}.w"] = rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)
        weights[f"{name}.b"] = rng.uniform(-limit, limit, (fan_out,)).astype(np.float32)
    weights["policy.head_out.w"] *= head_scale
    weights["policy.head_out.b"] *= 0.01
    weights["policy.head_out.b"].reshape(HEADS, CHOICES)[:, UNIFORM] += sizes.uniform_logit
    weights["baseline.head_out.b"][:] = -1.0
    return weights


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where each named weight sits in the flat vector: name -> (offset, shape)."""

    slots: dict[str, tuple[int, tuple[int, ...]]]
    size: int

    @classmethod
    def of(cls, weights: dict[str, np.ndarray]) -> Layout:
        slots, offset = {}, 0
        for name, value in weights.items():
            slots[name] = (offset, value.shape)
            offset += value.size
        return cls(slots, offset)

    def pack(self, weights: dict[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([weights[name].ravel() for name in self.slots]).astype(np.float32)


class Weights:
    """Slices the flat weight vector into layers and applies affine maps."""

    def __init__(self, flat: RT, layout: Layout, net: str) -> None:
        self.flat, self.layout, self.net = flat, layout, net

    def get(self, name: str) -> RT:
        offset, shape = self.layout.slots[f"{self.net}.{name}"]
        return self.flat.spatial[offset:offset + int(np.prod(shape))].reshape(shape)

    def affine(self, name: str, x: RT, bias: bool = True) -> RT:
        y = x @ self.get(f"{name}.w")
        return y + self.get(f"{name}.b") if bias else y

    def mlp(self, first: str, second: str, x: RT) -> RT:
        return self.affine(second, self.affine(first, x).tanh())


@dataclasses.dataclass(frozen=True)
class GraphInputs:
    """A batch of graphs as RTs (`features.Batch`'s fields)."""

    nodes: RT  # (B, N, NODE_FEATURES)
    edges: RT  # (B, E, EDGE_FEATURES)
    source: RT  # (B, E) int64
    target: RT  # (B, E) int64
    edge_mask: RT  # (B, E)
    mask: RT  # (B, N)


def gnn(weights: Weights, graph: GraphInputs, rounds: int) -> RT:
    """Node states (B, N, hidden) after ``rounds`` of forward and reverse message passing."""
    batch, count = int(graph.nodes.shape[0]), int(graph.nodes.shape[1])
    slots, hidden = int(graph.edges.shape[1]), weights.layout.slots[f"{weights.net}.node_out.w"][1][1]
    h = weights.mlp("node_in", "node_out", graph.nodes)  # (B, N, H)
    e = weights.mlp("edge_in", "edge_out", graph.edges)  # (B, E, E_hidden)
    real = graph.edge_mask.unsqueeze(-1)  # (B, E, 1)
    fwd_edge = weights.affine("fwd_edge", e)  # edge parts do not change across rounds
    rev_edge = weights.affine("rev_edge", e)
    at_source = graph.source.unsqueeze(-1).expand((batch, slots, hidden))
    at_target = graph.target.unsqueeze(-1).expand((batch, slots, hidden))
    for _ in range(rounds):
        # forward: each edge u -> v carries u's state to v; reverse: v's state to u
        fwd = (trl.gather(weights.affine("fwd_node", h, bias=False), 1, at_source) + fwd_edge).tanh()
        to_target = F.apply("bincount", graph.target, weights.affine("fwd_out", fwd) * real, size=count)
        rev = (trl.gather(weights.affine("rev_node", h, bias=False), 1, at_target) + rev_edge).tanh()
        to_source = F.apply("bincount", graph.source, weights.affine("rev_out", rev) * real, size=count)
        h = h + weights.mlp("update_in", "update_out", trl.cat([h, to_target, to_source], dim=-1))
    return h


def policy_logits(flat: RT, layout: Layout, graph: GraphInputs, sizes: Sizes) -> RT:
    """(B, N, HEADS, CHOICES) logits of each op's quantized Beta choices."""
    weights = Weights(flat, layout, "policy")
    h = gnn(weights, graph, sizes.rounds)
    logits = weights.mlp("head_hidden", "head_out", h)
    batch, count = int(graph.nodes.shape[0]), int(graph.nodes.shape[1])
    return logits.reshape((batch, count, HEADS, CHOICES))


def baseline(flat: RT, layout: Layout, graph: GraphInputs, sizes: Sizes) -> RT:
    """(B,) predicted reward: the mean node state over real ops, through an MLP."""
    weights = Weights(flat, layout, "baseline")
    h = gnn(weights, graph, sizes.rounds)
    mask = graph.mask
    pooled = (h * mask.unsqueeze(-1)).sum(dim=1) / mask.sum(dim=1, keepdim=True)
    return weights.mlp("head_hidden", "head_out", pooled).squeeze(-1)
