"""REGAL's performance model (paper §2.1 and A.4), decoding a whole BRKGA population at once.

A chromosome in [0, 1]^n, ``n = ops * d + ops + tensors * d``, holds op-device affinities, op priorities and
tensor-transfer priorities, in that order. Decoding:

1. Placement: op v runs on ``argmax_j affinity[v, j]``.
2. Transfers: tensor k is copied to device j (a transfer node X(k, j)) when k's producer is not on j and
   some consumer of k is. An op reads a remote input through its transfer, a local one straight from its
   producer: "inputs must be local" is a dependence. (The decoder keeps a slot for every (k, j), and
   marks the unneeded ones done from the start, so the whole population advances in lockstep.)
3. Schedule: one topological sort of ops and transfers (Kahn's algorithm), always taking the ready node
   of highest priority; each device's schedule is its subsequence.
4. Simulation, in that order. An op starts when its device is free and its inputs are there, and runs for
   its runtime. A transfer is synchronous (blocking) and free: it takes place, in zero time, once the
   tensor exists and both devices are free, and both devices wait for it.
5. Memory, per device: an op's outputs are allocated while its inputs are still live; a tensor is freed
   after its last local reader (a local consumer op, or an outgoing transfer); a tensor nobody reads is
   freed right after its producer (it still counts at that moment). The copy made by a transfer is live on
   the destination from the transfer until its last consumer there.

Objectives: ``peak_memory`` (max over devices), and ``runtime`` (makespan) under the graph's memory limit,
where an infeasible solution costs ``sum(runtimes) * (1 + peak / limit)``: more than any feasible one (the
makespan never exceeds the sum of runtimes), and less the nearer it is to fitting. A peak within a relative
`LIMIT_TOLERANCE` of the limit fits: peaks are sums of tensor sizes in schedule order, so one set of live
tensors can sum to values a last bit apart, and the synthetic graphs' limits are themselves such peaks
(`data.with_memory_limit`). Without it a solution at exactly the limit could cost twice the makespan.

Two decoders compute this model: the compiled one (`compiled`, numba, one chromosome at a time; the
default, ``engine="compiled"``) and the NumPy one below (``engine="numpy"``), which decodes the whole
population in lockstep and is the oracle the compiled one is tested against.
"""

from __future__ import annotations

import numpy as np

from algorithms.regal import compiled
from algorithms.regal.graph import CompGraph

DEVICES = 2
OBJECTIVES = ("runtime", "peak_memory")
ENGINES = ("compiled", "numpy")
LIMIT_TOLERANCE = 1e-9  # relative: a peak this close to the memory limit fits it (rounding, not memory)


def chromosome_length(graph: CompGraph, devices: int = DEVICES) -> int:
    return graph.num_ops * devices + graph.num_ops + graph.num_tensors * devices


def split(graph: CompGraph, chromosomes: np.ndarray, devices: int = DEVICES) -> tuple[np.ndarray, ...]:
    """``(affinity (P, ops, d), op_priority (P, ops), transfer_priority (P, tensors, d))``."""
    ops, tensors = graph.num_ops, graph.num_tensors
    population = chromosomes.shape[0]
    affinity = chromosomes[:, :ops * devices].reshape(population, ops, devices)
    op_priority = chromosomes[:, ops * devices:ops * devices + ops]
    transfer_priority = chromosomes[:, ops * devices + ops:].reshape(population, tensors, devices)
    return affinity, op_priority, transfer_priority


def evaluate(graph: CompGraph, chromosomes: np.ndarray, devices: int = DEVICES,
             engine: str = "compiled") -> tuple[np.ndarray, np.ndarray]:
    """``(runtime, peak_memory)``, each of shape (P,), for a population of chromosomes (P, n)."""
    chromosomes = np.atleast_2d(np.asarray(chromosomes, np.float64))
    if chromosomes.shape[1] != chromosome_length(graph, devices):
        raise ValueError(f"chromosomes of length {chromosomes.shape[1]}; graph {graph.name!r} on {devices} "
                         f"devices needs {chromosome_length(graph, devices)}")
    if engine == "compiled":
        return compiled.evaluate(graph, chromosomes, devices)
    if engine != "numpy":
        raise ValueError(f"unknown decoder {engine!r}; choose one of {ENGINES}")
    return _Simulation(graph, chromosomes, devices).run()


def schedule_positions(graph: CompGraph, chromosomes: np.ndarray, devices: int = DEVICES) -> np.ndarray:
    """(P, ops + tensors * d): where each op, then each transfer X(k, j) (node ``ops + j * tensors + k``),
    comes in the decoded topological order (0 first), -1 for transfers the placement does not need. Keys
    decreasing with these positions decode to the same schedule (the decoder takes the ready node of highest
    priority, and the node it took at step t is ready then, with every other ready node after it)."""
    chromosomes = np.atleast_2d(np.asarray(chromosomes, np.float64))
    simulation = _Simulation(graph, chromosomes, devices)
    simulation.run()
    return simulation.position


def objective(graph: CompGraph, chromosomes: np.ndarray, kind: str, devices: int = DEVICES,
              engine: str = "compiled") -> np.ndarray:
    """The cost BRKGA minimizes, (P,)."""
    runtime, peak = evaluate(graph, chromosomes, devices, engine)
    if kind == "peak_memory":
        return peak
    if kind != "runtime":
        raise ValueError(f"unknown objective {kind!r}; choose one of {OBJECTIVES}")
    limit = graph.memory_limit
    infeasible = graph.runtimes.sum() * (1.0 + peak / limit)
    return np.where(peak <= limit * (1.0 + LIMIT_TOLERANCE), runtime, infeasible)


