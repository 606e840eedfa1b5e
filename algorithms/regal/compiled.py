"""The performance model's decoder (`perfmodel`) compiled with numba: one chromosome at a time, the ready
nodes in a binary heap, the graph as compressed sparse rows.

It decodes exactly as the NumPy decoder (`perfmodel._Simulation`, the oracle) does, node for node:

- the same placement (the first device of largest affinity) and the same transfers;
- the same topological order: the heap pops the ready node of highest priority, the lower node number
  first among equal priorities, which is what NumPy's ``argmax`` over all ready nodes takes;
- the same simulation, in the same floating-point operations for times (``max`` and one addition per op),
  so makespans are equal bit for bit;
- memory as the same sums, an op's new outputs and its freed tensors each summed in tensor order and then
  added to (subtracted from) the device's total. NumPy sums them as a matrix product, whose summation
  order is BLAS's: where an op writes or frees several tensors at once the two peaks may differ in the
  last bits (they are equal wherever every op makes one tensor, as in the synthetic graphs).

The decoder costs O((ops + transfers) log(ops + transfers) + edges) per chromosome, where the NumPy one
costs O(ops + transfers) per step for the whole population in lockstep.
"""

from __future__ import annotations

import numba
import numpy as np

from algorithms.regal.graph import CompGraph


def evaluate(graph: CompGraph, chromosomes: np.ndarray, devices: int) -> tuple[np.ndarray, np.ndarray]:
    """``(runtime, peak_memory)`` of each chromosome (P, n), float64 in [0, 1]."""
    rows = graph.sparse_rows
    population = chromosomes.shape[0]
    runtime, peak = np.empty(population), np.empty(population)
    _decode(np.ascontiguousarray(chromosomes, np.float64), graph.runtimes, graph.sizes, graph.producer,
            rows.read_start, rows.reads, rows.write_start, rows.writes, rows.reader_start, rows.readers,
            devices, runtime, peak)
    return runtime, peak


@numba.njit(cache=True, nogil=True)
def _before(priority, a, b):
    """Whether node a leaves the heap before node b."""
    return priority[a] > priority[b] or (priority[a] == priority[b] and a < b)


@numba.njit(cache=True, nogil=True)
def _push(heap, size, node, priority):
    heap[size] = node
    child = size
    while child > 0:
        parent = (child - 1) // 2
        if not _before(priority, heap[child], heap[parent]):
            break
        heap[child], heap[parent] = heap[parent], heap[child]
        child = parent
    return size + 1


@numba.njit(cache=True, nogil=True)
def _pop(heap, size, priority):
    top = heap[0]
    size -= 1
    heap[0] = heap[size]
    parent = 0
    while True:
        left, best = 2 * parent + 1, parent
        if left < size and _before(priority, heap[left], heap[best]):
            best = left
        if left + 1 < size and _before(priority, heap[left + 1], heap[best]):
            best = left + 1
        if best == parent:
            return top, size
        heap[parent], heap[best] = heap[best], heap[parent]
        parent = best


@numba.njit(cache=True, nogil=True)
def _decode(chromosomes, runtimes, sizes, producer, read_start, reads, write_start, writes, reader_start, readers,
            devices, out_runtime, out_peak):
    ops, tensors = runtimes.size, sizes.size
    nodes = ops + tensors * devices
    place = np.empty(ops, np.int64)
    source = np.empty(tensors, np.int64)
    local_readers = np.empty((devices, tensors), np.int64)
    active = np.empty((devices, tensors), np.bool_)
    remaining = np.empty((devices, tensors), np.int64)
    present = np.empty((devices, tensors))
    priority = np.empty(nodes)
    pending = np.empty(nodes, np.int64)
    heap = np.empty(nodes, np.int64)
    free, memory, peak = np.empty(devices), np.empty(devices), np.empty(devices)
    for p in range(chromosomes.shape[0]):
        genes = chromosomes[p]
        for v in range(ops):
            best = 0
            for j in range(1, devices):
                if genes[v * devices + j] > genes[v * devices + best]:
                    best = j
            place[v] = best
        local_readers[:, :] = 0
        for v in range(ops):
            for r in range(read_start[v], read_start[v + 1]):
                local_readers[place[v], reads[r]] += 1
        for k in range(tensors):
            source[k] = place[producer[k]]
            outgoing = 0
            for j in range(devices):
                active[j, k] = local_readers[j, k] > 0 and source[k] != j
                outgoing += active[j, k]
            for j in range(devices):
                remaining[j, k] = local_readers[j, k] + (outgoing if source[k] == j else 0)
        for v in range(ops):
            priority[v] = genes[ops * devices + v]
            pending[v] = read_start[v + 1] - read_start[v]
        for j in range(devices):
            for k in range(tensors):
                priority[ops + j * tensors + k] = genes[ops * devices + ops + k * devices + j]
                pending[ops + j * tensors + k] = 1
        present[:, :] = 0.0
        free[:] = 0.0
        memory[:] = 0.0
        peak[:] = 0.0
        size = 0
        for v in range(ops):
            if pending[v] == 0:
                size = _push(heap, size, v, priority)
        while size > 0:
            node, size = _pop(heap, size, priority)
            if node < ops:
                device = place[node]
                arrived = 0.0
                for r in range(read_start[node], read_start[node + 1]):
                    arrived = max(arrived, present[device, reads[r]])
                finish = max(free[device], arrived) + runtimes[node]
                free[device] = finish
                made = 0.0
                for w in range(write_start[node], write_start[node + 1]):
                    present[device, writes[w]] = finish
                    made += sizes[writes[w]]
                total = memory[device] + made
                peak[device] = max(peak[device], total)
                for r in range(read_start[node], read_start[node + 1]):
                    remaining[device, reads[r]] -= 1
                # freed: read or written tensors with no local reader left, summed in tensor order
                freed = 0.0
                r, w = read_start[node], write_start[node]
                while r < read_start[node + 1] or w < write_start[node + 1]:
                    if w >= write_start[node + 1] or (r < read_start[node + 1] and reads[r] < writes[w]):
                        k = reads[r]
                        r += 1
                    else:
                        k = writes[w]
                        w += 1
                    if remaining[device, k] == 0:
                        freed += sizes[k]
                memory[device] = total - freed
                for w in range(write_start[node], write_start[node + 1]):
                    k = writes[w]
                    for j in range(devices):
                        if active[j, k]:
                            slot = ops + j * tensors + k
                            pending[slot] -= 1
                            if pending[slot] == 0:
                                size = _push(heap, size, slot, priority)
                    for c in range(reader_start[k], reader_start[k + 1]):
                        reader = readers[c]
                        if place[reader] == device:
                            pending[reader] -= 1
                            if pending[reader] == 0:
                                size = _push(heap, size, reader, priority)
            else:
                k, device = (node - ops) % tensors, (node - ops) // tensors
                for c in range(reader_start[k], reader_start[k + 1]):
                    reader = readers[c]
                    if place[reader] == device:
                        pending[reader] -= 1
                        if pending[reader] == 0:
                            size = _push(heap, size, reader, priority)
                origin = source[k]
                when = max(max(free[origin], free[device]), present[origin, k])
                free[origin] = when
                free[device] = when
                present[device, k] = when
                memory[device] += sizes[k]
                peak[device] = max(peak[device], memory[device])
                remaining[origin, k] -= 1
                if remaining[origin, k] == 0:
                    memory[origin] -= sizes[k]
        out_runtime[p] = free.max()
        out_peak[p] = peak.max()
