"""The Graph U-Net written as RTs against an eager PyTorch implementation written here, independently (per-head
loops, torch.nn.functional, pooling as a dense averaging matrix), on the same weights."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as tf

import timerl as trl
from algorithms.egrl.policy import Architecture, GraphUNet, coarsen, eager_forward
from algorithms.egrl.workloads import load


def torch_unet(weights: dict, features: np.ndarray, edges: np.ndarray, arch: Architecture) -> np.ndarray:
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
    return (h @ w["out.w"] + w["out.b"]).numpy()


def rt_forward(graph, arch: Architecture, backend: str, seed: int = 3) -> tuple[np.ndarray, dict]:
    features = graph.normalized_features()
    hierarchy = coarsen(graph.workload.edges, graph.workload.size, arch.depth)
    ctx = trl.Context("i")
    outputs = []
    with ctx:
        net = GraphUNet(hierarchy, arch, seed=seed, domain=ctx.dims)
        net(trl.tensor(features)).sink(lambda point, value: outputs.append(np.array(value)))
    ctx.compile(bounds={ctx.bounds[0]: 1}, backend=backend).execute()
    return outputs[0], net.initial


@pytest.fixture(scope="module")
def resnet50():
    return load("resnet50")


def test_paper_architecture_on_resnet50_matches_torch(resnet50):
    arch = Architecture()  # hidden 128, 4 heads, depth 4
    assert (arch.hidden, arch.heads, arch.depth) == (128, 4, 4)
    out, weights = rt_forward(resnet50, arch, "reference")
    expected = torch_unet(weights, resnet50.normalized_features(), resnet50.workload.edges, arch)
    assert out.shape == (57, 6)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    hierarchy = coarsen(resnet50.workload.edges, 57, arch.depth)
    np.testing.assert_allclose(eager_forward(weights, resnet50.normalized_features(), hierarchy), expected,
                               rtol=1e-4, atol=1e-5)


def test_small_architecture_on_torch_backend_matches_torch(resnet50):
    arch = Architecture(hidden=8, heads=2, depth=1)
    out, weights = rt_forward(resnet50, arch, "torch", seed=5)
    expected = torch_unet(weights, resnet50.normalized_features(), resnet50.workload.edges, arch)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
