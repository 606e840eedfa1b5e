"""The Graph U-Net written as RTs against the independent eager PyTorch implementation of `egrl_torch_reference`,
on the same weights."""

from __future__ import annotations

import numpy as np
import pytest
from egrl_torch_reference import torch_unet

import timerl as trl
from algorithms.egrl.policy import Architecture, GraphUNet, coarsen, eager_forward
from algorithms.egrl.workloads import load


def rt_forward(graph, arch: Architecture, backend: str, seed: int = 3) -> tuple[np.ndarray, dict]:
    features = graph.normalized_features()
    hierarchy = coarsen(graph.workload.edges, graph.workload.size, arch.depth)
    ctx = trl.Context("i")
    outputs = []
    with ctx:
        net = GraphUNet(hierarchy, arch, seed=seed, domain=ctx.dims)
        net(trl.tensor(features)).sink(lambda point, value: outputs.append(np.asarray(value).copy()))
    ctx.compile(bounds={ctx.bounds[0]: 1}, backend=backend).execute()
    return outputs[0], net.initial


@pytest.fixture(scope="module")
def resnet50():
    return load("resnet50")


def test_paper_architecture_on_resnet50_matches_torch(resnet50):
    arch = Architecture()  # hidden 128, 4 heads, depth 4
    assert (arch.hidden, arch.heads, arch.depth) == (128, 4, 4)
    out, weights = rt_forward(resnet50, arch, "reference")
    expected = torch_unet(weights, resnet50.normalized_features(), resnet50.workload.edges, arch).numpy()
    assert out.shape == (57, 6)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
    hierarchy = coarsen(resnet50.workload.edges, 57, arch.depth)
    np.testing.assert_allclose(eager_forward(weights, resnet50.normalized_features(), hierarchy), expected,
                               rtol=1e-4, atol=1e-5)


def test_small_architecture_on_torch_backend_matches_torch(resnet50):
    arch = Architecture(hidden=8, heads=2, depth=1)
    out, weights = rt_forward(resnet50, arch, "torch", seed=5)
    expected = torch_unet(weights, resnet50.normalized_features(), resnet50.workload.edges, arch).numpy()
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)
