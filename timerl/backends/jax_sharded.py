"""One program over several jax devices, data-parallel (``ctx.compile(..., backend="jax", devices=N)``).

The values a program receives from user code (environment steps and resets, sources, UDF outputs) are split
along their batch axis across a one-dimensional `jax.sharding.Mesh` of ``N`` devices: the first axis whose
length is the batch length (the environments' ``num_envs`` by default). Every other value entering the program
(constants, random draws, parameters' initial values) is replicated on all of them. The kernels are the jax
backend's jitted functions: XLA's SPMD partitioner propagates the shardings through them, runs each device's
share of the batch, and inserts the cross-device reductions where a value sums or averages over the batch (a
loss, and so every parameter gradient), so the parameters stay replicated and equal on every device. Results
equal one device's up to the order of floating-point sums.

On the CPU, the values stay jax arrays (the one-device backend keeps host values as NumPy arrays, which would
put every computation back on one device); ops whose shapes change from point to point still run on NumPy.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from timerl.backends.jax_backend import JaxBackend

AXIS = "batch"  # the mesh's one axis


class ShardedJaxBackend(JaxBackend):
    """The jax backend over the first ``devices`` of ``jax.devices()``, splitting axes of length ``batch``."""

    def __init__(self, devices: int, batch: int) -> None:
        super().__init__()
        self.mesh = Mesh(np.array(jax.devices()[:devices]), (AXIS,))
        self.batch = batch
        self.replicated = NamedSharding(self.mesh, PartitionSpec())
        self._split: dict[int, NamedSharding] = {}  # rank -> the sharding splitting that rank's batch axis
        self._stack_on_host = False
        self.placed = {"split": 0, "replicated": 0}  # values placed so far, by kind (`exe.stats["devices"]`)

    def _put(self, value: Any, sharding: NamedSharding, kind: str) -> jax.Array:
        self.placed[kind] += 1
        with jax.enable_x64(True):  # as `JaxBackend.from_numpy`: constants keep their float64/int64
            return jax.device_put(np.asarray(value), sharding)

    def from_numpy(self, value: np.ndarray) -> jax.Array:
        return self._put(value, self.replicated, "replicated")

    def from_user(self, value: np.ndarray) -> jax.Array:
        """A value from user code, split along its first axis of the batch length (replicated if none)."""
        array = np.asarray(value)
        axis = next((k for k, n in enumerate(array.shape) if n == self.batch), None)
        if axis is None:
            return self._put(array, self.replicated, "replicated")
        return self._put(array, self.split_sharding(array.ndim, axis), "split")

    def split_sharding(self, ndim: int, axis: int) -> NamedSharding:
        return NamedSharding(self.mesh, PartitionSpec(*([None] * axis), AXIS))

    def stack(self, values: Sequence[Any]) -> jax.Array:
        return jnp.stack([v if isinstance(v, jax.Array) else self.from_numpy(v) for v in values])

    def to_host(self, value: Any) -> np.ndarray:
        """An offloaded value is gathered into host memory; `to_device` places it again as it came in."""
        return np.asarray(value)

    def to_device(self, value: Any) -> jax.Array:
        return value if isinstance(value, jax.Array) else self.from_user(value)

    def fetch_ahead(self, values: tuple) -> tuple[tuple, None]:
        return tuple(None if v is None else self.to_device(v) for v in values), None
