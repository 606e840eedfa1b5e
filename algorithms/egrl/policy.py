"""The EGRL policy (and critics): a Graph U-Net (Gao & Ji 2019) with graph-attention layers, written once over
tensor methods shared by recurrent tensors and torch tensors, so the same `forward` builds the RT program and
runs eagerly (for the population's GNN members).

Choices the paper leaves open:
- pooling is *structural*, fixed per workload: level ``l + 1`` merges pairs of consecutive layers of level
  ``l`` (topological order), so depth 4 pools by 16. gPool's learned top-k needs a sort, which the RT op
  vocabulary lacks; consecutive layers are neighbours in every one of our graphs, so pairs are local.
  Pooling is a mean by scatter-add (``index_add``), unpooling a gather (``index_select``) plus the skip;
- message passing is graph attention (4 heads of 32, LeakyReLU 0.2 scores) over each level's undirected
  adjacency with self loops, as a dense masked softmax (at most 366 nodes: the (heads, N, N) scores are
  cheap, and the softmax over neighbours is exact). ReLU follows every attention layer but the last;
- the output is 6 numbers per node: logits (policy, initially biased by `DRAM_BIAS`) or Q-values (critics,
  unbiased) of 3 levels for the weights and 3 for the activation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

import timerl as trl
from timerl.rt import functional as F

NEGATIVE = -1e9  # the mask's bias where two nodes are not neighbours
OUTPUTS = 6
# Table 2's "initial mapping action: DRAM": fresh policies lean to DRAM (valid, slow) instead of uniform
# choices, most of which overflow SRAM; the output bias makes DRAM e^1.5 ~ 4.5 times likelier than each other
DRAM_BIAS = np.array([1.5, 0, 0, 1.5, 0, 0], dtype=np.float32)
OFF_DRAM = 10.0  # tensors a fresh policy or chromosome places outside DRAM, in expectation, on any workload


def dram_bias(nodes: int, off_dram: float = OFF_DRAM) -> np.ndarray:
    """The output bias of fresh policies on a workload of ``nodes`` layers: a DRAM logit ``b`` with
    ``2 * nodes * 2 / (e^b + 2) = off_dram``, so a first map moves about ``off_dram`` of the ``2 * nodes`` tensors
    out of DRAM whatever the workload's size. A fixed bias does not scale: at e^1.5, 226 of BERT's 732 tensors
    left DRAM and none of 200 sampled maps was valid (9 of 200 on ResNet-101), so EGRL, EA and PG never saw a
    valid map on BERT in 4,000 evaluations. Never below `DRAM_BIAS`."""
    bias = max(float(np.log(max(4.0 * nodes / off_dram - 2.0, 1.0))), float(DRAM_BIAS[0]))
    return np.array([bias, 0, 0, bias, 0, 0], dtype=np.float32)


@dataclass(frozen=True)
class Hierarchy:
    """The coarsened graphs of one workload: per level, its size and attention mask, and (below the top)
    which cluster of the next level each node joins."""

    sizes: tuple[int, ...]
    clusters: tuple[np.ndarray, ...]
    inverse_counts: tuple[np.ndarray, ...]  # (size of level l + 1, 1): 1 / members of each cluster
    mask_bias: tuple[np.ndarray, ...]       # (size, size): 0 between neighbours (and self), NEGATIVE elsewhere


def coarsen(edges: np.ndarray, size: int, depth: int) -> Hierarchy:
    sizes, clusters, inverse_counts, masks = [size], [], [], []
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    for level in range(depth + 1):
        n = sizes[-1]
        adjacency = np.eye(n, dtype=bool)
        adjacency[edges[:, 0], edges[:, 1]] = adjacency[edges[:, 1], edges[:, 0]] = True
        masks.append(np.where(adjacency, 0.0, NEGATIVE).astype(np.float32))
        if level == depth:
            break
        cluster = np.arange(n) // 2
        clusters.append(cluster)
        inverse_counts.append((1.0 / np.bincount(cluster)).astype(np.float32)[:, None])
        sizes.append(int(cluster.max()) + 1)
        edges = np.unique(cluster[edges], axis=0)
    return Hierarchy(tuple(sizes), tuple(clusters), tuple(inverse_counts), tuple(masks))


@dataclass(frozen=True)
class Architecture:
    features: int = 19
    hidden: int = 128
    heads: int = 4
    depth: int = 4

    def attention_layers(self) -> list[str]:
        return [f"down{k}" for k in range(self.depth + 1)] + [f"up{k}" for k in reversed(range(self.depth))]


def init_weights(arch: Architecture, seed: int, output_bias: np.ndarray = DRAM_BIAS) -> dict[str, np.ndarray]:
    """PyTorch-style uniform initialisation, ``(-1/sqrt(n_in), 1/sqrt(n_in))``, plus ``output_bias`` on the
    output (policies lean to DRAM; critics take zeros); linear weights are ``(n_in, n_out)`` so a layer is
    ``x @ w + b`` on every backend."""
    rng = np.random.default_rng(seed)

    def uniform(n_in: int, shape: tuple[int, ...]) -> np.ndarray:
        return rng.uniform(-1 / np.sqrt(n_in), 1 / np.sqrt(n_in), size=shape).astype(np.float32)

    head_size = arch.hidden // arch.heads
    weights = {"embed.w": uniform(arch.features, (arch.features, arch.hidden)),
               "embed.b": uniform(arch.features, (arch.hidden,))}
    for name in arch.attention_layers():
        weights[f"{name}.w"] = uniform(arch.hidden, (arch.hidden, arch.hidden))
        weights[f"{name}.source"] = uniform(head_size, (arch.heads, 1, head_size))
        weights[f"{name}.target"] = uniform(head_size, (arch.heads, 1, head_size))
        weights[f"{name}.b"] = np.zeros(arch.hidden, dtype=np.float32)
    weights["out.w"] = uniform(arch.hidden, (arch.hidden, OUTPUTS))
    weights["out.b"] = uniform(arch.hidden, (OUTPUTS,)) + output_bias
    return weights


class TorchOps:
    """The two operations tensor methods do not share, for eager torch tensors."""

    @staticmethod
    def constant(array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(array)

    @staticmethod
    def index_add(x: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
        return torch.zeros((size, *x.shape[1:]), dtype=x.dtype).index_add(0, index, x)


class RTOps:
    """The same two for recurrent tensors (``index_add`` is the registry's scatter-add along a dimension)."""

    @staticmethod
    def constant(array: np.ndarray) -> trl.RecurrentTensor:
        return trl.tensor(array)

    @staticmethod
    def index_add(x: trl.RecurrentTensor, index: trl.RecurrentTensor, size: int) -> trl.RecurrentTensor:
        return F.apply("index_add", x, index, dim=0, size=size)


def _leaky_relu(x: Any) -> Any:
    return x.relu() - (-x).relu() * 0.2


def _attend(weights: dict, name: str, h: Any, mask: Any, arch: Architecture, size: int) -> Any:
    """Multi-head graph attention: ``softmax_j(LeakyReLU(a_t . z_i + a_s . z_j) + mask_ij) @ z``."""
    z = (h @ weights[f"{name}.w"]).reshape((size, arch.heads, arch.hidden // arch.heads)).permute(1, 0, 2)
    source = (z * weights[f"{name}.source"]).sum(-1)  # (heads, N)
    target = (z * weights[f"{name}.target"]).sum(-1)
    attention = (_leaky_relu(target.unsqueeze(-1) + source.unsqueeze(-2)) + mask).softmax(-1)
    return (attention @ z).permute(1, 0, 2).reshape((size, arch.hidden)) + weights[f"{name}.b"]


def forward(weights: dict, features: Any, hierarchy: Hierarchy, arch: Architecture, ops: Any) -> Any:
    """The Graph U-Net: embed, attend and pool down ``depth`` levels, then unpool, add the skip and attend back
    up; returns ``(N, 6)``."""
    masks = [ops.constant(m) for m in hierarchy.mask_bias]
    clusters = [ops.constant(c) for c in hierarchy.clusters]
    h = (features @ weights["embed.w"] + weights["embed.b"]).relu()
    skips = []
    for level in range(arch.depth + 1):
        h = _attend(weights, f"down{level}", h, masks[level], arch, hierarchy.sizes[level]).relu()
        if level < arch.depth:
            skips.append(h)
            h = ops.index_add(h, clusters[level], hierarchy.sizes[level + 1]) * ops.constant(
                hierarchy.inverse_counts[level])
    for level in reversed(range(arch.depth)):
        h = h.index_select(0, clusters[level]) + skips[level]
        h = _attend(weights, f"up{level}", h, masks[level], arch, hierarchy.sizes[level]).relu()
    return h @ weights["out.w"] + weights["out.b"]


class GraphUNet:
    """The network as recurrent tensors: one `trl.param` per weight over ``domain`` (training iterations)."""

    def __init__(self, hierarchy: Hierarchy, arch: Architecture = Architecture(), seed: int = 0,
                 domain: tuple = (), output_bias: np.ndarray = DRAM_BIAS,
                 initial: dict[str, trl.RecurrentTensor] | None = None) -> None:
        """The weights start at ``init_weights(arch, seed, output_bias)``, or at the given recurrent tensors
        ``initial`` (by name; e.g. a udf's outputs, so one compiled program serves many seeds)."""
        self.hierarchy, self.arch = hierarchy, arch
        self.initial = init_weights(arch, seed, output_bias)
        self.names = list(self.initial)
        start = self.initial if initial is None else initial
        self.weights = {name: trl.param(start[name], domain=domain) for name in self.names}

    def __call__(self, features: trl.RecurrentTensor) -> trl.RecurrentTensor:
        return forward(self.weights, features, self.hierarchy, self.arch, RTOps)

    def parameters(self) -> list[trl.RecurrentTensor]:
        return [self.weights[name] for name in self.names]


def eager_forward(weights: dict[str, np.ndarray], features: np.ndarray, hierarchy: Hierarchy,
                  arch: Architecture = Architecture()) -> np.ndarray:
    """The same network on plain arrays (torch, no gradients): how the population's GNN members act."""
    with torch.no_grad():
        tensors = {name: torch.as_tensor(value) for name, value in weights.items()}
        return forward(tensors, torch.as_tensor(features), hierarchy, arch, TorchOps).numpy()
