"""The backend protocol: a handful of array operations the executor needs beyond the op lowerings.

Op kernels are written once against the Python array API (`xp`); a backend adds moving values in and out
(NumPy and DLPack), byte sizes for the memory pool, stacking for range reads, and the device/host split.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np

from timerl.backends.numpy_backend import NumpyBackend


class Backend(Protocol):
    """Everything the executors call on a backend. The compiled backends (torch, jax) also have ``vmap`` and
    ``unstack``, which vectorized loops need (`timerl.runtime.batch`); the NumPy backend has neither, and the
    reference interpreter never batches."""

    name: str
    slices_are_views: bool  # whether x[a:b] is free (block stores pay off)
    xp: Any
    kernels: dict  # per-program cache of bound kernels, keyed by node id
    # optional, for the per-step path (`timerl.runtime.plan`; torch has both): op name -> (attributes -> a kernel
    # that is the op at inputs of its result's floating type), and ``fused_matmul_add(x_shape, w_shape,
    # bias_shape)`` -> a kernel of (x, w, bias) computing ``x @ w + bias``, or None where it cannot
    native_kernels: dict

    def compile(self, kernel: Any) -> Any: ...

    def session(self) -> Any: ...

    def from_numpy(self, value: np.ndarray) -> Any: ...

    def from_user(self, value: np.ndarray) -> Any: ...  # from user code: environments, sources, UDFs

    def to_numpy(self, value: Any) -> np.ndarray: ...

    def nbytes(self, value: Any) -> int: ...

    def stack(self, values: Sequence[Any]) -> Any: ...

    def zeros(self, shape: Sequence[int], dtype: str) -> Any: ...

    def to_host(self, value: Any) -> Any: ...

    def to_device(self, value: Any) -> Any: ...

    def fetch_ahead(self, values: tuple) -> tuple[tuple, Any]: ...

    def cast(self, value: Any, dtype: str) -> Any: ...

    def write(self, buffer: Any, index: int, value: Any) -> Any: ...

    def write_block(self, buffer: Any, start: int, values: Any) -> Any: ...

    def vmap(self, kernel: Any, axes: tuple) -> Any: ...

    def unstack(self, value: Any) -> Sequence[Any]: ...

    def row(self, value: Any, index: int) -> Any: ...


def get_backend(name: str):
    # torch and jax are imported when a program first asks for them, not when timerl is imported (seconds)
    if name == "torch":
        from timerl.backends.torch_backend import TorchBackend

        return TorchBackend()
    if name == "jax":
        from timerl.backends.jax_backend import JaxBackend

        return JaxBackend()
    if name in ("numpy", "reference"):
        return NumpyBackend()
    raise ValueError(f"unknown backend {name!r}")
