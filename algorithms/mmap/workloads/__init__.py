"""MMapGame workloads taken from XLA's optimized, scheduled HLO of real JAX programs.

`load_workload(name)` reads the committed `data/NAME.json` (or `data/NAME.json.gz` for the large ones; no
jax needed); `generate.py` rewrites those files from `programs.py` and `suite.py` through `hlo.py`, and
stores XLA's own dumps of each program in `data/xla/` (see `xla_dump.py`). The JSON schema:

    {"name", "description", "jax_version", "num_instructions",
     "instructions": [{"time", "name", "opcode", "flops", "operands": [tensor_id], "outputs": [tensor_id]}],
     "buffers": [{"index", "tensor_id", "alias_id" (int or null), "size" (bytes), "is_output",
                  "target_time", "live_range": [first, last]}]}

Buffers are in chronological order: by `target_time`, then an instruction's operands (operand order) before
its outputs. `check` states every invariant a workload keeps.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import numpy as np

from timerl.errors import FileFormatError
from timerl.files import read_json

DATA_DIR = Path(__file__).parent / "data"


@dataclasses.dataclass(frozen=True)
class Instruction:
    time: int
    name: str
    opcode: str
    flops: float
    operands: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Buffer:
    index: int
    tensor_id: int
    alias_id: int | None
    size: int
    is_output: bool
    target_time: int
    live_range: tuple[int, int]


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array


@dataclasses.dataclass(frozen=True)
class Workload:
    """One MMapGame instance. The arrays hold the buffer fields column by column (alias_id -1 = none)."""

    name: str
    description: str
    jax_version: str
    num_instructions: int
    instructions: tuple[Instruction, ...]
    buffers: tuple[Buffer, ...]
    size: np.ndarray = dataclasses.field(init=False, repr=False)
    tensor_id: np.ndarray = dataclasses.field(init=False, repr=False)
    alias_id: np.ndarray = dataclasses.field(init=False, repr=False)
    is_output: np.ndarray = dataclasses.field(init=False, repr=False)
    target_time: np.ndarray = dataclasses.field(init=False, repr=False)
    live_range: np.ndarray = dataclasses.field(init=False, repr=False)  # shape (num_buffers, 2)
    flops: np.ndarray = dataclasses.field(init=False, repr=False)  # per instruction

    def __post_init__(self) -> None:
        columns = {
            "size": np.array([b.size for b in self.buffers], np.int64),
            "tensor_id": np.array([b.tensor_id for b in self.buffers], np.int64),
            "alias_id": np.array([-1 if b.alias_id is None else b.alias_id for b in self.buffers], np.int64),
            "is_output": np.array([b.is_output for b in self.buffers], bool),
            "target_time": np.array([b.target_time for b in self.buffers], np.int64),
            "live_range": np.array([b.live_range for b in self.buffers], np.int64).reshape(-1, 2),
            "flops": np.array([i.flops for i in self.instructions], np.float64),
        }
        for field, array in columns.items():
            object.__setattr__(self, field, _frozen(array))

    @property
    def num_buffers(self) -> int:
        return len(self.buffers)

    @property
    def num_tensors(self) -> int:
        return int(self.tensor_id.max()) + 1 if self.buffers else 0

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> "Workload":
        instructions = tuple(
            Instruction(i["time"], i["name"], i["opcode"], float(i["flops"]), tuple(i["operands"]),
                        tuple(i["outputs"]))
            for i in record["instructions"])
        buffers = tuple(
            Buffer(b["index"], b["tensor_id"], b["alias_id"], b["size"], b["is_output"], b["target_time"],
                   tuple(b["live_range"]))
            for b in record["buffers"])
        return cls(record["name"], record["description"], record["jax_version"], record["num_instructions"],
                   instructions, buffers)


def workload_path(name: str) -> Path:
    """The committed file of a workload: plain JSON, or gzipped JSON for the large ones."""
    plain = DATA_DIR / f"{name}.json"
    return plain if plain.exists() else DATA_DIR / f"{name}.json.gz"


def list_workloads() -> list[str]:
    return sorted({path.name.split(".")[0] for pattern in ("*.json", "*.json.gz") for path in DATA_DIR.glob(pattern)})


@functools.lru_cache(maxsize=None)
def load_workload(name: str) -> Workload:
    names = list_workloads()
    if name not in names:
        raise ValueError(f"unknown workload {name!r}; valid names: {', '.join(names)}")
    return read_workload(workload_path(name))


def read_workload(path: str | Path) -> Workload:
    """A workload file of the schema above (gzipped when its name ends in ``.gz``); a file that is not one is
    a `FileFormatError` naming it and what is wrong, then `check` states the first broken invariant."""
    record = read_json(path, "workload file")
    try:
        if not isinstance(record, dict):
            raise TypeError(f"a workload is a JSON object, got {type(record).__name__}")
        workload = Workload.from_json(record)
    except (KeyError, TypeError, ValueError, IndexError) as error:
        raise FileFormatError(f"{path}: not a workload of the schema in algorithms/mmap/workloads: "
                              f"{type(error).__name__}: {error}") from error
    try:
        check(workload)
    except (ValueError, IndexError, KeyError) as error:
        raise FileFormatError(f"{path}: {error}") from error
    return workload


def check(workload: Workload) -> None:
    """Raise ValueError naming the first broken invariant."""

    def require(condition: bool, message: str) -> None:
        if not condition:
            raise ValueError(f"workload {workload.name}: {message}")

    last_time = workload.num_instructions - 1
    require(len(workload.instructions) == workload.num_instructions, "num_instructions disagrees")
    require(all(i.time == t for t, i in enumerate(workload.instructions)), "instruction times are not 0..n-1")
    expected = []
    for inst in workload.instructions:
        expected += [(inst.time, tensor, False) for tensor in inst.operands]
        expected += [(inst.time, tensor, True) for tensor in inst.outputs]
    actual = [(b.target_time, b.tensor_id, b.is_output) for b in workload.buffers]
    require(actual == expected, "buffers are not the instructions' operands then outputs, in time order")
    tensors: dict[int, Buffer] = {}
    defined: set[int] = set()
    for number, buffer in enumerate(workload.buffers):
        start, end = buffer.live_range
        where = f"buffer {number}"
        require(buffer.index == number, f"{where}: index is {buffer.index}")
        require(buffer.size > 0, f"{where}: size {buffer.size}")
        require(0 <= start <= buffer.target_time <= end <= last_time,
                f"{where}: target_time {buffer.target_time} outside live_range {buffer.live_range}")
        first = tensors.setdefault(buffer.tensor_id, buffer)
        require((first.size, first.alias_id, first.live_range) == (buffer.size, buffer.alias_id, buffer.live_range),
                f"{where}: tensor {buffer.tensor_id} has inconsistent size, alias_id or live_range")
        if buffer.is_output:
            require(buffer.tensor_id not in defined, f"{where}: tensor {buffer.tensor_id} defined twice")
            require(start == buffer.target_time, f"{where}: an output's live_range must start at its definition")
            defined.add(buffer.tensor_id)
    require(sorted(tensors) == list(range(len(tensors))), "tensor ids are not 0..k-1")
    groups: dict[int, list[Buffer]] = {}
    for first in tensors.values():
        if first.alias_id is not None:
            groups.setdefault(first.alias_id, []).append(first)
    require(sorted(groups) == list(range(len(groups))), "alias ids are not 0..k-1")
    for alias_id, members in groups.items():
        require(len(members) > 1, f"alias group {alias_id} has a single tensor (should be null)")
        require(len({m.size for m in members}) == 1, f"alias group {alias_id} mixes sizes")
        ranges = sorted(m.live_range for m in members)
        require(all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:])),
                f"alias group {alias_id}: live ranges of its tensors overlap {ranges}")
