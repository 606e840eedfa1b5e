"""Workloads as graphs: the models of `models` traced with torch.fx, their shapes propagated on the ``meta``
device, and the traced ops merged into the mappable layers the chip sees.

How ops merge into layers (what a compiler would fuse, so that a layer is a tensor actually stored):
- a layer starts at every conv, linear, pooling, embedding, layer norm, matmul, softmax, at the network
  input, and at a permute/transpose (it moves data) unless its input is itself a permute/transpose;
- batch norm (folded into the conv's weights), activations, dropout, residual adds, scaling, views, reshapes,
  flatten and indexing fold into the layer that produced their first input: that layer's output becomes
  theirs, and their other inputs become edges into it.
- any other module with parameters of its own (a Conv1d, a GRU, ...) starts a layer of kind ``other``.
This gives 57 layers for ResNet-50 (53 convs, max pool, average pool, fc and the input), 108 for ResNet-101,
366 for BERT-large at sequence length 128 (24 x 15 per encoder layer, input, three embeddings, their
layer norm, pooler), close to the paper's 57 / 108 / 376, and 186 for BERT-base at 128 tokens.

`workload_from_torch(model, example_input)` does the same for a user's own network. Tensors count elements (the
chip's dtype makes them bytes, int8 by default) and the batch is 1. An embedding layer stores its whole table but
reads only the rows of its 128 tokens per inference (`Workload.weight_reads`).

The 19 node features are the paper's Table 1, in its order: op id, weight bytes, ifm x / y / z, ofm x / y / z,
ifm size, ofm size, ops after the node, weight bytes from the node to the last, groups, kernel x / y, stride,
pad, dilation, batch. A tensor ``(batch, *dims)`` has x = last dim, y = the one before, z = the product of
the rest (so NCHW gives x = W, y = H, z = C).
"""

from __future__ import annotations

import functools
import operator
import os
import sys
from dataclasses import dataclass

import numpy as np
import torch
import torch.fx
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp

from algorithms.egrl.chip import Workload
from algorithms.egrl.models import MODELS
from timerl.errors import TimeRLError

_HERE = os.path.dirname(os.path.abspath(__file__))

FEATURES = ("opid", "weight_size", "ifm_x", "ifm_y", "ifm_z", "ofm_x", "ofm_y", "ofm_z", "ifm_size", "ofm_size",
            "n_ops_left", "n_w_left", "groups", "kernel_x", "kernel_y", "stride", "pad", "dilation", "batch")
OP_KINDS = ("input", "conv", "linear", "maxpool", "avgpool", "embedding", "layernorm", "matmul", "softmax",
            "layout", "other")
WORKLOADS = tuple(MODELS)  # resnet50, resnet101, bert (BERT-large, 128 tokens), bert_base (BERT-base, 128 tokens)


class WorkloadError(TimeRLError):
    """A network `workload_from_torch` cannot turn into a workload."""

_LAYER_MODULES = {nn.Conv2d: "conv", nn.Linear: "linear", nn.MaxPool2d: "maxpool", nn.AdaptiveAvgPool2d: "avgpool",
                  nn.Embedding: "embedding", nn.LayerNorm: "layernorm"}
_LAYER_FUNCTIONS = {torch.matmul: "matmul", operator.matmul: "matmul", torch.bmm: "matmul",
                    torch.softmax: "softmax", nn.functional.softmax: "softmax"}
_LAYOUT_METHODS = ("permute", "transpose")
_LAYER_METHODS = {"softmax": "softmax", "matmul": "matmul"}


@dataclass
class _Layer:
    name: str
    kind: str
    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]
    ops: float
    weight_bytes: float
    module: nn.Module | None = None

    @property
    def weight_reads(self) -> float:
        """Weight bytes read per inference: an embedding gathers one row per token (its output), or the whole table
        when that is smaller (token types: 2 rows)."""
        return min(float(_numel(self.out_shape)), self.weight_bytes) if self.kind == "embedding" else self.weight_bytes


