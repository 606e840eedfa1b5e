"""JAX arrays (immutable): values are exchanged with NumPy and torch through DLPack."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import jax
import jax.numpy as jnp


class JaxBackend:
    name = "jax"
    slices_are_views = False

    def __init__(self) -> None:
        self.kernels: dict = {}
        self.dynamic_nodes: dict = {}
        self._unstack: dict = {}
        from timerl.backends.base import NumpyBackend

        # jax compiles a computation per distinct shape: ops whose shapes change from point to point (windows
        # of length T - t) run on NumPy instead, zero-copy on the CPU. (On an accelerator this costs a host
        # round trip; padding windows to static shapes is the better fix, see incrementalization.)
        self.host_for_dynamic_shapes = NumpyBackend()
        self.xp = jnp
        self.device = jax.devices()[0]
        self.host = jax.devices("cpu")[0]

    def compile(self, kernel):
        """Each op kernel is jitted once (per input shapes): eager jax dispatch costs ~0.4 ms per op."""
        return jax.jit(kernel)

    def unstack(self, value: jax.Array) -> tuple:
        """The rows of ``value`` in one dispatch (indexing row by row dispatches, and compiles, once per row)."""
        split = self._unstack.get(value.shape[0])
        if split is None:
            count = value.shape[0]
            split = self._unstack[count] = jax.jit(lambda array: tuple(array[k] for k in range(count)))
        return split(value)

    def vmap(self, kernel, axes):
        return jax.jit(jax.vmap(kernel, in_axes=axes))

    def session(self):
        """float64/int64 programs keep their dtypes, as on torch (scoped, not a global flag)."""
        return jax.enable_x64(True)

    def from_numpy(self, value: np.ndarray) -> jax.Array:
        # constants are converted when a program is lowered, outside `session`: keep their float64/int64 too
        with jax.enable_x64(True):
            return jax.device_put(np.asarray(value), self.device)

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def nbytes(self, value: jax.Array) -> int:
        return int(value.nbytes)

    def stack(self, values: Sequence[jax.Array]) -> jax.Array:
        return self.from_numpy(np.stack([np.asarray(v) for v in values]))  # no compile per stack length

    def write(self, buffer: jax.Array, index: int, value: jax.Array) -> jax.Array:
        return buffer.at[index].set(value)

    def write_block(self, buffer: jax.Array, start: int, values: jax.Array) -> jax.Array:
        return buffer.at[start:start + values.shape[0]].set(values)

    def zeros(self, shape: Sequence[int], dtype: str) -> jax.Array:
        return jnp.zeros(tuple(shape), dtype=dtype)

    def to_host(self, value: jax.Array) -> jax.Array:
        return jax.device_put(value, self.host)

    def to_device(self, value: jax.Array) -> jax.Array:
        return jax.device_put(value, self.device)

    def cast(self, value: Any, dtype: str) -> jax.Array:
        array = value if isinstance(value, jax.Array) else jnp.asarray(np.asarray(value))
        return array if array.dtype == dtype else array.astype(dtype)
