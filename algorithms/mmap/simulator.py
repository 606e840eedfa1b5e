"""Event-level latency simulation of a mapped program, apart from the game's reward model.

The reward (Eq. 4-6) assumes that a copy whose interval has enough *supply* (the fast-memory latency of the
instructions it spans) is hidden, and it charges no copy any time of its own. The simulator instead runs
the program on a timeline:

- Instructions run one after another in program order. Instruction t takes `L_t(S_t)`, its latency table
  entry for the set S_t of its buffers placed in fast memory (the roofline of `costmodel.py`).
- Copies run on `engines` DMA engines, first come first served, each copy moving its bytes at
  `bandwidth`. A copy's first byte moves no earlier than `latency` after its issue (descriptor issue and
  the memory round trip, which the reward model does not know about); the latency overlaps with other
  copies' transfers, the bytes do not.
- A prefetch (Copy of an input, allocation [s, t]) is issued when instruction s - 1 ends (the moment its
  allocation begins; at program start for s = 0) and instruction t cannot start before it is done.
- An eviction (Copy of an output, allocation [t, e]) is issued when instruction t ends (the output exists),
  and instruction e + 1 cannot start before it is done (its space is handed on); the program ends when
  the last instruction and every eviction are done.
- A late copy stalls the instruction that needs it; the stall is the simulated cost of a copy the supply
  accounting thought hidden (or of too many copies queued on one engine).

So with unlimited bandwidth and no latency, the simulated latency is exactly the reward model's
`program_latency`; with finite bandwidth it can only be larger. An infeasible game is the all-slow program.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from algorithms.mmap.check import copy_interval
from algorithms.mmap.problem import Problem


@dataclass(frozen=True)
class Transfer:
    """One DMA copy: issued when instruction `issue_after` ends (-1: at program start); instruction
    `needed_by` cannot start before it is done (`needed_by` = number of instructions: the program's end)."""

    size: int
    issue_after: int
    needed_by: int


@dataclass(frozen=True)
class DmaSpec:
    bandwidth: float = 614e9
    """Bytes per second of one DMA engine (the cost model's copy bandwidth by default)."""
    latency_seconds: float = 0.5e-6
    """From a copy's issue to its first byte (the engine is free for others meanwhile); about one
    instruction's fixed overhead in the cost model. Unknown to the reward model."""
    engines: int = 1


@dataclass(frozen=True)
class Timeline:
    latency_us: float
    compute_us: float
    stall_us: float
    copies: int
    copy_busy_us: float
    starts_us: np.ndarray
    ends_us: np.ndarray


def simulate(durations_us, transfers: list[Transfer], dma: DmaSpec = DmaSpec()) -> Timeline:
    """Run instructions of the given durations (microseconds) and the DMA transfers on one timeline."""
    count = len(durations_us)
    seconds_per_byte_us = 1e6 / dma.bandwidth
    latency_us = dma.latency_seconds * 1e6
    issued_after = [[] for _ in range(count + 1)]  # index k + 1: issued when instruction k ends
    for order, transfer in enumerate(transfers):
        if not -1 <= transfer.issue_after < transfer.needed_by <= count:
            raise ValueError(f"transfer {order}: issued after {transfer.issue_after}, needed by {transfer.needed_by}")
        issued_after[transfer.issue_after + 1].append(order)
    engines = [0.0] * max(dma.engines, 1)  # heap of the times the engines become free
    ready_by = [0.0] * (count + 1)  # latest completion among the copies each instruction waits for
    starts, ends = np.zeros(count), np.zeros(count)
    clock, busy = 0.0, 0.0
    for step in range(count + 1):
        for order in issued_after[step]:  # FIFO: issue order, then transfer order
            transfer = transfers[order]
            start = max(clock + latency_us, heapq.heappop(engines))
            duration = transfer.size * seconds_per_byte_us
            heapq.heappush(engines, start + duration)
            busy += duration
            ready_by[transfer.needed_by] = max(ready_by[transfer.needed_by], start + duration)
        if step == count:
            break
        starts[step] = max(clock, ready_by[step])
        clock = ends[step] = starts[step] + float(durations_us[step])
    latency = max(clock, ready_by[count])
    compute = float(np.sum(durations_us))
    return Timeline(latency, compute, latency - compute, len(transfers), busy, starts, ends)


def mapping_transfers(problem: Problem, records: list[dict]) -> list[Transfer]:
    """The copies of a mapping: one prefetch per input Copy, one eviction per output Copy."""
    transfers = []
    for record in records:
        if record["action"] != "copy" or record["offset"] is None:
            continue
        interval = copy_interval(record)
        if record["is_output"]:
            transfers.append(Transfer(record["size"], record["target_time"], record["end"] + 1))
        else:
            first = record["start"] if interval is not None else record["target_time"]
            transfers.append(Transfer(record["size"], first - 1, record["target_time"]))
    return transfers


def instruction_durations(problem: Problem, records: list[dict]) -> np.ndarray:
    """L_t(S_t) in microseconds for every instruction, S_t from the mapping's fast-memory placements."""
    masks = [0] * problem.num_instructions
    for record in records:
        slot = problem.slot[record["index"]]
        if record["offset"] is not None and slot >= 0:
            masks[problem.target[record["index"]]] |= 1 << slot
    return np.array([table[mask] for table, mask in zip(problem.latency_tables, masks)])


def simulate_mapping(problem: Problem, records: list[dict] | None, dma: DmaSpec = DmaSpec()) -> Timeline:
    """The simulated timeline of a finished mapping; `records=None` (an infeasible game) is all-slow."""
    if records is None:
        return simulate(np.array([table[0] for table in problem.latency_tables]), [], dma)
    return simulate(instruction_durations(problem, records), mapping_transfers(problem, records), dma)
