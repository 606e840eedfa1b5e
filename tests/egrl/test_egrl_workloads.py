"""Workload graphs traced from the model definitions: node counts and features against known layer shapes."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.egrl.chip import Chip, compiler_mapping
from algorithms.egrl.workloads import FEATURES, OP_KINDS, load


def feature(graph, layer: int, name: str) -> float:
    return graph.features[layer, FEATURES.index(name)]


@pytest.fixture(scope="module")
def resnet50():
    return load("resnet50")


def test_resnet50_layer_count_and_kinds(resnet50):
    assert len(FEATURES) == 19
    assert resnet50.workload.size == 57
    assert resnet50.kinds.count("conv") == 53  # 1 stem + 16 bottlenecks x 3 + 4 downsamples
    assert resnet50.features.shape == (57, 19)
    # the residual adds fold into the block's last conv: 16 skip edges besides the chain
    assert len(resnet50.workload.edges) == 56 + 16


def test_resnet50_stem_conv_features(resnet50):
    stem = resnet50.kinds.index("conv")
    assert feature(resnet50, stem, "opid") == OP_KINDS.index("conv")
    assert feature(resnet50, stem, "weight_size") == 64 * 3 * 7 * 7
    assert [feature(resnet50, stem, k) for k in ("ifm_x", "ifm_y", "ifm_z")] == [224, 224, 3]
    assert [feature(resnet50, stem, k) for k in ("ofm_x", "ofm_y", "ofm_z")] == [112, 112, 64]
    assert feature(resnet50, stem, "ofm_size") == 112 * 112 * 64
    assert [feature(resnet50, stem, k) for k in ("kernel_x", "kernel_y", "stride", "pad", "dilation", "groups")] \
        == [7, 7, 2, 3, 1, 1]
    assert resnet50.workload.ops[stem] >= 2 * 112 * 112 * 64 * 3 * 49  # plus the folded bn / relu elements


def test_resnet50_totals_and_left_features(resnet50):
    workload = resnet50.workload
    # ResNet-50 has 25.5 M parameters; bn parameters fold into the convs and are not counted
    assert workload.weight_bytes.sum() == pytest.approx(25.5e6, rel=0.01)
    assert workload.ops.sum() == pytest.approx(2 * 4.1e9, rel=0.03)
    assert feature(resnet50, 0, "n_w_left") == workload.weight_bytes.sum()
    assert feature(resnet50, 56, "n_ops_left") == 0
    fc = resnet50.kinds.index("linear")
    assert feature(resnet50, fc, "weight_size") == 2048 * 1000 + 1000


def test_bert_embeddings_read_one_row_per_token():
    bert = load("bert")
    words, token_types = bert.names.index("words"), bert.names.index("token_types")
    workload = bert.workload
    assert workload.weight_bytes[words] == 30522 * 1024 and workload.weight_read_bytes[words] == 128 * 1024
    assert workload.weight_bytes[token_types] == workload.weight_read_bytes[token_types] == 2 * 1024
    others = np.array([kind != "embedding" for kind in bert.kinds])
    np.testing.assert_array_equal(workload.weight_read_bytes[others], workload.weight_bytes[others])


@pytest.mark.parametrize("name, size, tolerance", [("resnet101", 108, 0), ("bert", 376, 12)])
def test_other_workloads_are_close_to_the_paper(name, size, tolerance):
    graph = load(name)
    assert abs(graph.workload.size - size) <= tolerance
    chip = Chip(graph.workload, noise=0.0)
    assert chip.repair(*compiler_mapping(chip)).valid
    normalized = graph.normalized_features()
    assert normalized.shape == (graph.workload.size, 19)
    assert np.all((normalized >= 0) & (normalized <= 1))
