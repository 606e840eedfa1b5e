"""The real programs of the MMapGame workloads (XLA's scheduled HLO of JAX programs, read-only in
`algorithms.mmap.workloads`) as REGAL computation graphs, for a transfer test of policies trained on
synthetic graphs.

Each HLO instruction is an op, each HLO tensor a tensor of its buffer's size. An op's runtime is its flop
count, with a floor of 1% of the mean flop count so that data movement (copies, slices: 0 flops in the
estimate) is not free. Tensors that no instruction defines (the program's parameters) get a zero-runtime
input op each, so every tensor has a producer; sizes are in MiB. The runtime objective's memory limit
follows the synthetic data's rule (`data.with_memory_limit`).
"""

from __future__ import annotations

import numpy as np

from algorithms.mmap.workloads import load_workload
from algorithms.regal.data import with_memory_limit
from algorithms.regal.graph import CompGraph

SMALL = ("autoencoder_momentum", "cnn_sgd", "gru_scan_sgd", "lstm_scan_adam", "mlp_sgd", "transformer_decode")


def from_workload(name: str, seed: int = 0) -> CompGraph:
    workload = load_workload(name)
    sizes = np.zeros(workload.num_tensors)
    sizes[workload.tensor_id] = workload.size / float(1 << 20)
    producer = np.full(workload.num_tensors, -1)
    for op, instruction in enumerate(workload.instructions):
        producer[list(instruction.outputs)] = op
    parameters = np.flatnonzero(producer < 0)
    ops = workload.num_instructions + parameters.size
    producer[parameters] = workload.num_instructions + np.arange(parameters.size)
    uses = np.zeros((ops, workload.num_tensors), bool)
    for op, instruction in enumerate(workload.instructions):
        uses[op, list(instruction.operands)] = True
    flops = workload.flops
    runtimes = np.concatenate([np.maximum(flops, 0.01 * flops.mean()) / flops.mean(), np.zeros(parameters.size)])
    graph = CompGraph(runtimes, sizes, producer, uses, name=name, topology=name)
    return with_memory_limit(graph, np.random.default_rng(seed))
