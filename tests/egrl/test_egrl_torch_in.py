"""A user's own network through `workload_from_torch` and `map_network`: a small torchvision-style ResNet written
here by hand (torchvision itself is not installed), checked against its modules' shapes and parameter counts."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
from torch import nn

from algorithms.egrl.chip import Chip, compiler_mapping
from algorithms.egrl.learners import _identity
from algorithms.egrl.mapping import map_network
from algorithms.egrl.spec import LEVELS
from algorithms.egrl.workloads import FEATURES, WorkloadError, workload_from_torch


class BasicBlock(nn.Module):
    """torchvision's ResNet-18 block."""

    def __init__(self, inplanes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class TinyResNet(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 7, 2, 3, bias=False)
        self.bn1, self.relu, self.maxpool = nn.BatchNorm2d(16), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(BasicBlock(16, 16), BasicBlock(16, 16))
        self.layer2 = nn.Sequential(BasicBlock(16, 32, 2), BasicBlock(32, 32))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(32, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.avgpool(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(x, 1))


def test_layers_features_and_edges_of_a_users_resnet():
    model = TinyResNet().eval()
    graph = workload_from_torch(model, torch.zeros(1, 3, 64, 64))
    convs = [name for name, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    # the input, every conv (9), the max pool, the average pool and fc; BN, ReLU, adds and flatten fold
    assert graph.workload.size == 1 + len(convs) + 3
    assert graph.kinds.count("conv") == len(convs) == 10
    assert graph.features.shape == (graph.workload.size, len(FEATURES))
    params = {name.replace(".", "_"): sum(p.numel() for p in m.parameters()) for name, m in model.named_modules()
              if isinstance(m, (nn.Conv2d, nn.Linear))}
    for k, name in enumerate(graph.names):
        if name in params:
            assert graph.workload.weight_bytes[k] == params[name]
    stem = graph.names.index("conv1")
    assert graph.features[stem, FEATURES.index("ofm_x")] == 32 and graph.features[stem, FEATURES.index("ofm_z")] == 16
    assert graph.features[stem, FEATURES.index("kernel_x")] == 7 and graph.features[stem, FEATURES.index("stride")] == 2
    assert np.all(graph.features[:, FEATURES.index("batch")] == 1)
    # a residual: layer1.0's input (the max pool's output) feeds both its first conv and its sum (conv2's layer)
    pool, second = graph.names.index("maxpool"), graph.names.index("layer1_0_conv2")
    edges = {tuple(e) for e in graph.workload.edges.tolist()}
    assert (pool, graph.names.index("layer1_0_conv1")) in edges and (pool, second) in edges


def test_other_modules_with_weights_are_layers_and_untraceable_models_are_refused():
    class Audio(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.head = nn.Conv1d(4, 8, 3), nn.Linear(8, 2)

        def forward(self, x):
            return self.head(self.conv(x).mean(-1))

    graph = workload_from_torch(Audio(), torch.zeros(1, 4, 20))
    assert graph.kinds == ("input", "other", "linear")
    assert graph.workload.weight_bytes[1] == 4 * 8 * 3 + 8

    class Branchy(nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x  # data-dependent control flow: torch.fx cannot trace it

    with pytest.raises(WorkloadError, match="test_egrl_torch_in.py"):
        workload_from_torch(Branchy(), torch.zeros(1, 3))
    with pytest.raises(WorkloadError, match="example_input"):
        workload_from_torch(TinyResNet(), [1, 2])


def test_map_network_writes_the_map_as_json_and_picture(tmp_path):
    record = map_network(TinyResNet().eval(), torch.zeros(1, 3, 64, 64), method="greedy", budget=200,
                         out=str(tmp_path))
    assert os.path.exists(tmp_path / "mapping.png")
    with open(tmp_path / "mapping.json") as handle:
        saved = json.load(handle)
    assert saved == json.loads(json.dumps(record))
    graph = workload_from_torch(TinyResNet().eval(), torch.zeros(1, 3, 64, 64))
    assert [layer["name"] for layer in saved["layers"]] == list(graph.names)
    mapping = np.array([[LEVELS.index(layer["weights"]), LEVELS.index(layer["activation"])]
                        for layer in saved["layers"]])
    chip = Chip(graph.workload, noise=0.0)
    assert saved["valid"] and chip.repair(mapping[:, 0], mapping[:, 1]).valid
    latency = chip.latency(mapping[:, 0], mapping[:, 1], noisy=False)
    assert saved["latency_seconds"] == pytest.approx(latency)
    compiler = chip.latency(*compiler_mapping(chip), noisy=False)
    assert saved["speedup"]["liveness"] == pytest.approx(compiler / latency)


def test_two_models_of_one_class_do_not_share_a_compiled_learner():
    small, large = TinyResNet(10).eval(), TinyResNet(100).eval()
    a = workload_from_torch(small, torch.zeros(1, 3, 64, 64))
    b = workload_from_torch(large, torch.zeros(1, 3, 64, 64))
    assert a.workload.name == b.workload.name == "TinyResNet"
    assert _identity(a) != _identity(b)  # the learner and worker caches' key
    assert _identity(a) == _identity(workload_from_torch(small, torch.zeros(1, 3, 64, 64)))