@dataclass(frozen=True)
class WorkloadGraph:
    workload: Workload
    names: tuple[str, ...]
    kinds: tuple[str, ...]
    features: np.ndarray  # (N, 19), raw (bytes, elements, ops)

    def normalized_features(self) -> np.ndarray:
        """log1p of every feature scaled by its column's maximum, so each column lies in [0, 1]."""
        logs = np.log1p(np.maximum(self.features, 0.0))
        return (logs / np.maximum(logs.max(axis=0), 1e-6)).astype(np.float32)


def _numel(shape: tuple[int, ...]) -> int:
    return functools.reduce(operator.mul, shape, 1)


def _xyz(shape: tuple[int, ...]) -> tuple[int, int, int]:
    dims = shape[1:] if len(shape) > 1 else shape
    x = dims[-1] if dims else 1
    y = dims[-2] if len(dims) > 1 else 1
    return x, y, _numel(dims[:-2])


def _classify(node: torch.fx.Node, modules: dict[str, nn.Module]) -> str | None:
    """The layer kind a traced op starts, or None when it folds into its producer."""
    if node.op == "placeholder":
        return "input"
    if node.op == "call_module":
        module = modules[node.target]
        kind = _LAYER_MODULES.get(type(module))
        if kind is None and not isinstance(module, nn.modules.batchnorm._BatchNorm) and any(
                True for _ in module.parameters(recurse=False)):
            return "other"
        return kind
    if node.op == "call_function":
        return _LAYER_FUNCTIONS.get(node.target)
    if node.op == "call_method" and node.target in _LAYOUT_METHODS:
        return "layout"
    if node.op == "call_method":
        return _LAYER_METHODS.get(node.target)
    return None


def _layer_ops(kind: str, module: nn.Module | None, in_shape: tuple[int, ...], out_shape: tuple[int, ...],
               args: list[torch.fx.Node]) -> float:
    out = _numel(out_shape)
    if kind == "conv":
        return 2.0 * out * module.in_channels // module.groups * _numel(module.kernel_size)
    if kind == "linear":
        return 2.0 * out * module.in_features
    if kind == "matmul":
        return 2.0 * out * in_shape[-1]
    if kind == "maxpool":
        return float(out * module.kernel_size**2)
    return float(max(out, _numel(in_shape)))


def trace(name: str) -> WorkloadGraph:
    build, input_shape = MODELS[name]
    with torch.device("meta"):
        model = build().eval()
        tokens = name.startswith("bert")
        example = torch.zeros(input_shape, dtype=torch.long) if tokens else torch.zeros(input_shape)
    graph_module = torch.fx.symbolic_trace(model)
    ShapeProp(graph_module).propagate(example)
    return _layers_of(name, graph_module)


def workload_from_torch(model: nn.Module, example_input, name: str | None = None) -> WorkloadGraph:
    """A user's network as a workload: ``model`` traced with torch.fx, its shapes propagated with
    ``example_input`` (one tensor, or a tuple of them, batch first; the batch is node feature 19), its ops merged
    into layers as for the built-in workloads (module docstring), each with the paper's 19 features. Its tensors
    count elements; the chip's dtype makes them bytes. Raises `WorkloadError` when torch.fx cannot trace it."""
    where = _caller()
    if not isinstance(model, nn.Module):
        raise WorkloadError(f"{where}: model must be a torch.nn.Module, got {type(model).__name__}")
    inputs = example_input if isinstance(example_input, tuple) else (example_input,)
    if not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise WorkloadError(f"{where}: example_input must be a tensor or a tuple of tensors")
    try:
        graph_module = torch.fx.symbolic_trace(model)
    except Exception as error:  # torch.fx raises whatever the traced Python code raises
        raise WorkloadError(f"{where}: torch.fx cannot trace {type(model).__name__}: {error}") from None
    with torch.no_grad():
        try:
            ShapeProp(graph_module).propagate(*inputs)
        except Exception as error:
            raise WorkloadError(f"{where}: running {type(model).__name__} on example_input failed: {error}") from None
    graph = _layers_of(name or type(model).__name__, graph_module)
    if graph.workload.size < 2:
        raise WorkloadError(f"{where}: {type(model).__name__} has no layer to map (no conv, linear, ...)")
    return graph


