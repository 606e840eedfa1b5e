"""Computation graphs for REGAL's performance model (paper §2.1): ops with fixed runtimes, tensors with
fixed sizes, each tensor produced by one op and read by zero or more ops.

Everything is held as dense NumPy arrays (ops x tensors incidence matrices): the graphs here have tens to
a few hundred ops, and dense rows let the decoder update a whole BRKGA population with one indexing step.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import numpy as np


class GraphError(ValueError):
    """A computation graph that is not a DAG or whose arrays disagree."""


@dataclasses.dataclass(frozen=True)
class SparseRows:
    """The incidence as compressed sparse rows, indices ascending in each row: op v reads
    ``reads[read_start[v]:read_start[v + 1]]`` and writes ``writes[write_start[v]:write_start[v + 1]]``;
    tensor k is read by ``readers[reader_start[k]:reader_start[k + 1]]``."""

    read_start: np.ndarray
    reads: np.ndarray
    write_start: np.ndarray
    writes: np.ndarray
    reader_start: np.ndarray
    readers: np.ndarray


@dataclasses.dataclass(frozen=True)
class CompGraph:
    """``runtimes[v]`` of op v; ``sizes[k]`` and ``producer[k]`` of tensor k; ``uses[v, k]``: op v reads k."""

    runtimes: np.ndarray
    sizes: np.ndarray
    producer: np.ndarray
    uses: np.ndarray
    name: str = ""
    topology: str = ""  # graphs with equal topology ids are variants of one topology (no split crosses them)
    memory_limit: float = np.inf  # bytes of each device's memory, for the runtime objective
    produces: np.ndarray = dataclasses.field(init=False, repr=False)  # (ops, tensors) bool
    order: np.ndarray = dataclasses.field(init=False, repr=False)  # one topological order of the ops

    def __post_init__(self) -> None:
        runtimes = np.asarray(self.runtimes, np.float64)
        sizes = np.asarray(self.sizes, np.float64)
        producer = np.asarray(self.producer, np.int64)
        uses = np.asarray(self.uses, bool)
        ops, tensors = runtimes.size, sizes.size
        if uses.shape != (ops, tensors) or producer.shape != (tensors,):
            raise GraphError(f"graph {self.name!r}: uses {uses.shape} and producer {producer.shape} do not fit "
                             f"{ops} ops and {tensors} tensors")
        if tensors and (producer.min() < 0 or producer.max() >= ops):
            raise GraphError(f"graph {self.name!r}: a tensor's producer is not an op")
        if (runtimes < 0).any() or (sizes < 0).any():
            raise GraphError(f"graph {self.name!r}: negative runtime or tensor size")
        produces = np.zeros((ops, tensors), bool)
        produces[producer, np.arange(tensors)] = True
        if (uses & produces).any():
            raise GraphError(f"graph {self.name!r}: an op reads its own output")
        for field, value in (("runtimes", runtimes), ("sizes", sizes), ("producer", producer), ("uses", uses),
                             ("produces", produces), ("order", _topological_order(uses, producer, self.name))):
            value.setflags(write=False)
            object.__setattr__(self, field, value)

    @functools.cached_property
    def sparse_rows(self) -> SparseRows:
        return SparseRows(*_rows(self.uses), *_rows(self.produces), *_rows(self.uses.T))

    @property
    def num_ops(self) -> int:
        return int(self.runtimes.size)

    @property
    def num_tensors(self) -> int:
        return int(self.sizes.size)

    def edges(self) -> np.ndarray:
        """The multigraph's edges ``(source op, target op, tensor)``, one per (tensor, consumer) pair."""
        consumer, tensor = np.nonzero(self.uses)
        return np.stack([self.producer[tensor], consumer, tensor], axis=1)

    def op_adjacency(self) -> np.ndarray:
        """``(ops, ops)`` counts of edges u -> v (a multigraph: one per tensor v reads from u)."""
        adjacency = np.zeros((self.num_ops, self.num_ops))
        edges = self.edges()
        np.add.at(adjacency, (edges[:, 0], edges[:, 1]), 1.0)
        return adjacency


def from_edges(runtimes: Sequence[float], edges: Sequence[tuple[int, int]], sizes: Sequence[float],
               name: str = "", topology: str = "", memory_limit: float = np.inf) -> CompGraph:
    """One output tensor per op (``sizes[v]`` is op v's output); ``edges`` are ``(u, v)``: v reads u's output."""
    ops = len(runtimes)
    uses = np.zeros((ops, ops), bool)
    for u, v in edges:
        uses[v, u] = True
    return CompGraph(np.asarray(runtimes), np.asarray(sizes), np.arange(ops), uses, name, topology, memory_limit)


def _rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, columns): the nonzero columns of row i are ``columns[start[i]:start[i + 1]]``, ascending."""
    row, column = np.nonzero(matrix)
    start = np.zeros(matrix.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(row, minlength=matrix.shape[0]), out=start[1:])
    return start, column.astype(np.int64)


def _topological_order(uses: np.ndarray, producer: np.ndarray, name: str) -> np.ndarray:
    ops = uses.shape[0]
    depends = np.zeros((ops, ops), bool)  # depends[v, u]: v reads an output of u
    consumer, tensor = np.nonzero(uses)
    depends[consumer, producer[tensor]] = True
    pending = depends.sum(axis=1)
    order, ready = [], list(np.flatnonzero(pending == 0))
    while ready:
        u = ready.pop()
        order.append(u)
        for v in np.flatnonzero(depends[:, u]):
            pending[v] -= 1
            if pending[v] == 0:
                ready.append(v)
    if len(order) != ops:
        raise GraphError(f"graph {name!r} has a cycle")
    return np.asarray(order, np.int64)
