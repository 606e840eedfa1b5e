"""An eager PyTorch Graph U-Net written independently of `algorithms.egrl.policy` (per-head loops,
torch.nn.functional, pooling as a dense averaging matrix): the ground truth for the RT policy and learner."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as tf

from algorithms.egrl.policy import Architecture


def torch_unet(weights: dict, features: np.ndarray, edges: np.ndarray, arch: Architecture) -> torch.Tensor:
    """``weights``: arrays or float64 tensors (keep their gradients); returns the (N, 6) output."""
    w = {name: torch.as_tensor(value, dtype=torch.float64) for name, value in weights.items()}
    n = features.shape[0]

    def attention(name, h, adjacency):
        z = h @ w[f"{name}.w"]
        size = arch.hidden // arch.heads
        heads = []
        for k in range(arch.heads):
            zk = z[:, k * size:(k + 1) * size]
            score = (zk @ w[f"{name}.target"][k, 0])[:, None] + (zk @ w[f"{name}.source"][k, 0])[None, :]
            score = tf.leaky_relu(score, 0.2).masked_fill(~adjacency, float("-inf"))
            heads.append(torch.softmax(score, dim=1) @ zk)
        return torch.relu(torch.cat(heads, dim=1) + w[f"{name}.b"])

    adjacencies, pools, sizes = [], [], [n]
    level_edges = torch.as_tensor(edges)
    for level in range(arch.depth + 1):
        adjacency = torch.eye(sizes[-1], dtype=torch.bool)
        adjacency[level_edges[:, 0], level_edges[:, 1]] = True
        adjacencies.append(adjacency | adjacency.T)
        if level < arch.depth:
            members = torch.arange(sizes[-1]) // 2
            pool = tf.one_hot(members).T.double()
            pools.append(pool / pool.sum(dim=1, keepdim=True))
            sizes.append(pool.shape[0])
            level_edges = torch.unique(members[level_edges], dim=0)
    h = torch.relu(torch.as_tensor(features, dtype=torch.float64) @ w["embed.w"] + w["embed.b"])
    skips = []
    for level in range(arch.depth + 1):
        h = attention(f"down{level}", h, adjacencies[level])
        if level < arch.depth:
            skips.append(h)
            h = pools[level] @ h
    for level in reversed(range(arch.depth)):
        h = attention(f"up{level}", (pools[level] > 0).T.double() @ h + skips[level], adjacencies[level])
    return h @ w["out.w"] + w["out.b"]