def _caller() -> str:
    """``file:line`` of the innermost frame outside this package (the user's call)."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_HERE + os.sep):
        frame = frame.f_back
    return "<unknown>" if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def _layers_of(name: str, graph_module: torch.fx.GraphModule) -> WorkloadGraph:
    modules = dict(graph_module.named_modules())
    layers: list[_Layer] = []
    owner: dict[torch.fx.Node, int] = {}
    edges: set[tuple[int, int]] = set()

    def shape_of(node: torch.fx.Node) -> tuple[int, ...] | None:
        meta = node.meta.get("tensor_meta")
        return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else None

    for node in graph_module.graph.nodes:
        out_shape = shape_of(node)
        if out_shape is None or node.op in ("get_attr", "output"):
            continue
        inputs = [arg for arg in node.all_input_nodes if arg in owner]
        kind = _classify(node, modules)
        if kind == "layout" and inputs and layers[owner[inputs[0]]].kind == "layout":
            kind = None
        if kind is None and inputs:
            target = owner[inputs[0]]
            layer = layers[target]
            layer.ops += _numel(out_shape)
            if _numel(out_shape) == _numel(layer.out_shape):
                layer.out_shape = out_shape
        else:
            module = modules.get(node.target) if node.op == "call_module" else None
            in_shape = shape_of(node.all_input_nodes[0]) if node.all_input_nodes else out_shape
            in_shape = in_shape or out_shape
            weights = sum(p.numel() for p in module.parameters(recurse=False)) if module is not None else 0
            target = len(layers)
            layers.append(_Layer(node.name, kind or "layout", in_shape, out_shape,
                                 _layer_ops(kind or "layout", module, in_shape, out_shape, inputs),
                                 float(weights), module))
        owner[node] = target
        edges.update((owner[arg], target) for arg in inputs if owner[arg] != target)
    return _graph(name, layers, edges)


def _graph(name: str, layers: list[_Layer], edges: set[tuple[int, int]]) -> WorkloadGraph:
    ops = np.array([layer.ops for layer in layers])
    weight_bytes = np.array([layer.weight_bytes for layer in layers])
    act_bytes = np.array([float(_numel(layer.out_shape)) for layer in layers])
    rows = []
    ops_after = ops[::-1].cumsum()[::-1] - ops
    weights_from = weight_bytes[::-1].cumsum()[::-1]
    for k, layer in enumerate(layers):
        module = layer.module
        conv = isinstance(module, nn.Conv2d)
        pool = isinstance(module, nn.MaxPool2d)
        kernel = module.kernel_size if conv else ((module.kernel_size,) * 2 if pool else (0, 0))
        rows.append([OP_KINDS.index(layer.kind), layer.weight_bytes, *_xyz(layer.in_shape), *_xyz(layer.out_shape),
                     _numel(layer.in_shape), _numel(layer.out_shape), ops_after[k], weights_from[k],
                     module.groups if conv else 0, kernel[0], kernel[1],
                     _first(module.stride) if conv or pool else 0, _first(module.padding) if conv or pool else 0,
                     _first(module.dilation) if conv or pool else 0, layer.out_shape[0]])
    edge_array = np.array(sorted(edges), dtype=np.int64).reshape(-1, 2)
    weight_reads = np.array([layer.weight_reads for layer in layers])
    workload = Workload(name, ops, weight_bytes, act_bytes, 0.0, edge_array, weight_reads)
    return WorkloadGraph(workload, tuple(layer.name for layer in layers), tuple(layer.kind for layer in layers),
                         np.array(rows, dtype=np.float64))


def _first(value) -> int:
    return int(value[0] if isinstance(value, tuple) else value)


@functools.lru_cache(maxsize=None)
def load(name: str) -> WorkloadGraph:
    """The traced graph of one of `WORKLOADS` (cached per process)."""
    if name not in MODELS:
        raise ValueError(f"unknown workload {name!r}; choose one of {', '.join(MODELS)}")
    return trace(name)
