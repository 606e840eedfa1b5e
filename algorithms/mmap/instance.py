"""A memory-mapping instance in the workload JSON schema, and the one adapter that finds instances by name.

Schema (fixed, shared with `algorithms/mmap/workloads`):
    instructions: [{"time", "name", "opcode", "flops", "operands": [tensor_id], "outputs": [tensor_id]}]
    buffers:      [{"index", "tensor_id", "alias_id" (int|None), "size" (bytes), "is_output",
                    "target_time", "live_range": [start, end] (inclusive logical times)}]
Buffers are listed chronologically; the game visits them in that order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from timerl.files import read_json

WORKLOAD_DATA_DIR = Path(__file__).parent / "workloads" / "data"


@dataclass(frozen=True)
class Instance:
    name: str
    instructions: tuple
    buffers: tuple


def as_instance(source) -> Instance:
    """Accept a workload name, a workload object (.name/.instructions/.buffers) or a schema dict."""
    if isinstance(source, Instance):
        return source
    if isinstance(source, str):
        return load_named_instance(source)
    if isinstance(source, dict):
        name, instructions, buffers = source.get("name", "unnamed"), source["instructions"], source["buffers"]
    elif hasattr(source, "instructions") and hasattr(source, "buffers"):
        name, instructions, buffers = getattr(source, "name", "unnamed"), source.instructions, source.buffers
    else:
        raise TypeError(f"cannot read a memory-mapping instance from {type(source).__name__}")
    return Instance(name, tuple(_record(i, INSTRUCTION_FIELDS) for i in instructions),
                    tuple(_record(b, BUFFER_FIELDS) for b in buffers))


INSTRUCTION_FIELDS = ("time", "name", "opcode", "flops", "operands", "outputs")
BUFFER_FIELDS = ("index", "tensor_id", "alias_id", "size", "is_output", "target_time", "live_range")


def _record(item, fields) -> dict:
    """A schema dict from a dict or from a record object with those attributes (the workloads' dataclasses)."""
    if isinstance(item, dict):
        return item
    return {field: getattr(item, field) for field in fields}


def available_workload_names() -> list[str]:
    """Names of the parsed XLA workloads, through the workloads package when it exists, else its JSON files."""
    try:
        from algorithms.mmap.workloads import list_workloads
    except ImportError:
        return sorted(path.stem for path in WORKLOAD_DATA_DIR.glob("*.json"))
    return list(list_workloads())


def load_named_instance(name: str) -> Instance:
    """A parsed workload by name; `synthetic_SEED_INSTRUCTIONS` names a generated program instead."""
    if name.startswith("synthetic_"):
        from algorithms.mmap.synthetic import synthetic_instance

        seed, instructions = (int(part) for part in name.split("_")[1:3])
        return as_instance(synthetic_instance(seed, instructions))
    try:
        from algorithms.mmap.workloads import load_workload
    except ImportError:
        path = WORKLOAD_DATA_DIR / f"{name}.json"
        if not path.exists():
            raise KeyError(f"no workload named {name!r} in {WORKLOAD_DATA_DIR}") from None
        return as_instance(read_json(path, "workload file"))
    return as_instance(load_workload(name))
