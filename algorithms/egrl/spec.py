"""The chip's constants as a data file a user can edit: ``algorithms/egrl/chips/nnpi.json`` is the default.

Fields (all required, bytes and seconds):
- ``capacity_bytes``, ``bandwidth_bytes_per_second``: one number per level, keyed ``DRAM``, ``LLC``, ``SRAM``;
- ``compute_ops_per_second``: the peak every layer runs at;
- ``dtype``: the element type of every tensor (``int8``, ``float16``, ``bfloat16``, ``float32``); a workload
  counts elements, the chip multiplies them by the type's bytes;
- ``overlap``: ``max`` when a layer's memory traffic overlaps its compute (its time is the larger of the two,
  a roofline), ``sum`` when it does not (their sum);
- ``name`` and ``source`` (free text) are optional.

A file that is not valid JSON, lacks a field or gives a level a non-positive number raises `ChipSpecError`
naming the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from timerl.errors import FileFormatError, TimeRLError
from timerl.files import read_json

LEVELS = ("DRAM", "LLC", "SRAM")
DTYPE_BYTES = {"int8": 1, "float16": 2, "bfloat16": 2, "float32": 4}
OVERLAPS = ("max", "sum")
DEFAULT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chips", "nnpi.json")


class ChipSpecError(TimeRLError):
    """A chip file that cannot be read as a chip."""


@dataclass(frozen=True)
class ChipSpec:
    name: str
    capacity: tuple[float, float, float]   # bytes of DRAM, LLC, SRAM
    bandwidth: tuple[float, float, float]  # bytes per second of DRAM, LLC, SRAM
    compute: float                         # ops per second
    dtype: str = "int8"
    overlap: str = "max"

    @property
    def bytes_per_element(self) -> int:
        return DTYPE_BYTES[self.dtype]

    def with_bandwidth(self, bandwidth) -> ChipSpec:
        return ChipSpec(self.name, self.capacity, tuple(float(b) for b in bandwidth), self.compute, self.dtype,
                        self.overlap)

    def to_json(self) -> dict:
        return {"name": self.name, "capacity_bytes": dict(zip(LEVELS, self.capacity)),
                "bandwidth_bytes_per_second": dict(zip(LEVELS, self.bandwidth)),
                "compute_ops_per_second": self.compute, "dtype": self.dtype, "overlap": self.overlap}


def load_spec(path: str = DEFAULT_PATH) -> ChipSpec:
    """The chip described by the JSON file at ``path`` (see the module docstring)."""
    try:
        data = read_json(path, "chip file")
    except FileFormatError as error:
        raise ChipSpecError(str(error)) from error
    if not isinstance(data, dict):
        raise ChipSpecError(f"{path}: a chip file holds one JSON object")
    return spec_from_dict(data, path)


def spec_from_dict(data: dict, where: str = "<chip>") -> ChipSpec:
    def per_level(field: str) -> tuple[float, float, float]:
        values = data.get(field)
        if not isinstance(values, dict) or set(values) != set(LEVELS):
            raise ChipSpecError(f"{where}: {field!r} must map each of {', '.join(LEVELS)} to a number")
        return tuple(positive(f"{field}.{level}", values[level]) for level in LEVELS)

    def positive(field: str, value) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value <= 0:
            raise ChipSpecError(f"{where}: {field} must be a positive number, got {value!r}")
        return float(value)

    if "compute_ops_per_second" not in data:
        raise ChipSpecError(f"{where}: 'compute_ops_per_second' is missing")
    dtype, overlap = data.get("dtype", "int8"), data.get("overlap", "max")
    if dtype not in DTYPE_BYTES:
        raise ChipSpecError(f"{where}: dtype must be one of {', '.join(DTYPE_BYTES)}, got {dtype!r}")
    if overlap not in OVERLAPS:
        raise ChipSpecError(f"{where}: overlap must be one of {', '.join(OVERLAPS)}, got {overlap!r}")
    return ChipSpec(str(data.get("name", os.path.basename(where))), per_level("capacity_bytes"),
                    per_level("bandwidth_bytes_per_second"),
                    positive("compute_ops_per_second", data["compute_ops_per_second"]), dtype, overlap)


NNPI = load_spec()
