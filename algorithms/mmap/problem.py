"""The immutable, preprocessed form of an instance that the game plays on.

Building a Problem validates the instance, runs the cost model once (latency tables, benefits, supplies,
demands) and fixes the fast memory. Everything per buffer is a tuple so that the game's hot loop reads
plain Python scalars.

Choices where the paper is vague:
- Fast memory size: the paper uses the real CMEM size (128 MiB) against production programs. Our workloads
  are much smaller, so the size is `fast_memory_fraction` (default 1/4) of the program's peak live bytes
  (max over logical time of the summed sizes of the live tensors; a tensor's live range is the union of its
  buffers' live ranges and its size the largest of its buffers). That keeps memory contended on every
  workload, which is the regime the game is about.
- Offsets are quantised to an allocation granularity: the smallest power of two >= 64 bytes that splits
  fast memory into at most `max_columns` columns. A buffer occupies ceil(size / granularity) columns;
  fast memory is rounded down to a whole number of columns. Offsets reported in bytes are multiples of the
  granularity. A zero-size buffer occupies no columns.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from algorithms.mmap.costmodel import (
    HardwareSpec,
    demand_picoseconds,
    latency_table,
    slot_order,
    supply_picoseconds,
)
from algorithms.mmap.instance import Instance, as_instance

DEFAULT_FAST_MEMORY_FRACTION = 0.25
DEFAULT_MAX_COLUMNS = 1024
MIN_GRANULARITY_BYTES = 64


class InstanceError(ValueError):
    """The instance breaks the workload schema; the message names the offending buffer or instruction."""


@dataclass(frozen=True, eq=False)
class Problem:
    """Compared by identity: it holds numpy arrays, and two builds of one instance are equal in content only."""

    name: str
    hardware: HardwareSpec
    num_instructions: int
    num_buffers: int
    fast_memory_bytes: int
    granularity: int
    num_columns: int
    peak_live_bytes: int
    # Per buffer, indexed by the buffer's position in the game.
    tensor_id: tuple
    alias_id: tuple
    size: tuple
    columns: tuple
    is_output: tuple
    target: tuple
    live_start: tuple
    live_end: tuple
    tensor: tuple
    """Dense tensor index (0..num_tensors-1)."""
    alias_group: tuple
    """Dense alias-group index, -1 when the buffer has no alias id."""
    slot: tuple
    """Bit of the buffer in its instruction's latency table, -1 when it has none."""
    demand: tuple
    """Copy demand in picoseconds."""
    initial_benefit: tuple
    """L_I({}) - L_I({b}) in microseconds."""
    # Per instruction (indexed by logical time).
    latency_tables: tuple
    """numpy arrays, L_I(S) in microseconds indexed by bitmask."""
    latency_lists: tuple
    """The same tables as Python lists, for the game's hot loop."""
    supply: np.ndarray
    """Initial supply per logical time in picoseconds (int64); never mutated."""
    # Per alias group.
    group_last_buffer: tuple
    num_tensors: int

    @property
    def latency_all_slow(self) -> float:
        return float(sum(table[0] for table in self.latency_tables))

    @property
    def latency_all_fast(self) -> float:
        return float(sum(table[-1] for table in self.latency_tables))


