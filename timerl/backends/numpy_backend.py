"""NumPy arrays: the reference interpreter's, and the host side of jax on the CPU (`timerl.backends.jax_backend`)."""

from __future__ import annotations

import contextlib
from typing import Any, Sequence

import array_api_compat.numpy as array_api_numpy
import numpy as np


class NumpyBackend:
    """The reference interpreter's arrays."""

    name = "numpy"
    slices_are_views = True

    def __init__(self) -> None:
        self.kernels: dict = {}
        self.xp = array_api_numpy

    def compile(self, kernel):
        return kernel

    def session(self):
        return contextlib.nullcontext()

    def from_numpy(self, value: np.ndarray) -> np.ndarray:
        return value

    from_user = from_numpy  # values from user code (environments, sources, UDFs): like any host value here

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def nbytes(self, value: Any) -> int:
        return int(np.asarray(value).nbytes)

    def stack(self, values: Sequence[Any]) -> np.ndarray:
        return np.stack([np.asarray(v) for v in values])

    def write(self, buffer: np.ndarray, index: int, value: Any) -> np.ndarray:
        buffer[index] = value
        return buffer

    def write_block(self, buffer: np.ndarray, start: int, values: Any) -> np.ndarray:
        buffer[start:start + len(values)] = values
        return buffer

    def zeros(self, shape: Sequence[int], dtype: str) -> np.ndarray:
        return np.zeros(tuple(shape), dtype=dtype)

    def row(self, value: np.ndarray, index: int) -> np.ndarray:
        return value[index]

    def to_host(self, value: Any) -> Any:
        return value

    def to_device(self, value: Any) -> Any:
        return value

    def fetch_ahead(self, values: tuple) -> tuple[tuple, None]:
        return values, None

    def cast(self, value: Any, dtype: str) -> np.ndarray:
        return np.asarray(value, dtype=dtype)
