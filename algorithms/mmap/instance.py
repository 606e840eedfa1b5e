"""A memory-mapping instance in the workload JSON schema, and the one adapter that finds instances by name.

Schema (fixed, shared with `algorithms/mmap/workloads`):
    instructions: [{"time", "name", "opcode", "flops", "operands": [tensor_id], "outputs": [tensor_id]}]
    buffers:      [{"index", "tensor_id", "alias_id" (int|None), "size" (bytes), "is_output",
                    "target_time", "live_range": [start, end] (inclusive logical times)}]
Buffers are listed chronologically; the game visits them in that order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

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
        return Instance(source.get("name", "unnamed"), tuple(source["instructions"]), tuple(source["buffers"]))
    if hasattr(source, "instructions") and hasattr(source, "buffers"):
        return Instance(getattr(source, "name", "unnamed"), tuple(source.instructions), tuple(source.buffers))
    raise TypeError(f"cannot read a memory-mapping instance from {type(source).__name__}")


def available_workload_names() -> list[str]:
    """Names of the parsed XLA workloads, through the workloads package when it exists, else its JSON files."""
    try:
        from algorithms.mmap.workloads import list_workloads
    except ImportError:
        return sorted(path.stem for path in WORKLOAD_DATA_DIR.glob("*.json"))
    return list(list_workloads())


def load_named_instance(name: str) -> Instance:
    try:
        from algorithms.mmap.workloads import load_workload
    except ImportError:
        path = WORKLOAD_DATA_DIR / f"{name}.json"
        if not path.exists():
            raise KeyError(f"no workload named {name!r} in {WORKLOAD_DATA_DIR}") from None
        return as_instance(json.loads(path.read_text()))
    return as_instance(load_workload(name))
