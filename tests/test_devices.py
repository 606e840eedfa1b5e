"""Values on a device other than the CPU. The whole suite runs on CUDA where torch sees a GPU (the torch backend
puts its values there); these tests check on any machine what that relies on, with torch's ``meta`` device
(tensors with no data) standing in for the GPU."""

from __future__ import annotations

import numpy as np
import torch

from timerl.backends.torch_backend import _fast_namespace
from timerl.runtime.evaluate import host_array, sink_value


def test_an_ops_constants_are_made_on_the_backends_device():
    xp = _fast_namespace(torch.device("meta"))
    made = [xp.arange(4), xp.asarray([1.0, 2.0]), xp.asarray(np.ones(3)), xp.zeros((2, 2)), xp.ones(3),
            xp.full((2,), 7.0), xp.empty((1,)), xp.eye(3), xp.linspace(0.0, 1.0, 5)]
    assert [x.device.type for x in made] == ["meta"] * len(made)
    assert xp.arange(4, device="cpu").device.type == "cpu"  # an explicit device wins
    on_cpu = torch.ones(2)
    assert xp.asarray(on_cpu).device.type == "cpu"  # an array made from a tensor stays where the tensor is
    assert _fast_namespace(torch.device("cpu")).arange(3).device.type == "cpu"


def test_values_reach_the_host_as_copies():
    value = torch.arange(3.0)
    kept = sink_value(value)
    kept += 1  # the sink's copy: the program's value is unchanged
    assert value.tolist() == [0.0, 1.0, 2.0] and kept.tolist() == [1.0, 2.0, 3.0]
    assert host_array(torch.tensor([4, 5])).tolist() == [4, 5] and host_array([6]).tolist() == [6]