class _Simulation:
    """The lockstep decoder: every array has the population as its first axis. Per-tensor state is laid out
    (P, devices, tensors) so that one op's row on its device is a single two-index lookup. Node ``ops + j *
    tensors + k`` is the transfer of tensor k to device j."""

    def __init__(self, graph: CompGraph, chromosomes: np.ndarray, devices: int) -> None:
        self.graph, self.devices = graph, devices
        ops, tensors = graph.num_ops, graph.num_tensors
        population = chromosomes.shape[0]
        affinity, op_priority, transfer_priority = split(graph, chromosomes, devices)
        self.place = affinity.argmax(axis=2)  # (P, ops)
        self.source = self.place[:, graph.producer]  # (P, tensors): where each tensor is made
        on_device = (self.place[:, None, :] == np.arange(devices)[:, None]).astype(np.int64)  # (P, d, ops)
        readers = on_device @ graph.uses.astype(np.int64)  # (P, d, tensors): consumers of k on device j
        here = self.source[:, None, :] == np.arange(devices)[:, None]
        self.active = (readers > 0) & ~here
        # local readers left: consumer ops on the device, plus outgoing transfers on the producer's device
        self.remaining = readers + here * self.active.sum(axis=1, keepdims=True)
        transfer_priority = transfer_priority.transpose(0, 2, 1).reshape(population, -1)
        self.priority = np.concatenate([op_priority, transfer_priority], axis=1)
        inputs = graph.uses.sum(axis=1)
        self.pending = np.tile(np.concatenate([inputs, np.ones(tensors * devices, np.int64)]), (population, 1))
        # transfers nobody needs are never scheduled
        self.unscheduled = np.concatenate([np.ones((population, ops), bool), self.active.reshape(population, -1)],
                                          axis=1)
        self.free = np.zeros((population, devices))  # when each device is next idle
        self.present = np.zeros((population, devices, tensors))  # when tensor k arrived on device j
        self.memory = np.zeros((population, devices))
        self.peak = np.zeros((population, devices))
        self.reads_from = graph.produces.astype(np.int64) @ graph.uses.T.astype(np.int64)  # [u, v]: v reads u's
        self.position = np.full(self.priority.shape, -1, np.int64)  # step at which each node was scheduled

    def run(self) -> tuple[np.ndarray, np.ndarray]:
        ops, tensors = self.graph.num_ops, self.graph.num_tensors
        unscheduled = self.unscheduled
        for step in range(unscheduled.shape[1]):
            rows = np.flatnonzero(unscheduled.any(axis=1))
            if not rows.size:
                break
            score = np.where((self.pending[rows] == 0) & unscheduled[rows], self.priority[rows], -np.inf)
            chosen = score.argmax(axis=1)
            unscheduled[rows, chosen] = False
            self.position[rows, chosen] = step
            is_op = chosen < ops
            if is_op.any():
                self._run_ops(rows[is_op], chosen[is_op])
            if not is_op.all():
                slot = chosen[~is_op] - ops
                self._transfer(rows[~is_op], slot % tensors, slot // tensors)
        return self.free.max(axis=1), self.peak.max(axis=1)

    def _run_ops(self, rows: np.ndarray, op: np.ndarray) -> None:
        graph = self.graph
        device = self.place[rows, op]
        reads, writes = graph.uses[op], graph.produces[op]  # (R, tensors)
        present = self.present[rows, device]
        arrived = np.where(reads, present, 0.0).max(axis=1, initial=0.0)
        finish = np.maximum(self.free[rows, device], arrived) + graph.runtimes[op]
        self.free[rows, device] = finish
        self.present[rows, device] = np.where(writes, finish[:, None], present)
        memory = self.memory[rows, device] + writes @ graph.sizes
        self.peak[rows, device] = np.maximum(self.peak[rows, device], memory)
        remaining = self.remaining[rows, device] - reads
        self.remaining[rows, device] = remaining
        self.memory[rows, device] = memory - ((reads | writes) & (remaining == 0)) @ graph.sizes
        # the outputs release their transfers, and their readers on this device (remote ones read a copy)
        self.pending[rows, graph.num_ops:] -= (writes[:, None, :] & self.active[rows]).reshape(rows.size, -1)
        local = self.place[rows] == device[:, None]  # (R, ops)
        self.pending[rows, :graph.num_ops] -= self.reads_from[op] * local

    def _transfer(self, rows: np.ndarray, tensor: np.ndarray, device: np.ndarray) -> None:
        graph = self.graph
        consumers = graph.uses[:, tensor].T & (self.place[rows] == device[:, None])  # (R, ops)
        self.pending[rows, :graph.num_ops] -= consumers
        source, size = self.source[rows, tensor], graph.sizes[tensor]
        when = np.maximum(np.maximum(self.free[rows, source], self.free[rows, device]),
                          self.present[rows, source, tensor])
        self.free[rows, source] = when
        self.free[rows, device] = when
        self.present[rows, device, tensor] = when
        self.memory[rows, device] += size
        self.peak[rows, device] = np.maximum(self.peak[rows, device], self.memory[rows, device])
        self.remaining[rows, source, tensor] -= 1
        self.memory[rows, source] -= np.where(self.remaining[rows, source, tensor] == 0, size, 0.0)
