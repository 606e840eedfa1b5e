"""Roofline cost model standing in for the paper's per-instruction latency measurements (Appendix A).

The paper measures every instruction on a TPUv4i for every subset of its (up to 8 largest) buffers placed
in fast memory, and derives benefits and supplies from those measurements. We have no TPU, so the
measurement L_I(S) is replaced by a roofline estimate:

    L_I(S) = overhead + max(flops / peak_flops,
                            sum over buffers b of I of bytes(b) / (fast_bw if b in S else slow_bw))

Choices where the paper is vague, all recorded here:
- Only the `max_varied_buffers` largest buffers of an instruction (ties broken by buffer index) get a slot
  in its latency table, exactly like the paper's measurement budget. The remaining buffers always count at
  slow bandwidth: their latency effect was never "measured", so their benefit is 0 and placing them in fast
  memory changes neither the reward nor the evaluated latency.
- Supply of I is L_I(B(I)) with B(I) the varied buffers (the only ones the table can express).
- Latencies, benefits and rewards are in microseconds (float). Supply and demand are integer picoseconds
  so that the supply accounting of the game is exact: supplies are rounded down and demands up, which can
  only make a copy harder, never let it slow down execution.
- demand(b) = size(b) / copy_bandwidth: a copy streams the buffer once through the HBM<->fast DMA path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

PICOSECONDS_PER_MICROSECOND = 1_000_000


@dataclass(frozen=True)
class HardwareSpec:
    """Constants of a TPUv4i-like chip (fast memory = CMEM, slow memory = HBM)."""

    peak_flops: float = 138e12
    """bf16 peak of a TPUv4i (published)."""
    slow_bandwidth: float = 614e9
    """HBM bandwidth in bytes/s (published TPUv4i figure)."""
    fast_bandwidth: float = 4 * 614e9
    """CMEM bandwidth in bytes/s. Not published; we assume 4x HBM, the order of on-chip SRAM vs HBM."""
    copy_bandwidth: float = 614e9
    """HBM<->CMEM DMA bandwidth in bytes/s: every copy touches HBM, so HBM bandwidth bounds it."""
    overhead_seconds: float = 0.5e-6
    """Fixed per-instruction cost (issue, synchronisation) that no memory placement can remove."""
    max_varied_buffers: int = 8
    """How many of an instruction's largest buffers get a latency-table slot (the paper's 8)."""


def slot_order(buffer_sizes: list[int], limit: int) -> list[int]:
    """Positions (into `buffer_sizes`) of the buffers that get a table slot: the `limit` largest, ties by position."""
    ranked = sorted(range(len(buffer_sizes)), key=lambda position: (-buffer_sizes[position], position))
    return sorted(ranked[:limit])


def latency_table(flops: float, varied_bytes: list[int], fixed_slow_bytes: int, hardware: HardwareSpec) -> np.ndarray:
    """L_I(S) in microseconds for every subset S of the varied buffers, indexed by bitmask (bit k = slot k fast)."""
    slot_count = len(varied_bytes)
    masks = np.arange(1 << slot_count)
    in_fast = (masks[:, None] >> np.arange(slot_count)[None, :]) & 1
    sizes = np.asarray(varied_bytes, dtype=np.float64)
    memory_seconds = (
        fixed_slow_bytes / hardware.slow_bandwidth
        + in_fast @ (sizes / hardware.fast_bandwidth)
        + (1 - in_fast) @ (sizes / hardware.slow_bandwidth)
    )
    compute_seconds = flops / hardware.peak_flops
    seconds = hardware.overhead_seconds + np.maximum(compute_seconds, memory_seconds)
    return seconds * 1e6


def demand_picoseconds(size_bytes: int, hardware: HardwareSpec) -> int:
    """Copy demand of a buffer: time to move it between memories, rounded up."""
    return math.ceil(size_bytes / hardware.copy_bandwidth * 1e12)


def supply_picoseconds(table: np.ndarray) -> int:
    """Supply of an instruction: its latency with all varied buffers in fast memory, rounded down."""
    return math.floor(float(table[-1]) * PICOSECONDS_PER_MICROSECOND)


def program_latency(latency_tables: tuple, instruction_of_buffer: tuple, slot_of_buffer: tuple, in_fast_memory) -> float:
    """Total latency (microseconds) of a finished mapping: sum over instructions of L_I(its buffers in fast memory).

    `in_fast_memory[b]` says whether buffer b was placed in fast memory. This is the evaluator used for
    speedups; it reads only the mapping, never the game's rewards.
    """
    masks = [0] * len(latency_tables)
    for buffer, fast in enumerate(in_fast_memory):
        slot = slot_of_buffer[buffer]
        if fast and slot >= 0:
            masks[instruction_of_buffer[buffer]] |= 1 << slot
    return float(sum(table[mask] for table, mask in zip(latency_tables, masks)))