def build_problem(
    source,
    hardware: HardwareSpec = HardwareSpec(),
    fast_memory_fraction: float = DEFAULT_FAST_MEMORY_FRACTION,
    fast_memory_bytes: int | None = None,
    max_columns: int = DEFAULT_MAX_COLUMNS,
    granularity: int | None = None,
) -> Problem:
    """Preprocess an instance (anything `as_instance` accepts). `fast_memory_bytes` overrides the fraction."""
    instance = as_instance(source)
    _validate(instance)
    buffers = instance.buffers
    num_instructions = len(instance.instructions)

    peak = peak_live_bytes(instance)
    if fast_memory_bytes is None:
        fast_memory_bytes = int(peak * fast_memory_fraction)
    if granularity is None:
        granularity = _granularity(fast_memory_bytes, max_columns)
    num_columns = fast_memory_bytes // granularity

    tensor_index = {tid: i for i, tid in enumerate(dict.fromkeys(b["tensor_id"] for b in buffers))}
    alias_ids = [b["alias_id"] for b in buffers if b["alias_id"] is not None]
    group_index = {aid: i for i, aid in enumerate(dict.fromkeys(alias_ids))}
    group_last_buffer = [0] * len(group_index)
    for position, b in enumerate(buffers):
        if b["alias_id"] is not None:
            group_last_buffer[group_index[b["alias_id"]]] = position

    buffers_of_time = [[] for _ in range(num_instructions)]
    for position, b in enumerate(buffers):
        buffers_of_time[b["target_time"]].append(position)

    slot = [-1] * len(buffers)
    initial_benefit = [0.0] * len(buffers)
    tables = []
    for time, members in enumerate(buffers_of_time):
        sizes = [buffers[p]["size"] for p in members]
        varied = slot_order(sizes, hardware.max_varied_buffers)
        fixed_bytes = sum(sizes) - sum(sizes[v] for v in varied)
        table = latency_table(instance.instructions[time]["flops"], [sizes[v] for v in varied], fixed_bytes, hardware)
        tables.append(table)
        for bit, v in enumerate(varied):
            slot[members[v]] = bit
            initial_benefit[members[v]] = float(table[0] - table[1 << bit])

    return Problem(
        name=instance.name,
        hardware=hardware,
        num_instructions=num_instructions,
        num_buffers=len(buffers),
        fast_memory_bytes=num_columns * granularity,
        granularity=granularity,
        num_columns=num_columns,
        peak_live_bytes=peak,
        tensor_id=tuple(b["tensor_id"] for b in buffers),
        alias_id=tuple(b["alias_id"] for b in buffers),
        size=tuple(b["size"] for b in buffers),
        columns=tuple(-(-b["size"] // granularity) for b in buffers),
        is_output=tuple(bool(b["is_output"]) for b in buffers),
        target=tuple(b["target_time"] for b in buffers),
        live_start=tuple(b["live_range"][0] for b in buffers),
        live_end=tuple(b["live_range"][1] for b in buffers),
        tensor=tuple(tensor_index[b["tensor_id"]] for b in buffers),
        alias_group=tuple(-1 if b["alias_id"] is None else group_index[b["alias_id"]] for b in buffers),
        slot=tuple(slot),
        demand=tuple(demand_picoseconds(b["size"], hardware) for b in buffers),
        initial_benefit=tuple(initial_benefit),
        latency_tables=tuple(tables),
        latency_lists=tuple(tuple(table.tolist()) for table in tables),
        supply=np.array([supply_picoseconds(table) for table in tables], dtype=np.int64),
        group_last_buffer=tuple(group_last_buffer),
        num_tensors=len(tensor_index),
    )


def with_copy_setup(problem: Problem, seconds: float) -> Problem:
    """The same problem with every copy's demand raised by a DMA setup time of ``seconds`` (zero-size buffers keep
    an empty copy): a copy then needs a window whose supply covers the setup and the bytes, as a copy's *measured*
    time would (the paper's demands are measured copy times; `costmodel.demand_picoseconds` is the bytes alone).
    Benefits, supplies and latency tables are unchanged, so rewards stay the cost model's. A mapping valid here is
    valid in ``problem`` (its copies only have longer windows); `algorithms.mmap.simulator` charges this setup as
    `DmaSpec.latency_seconds`."""
    if seconds < 0:
        raise ValueError(f"a copy setup time cannot be negative, got {seconds}")
    setup = math.ceil(seconds * 1e12)
    return dataclasses.replace(problem, demand=tuple(d + setup if d > 0 else 0 for d in problem.demand))


def peak_live_bytes(instance: Instance) -> int:
    """Max over logical time of the bytes of all live tensors (a tensor counted once however many buffers it has)."""
    span: dict = {}
    for b in instance.buffers:
        start, end = b["live_range"]
        old = span.get(b["tensor_id"])
        span[b["tensor_id"]] = (start, end, b["size"]) if old is None else (
            min(old[0], start), max(old[1], end), max(old[2], b["size"]))
    change = np.zeros(len(instance.instructions) + 1, dtype=np.int64)
    for start, end, size in span.values():
        change[start] += size
        change[end + 1] -= size
    return int(np.cumsum(change).max()) if span else 0


def _granularity(fast_memory_bytes: int, max_columns: int) -> int:
    needed = max(MIN_GRANULARITY_BYTES, math.ceil(fast_memory_bytes / max_columns))
    return 1 << (needed - 1).bit_length()


def _validate(instance: Instance) -> None:
    for time, instruction in enumerate(instance.instructions):
        if instruction["time"] != time:
            raise InstanceError(f"instruction {instruction.get('name')!r} has time {instruction['time']}, expected {time}")
    last = len(instance.instructions) - 1
    previous_target = 0
    for position, b in enumerate(instance.buffers):
        where = f"buffer {position} (tensor {b.get('tensor_id')})"
        if b["index"] != position:
            raise InstanceError(f"{where} has index {b['index']}; buffers must be listed in index order")
        start, end = b["live_range"]
        if not 0 <= start <= b["target_time"] <= end <= last:
            raise InstanceError(f"{where}: target {b['target_time']} outside live range [{start}, {end}] or program")
        if b["target_time"] < previous_target:
            raise InstanceError(f"{where}: buffers are not in chronological order")
        if b["size"] < 0:
            raise InstanceError(f"{where}: negative size")
        previous_target = b["target_time"]
