"""JAX arrays (immutable): values are exchanged with NumPy and torch through DLPack."""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

import jax
import jax.numpy as jnp

from timerl.backends.jax_keys import kernel_key, shared
from timerl.backends.numpy_backend import NumpyBackend
from timerl.ops.registry import OPS

# XLA:CPU runs each computation on the calling thread instead of handing it to a worker thread that the caller then
# waits for. timerl's programs dispatch small computations and read most results back at once (an action for the
# environment, every step): inline, a jitted call and its `np.asarray` cost a fraction of the CPU of a hand-over,
# and a REINFORCE iteration switches threads once a step less.
# Process-wide, and only before jax makes its CPU client (its first array or device query): set here, when a
# program first asks for the jax backend (`timerl.backends.get_backend`), it leaves a process that already uses jax
# as it is. The variable JAX_CPU_ENABLE_ASYNC_DISPATCH (true / false; jax's flag name) chooses otherwise, as does
# `jax.config.update` after importing timerl: programs that chain many calls without reading results back gain from
# the handover (the RT MMapGame's moves: `algorithms.mmap.rt.bench` turns it on).
jax.config.update("jax_cpu_enable_async_dispatch",
                  os.environ.get("JAX_CPU_ENABLE_ASYNC_DISPATCH", "false").lower() in ("1", "true", "yes", "on"))
# On a GPU, XLA's default precision for float32 matrix products and convolutions is TF32 (10-bit mantissas): a
# PPO loss came out 2e-4 off the reference interpreter's and the torch backend's (torch keeps float32 products in
# float32 unless told otherwise), and the RT MMapGame's legal moves differed from the NumPy game's at move 70 of a
# game (an H100; both agree with float32 products). timerl's results do not depend on the device: products are
# float32 unless JAX_DEFAULT_MATMUL_PRECISION (jax's own variable) says otherwise. No effect on the CPU, where
# XLA's products are float32 at every precision.
if "JAX_DEFAULT_MATMUL_PRECISION" not in os.environ:
    jax.config.update("jax_default_matmul_precision", "highest")


@jax.jit
def _take(value: jax.Array, index: Any) -> jax.Array:
    return jax.lax.dynamic_index_in_dim(value, index, keepdims=False)


class _ScanningNumpy:
    """``jax.numpy`` with cumulative sums computed as a parallel prefix scan (`jax.lax.associative_scan`): on
    the CPU, jax lowers ``cumsum`` to a ``reduce_window`` that adds the whole prefix at every position (N
    additions per element along an axis of N); the scan does O(N log N) work, several times faster on REINFORCE's
    padded windows."""

    def __init__(self) -> None:
        self._dtypes: dict = {}  # input dtype -> jax's result dtype of a cumulative sum without ``dtype=``

    def __getattr__(self, name: str) -> Any:
        return getattr(jnp, name)

    def cumulative_sum(self, x: Any, /, *, axis: int | None = None, dtype: Any = None,
                       include_initial: bool = False) -> Any:
        x = jnp.asarray(x)
        if axis is None:
            if x.ndim > 1:  # as jax.numpy: an axis is required for more than one dimension
                return jnp.cumulative_sum(x, axis=axis, dtype=dtype, include_initial=include_initial)
            axis = 0
        if dtype is None:
            dtype = self._dtypes.get(x.dtype)
            if dtype is None:
                dtype = self._dtypes[x.dtype] = jnp.cumulative_sum(jnp.zeros((1,), x.dtype)).dtype
        x = x.astype(dtype)
        total = jax.lax.associative_scan(jnp.add, x, axis=axis) if x.shape[axis] > 1 else x
        if include_initial:
            zero = jnp.zeros(x.shape[:axis % x.ndim] + (1,) + x.shape[axis % x.ndim + 1:], dtype)
            total = jnp.concatenate([zero, total], axis=axis)
        return total


class JaxBackend:
    name = "jax"
    slices_are_views = False
    # ops lowered to jax's own primitives (the registry's ``lowering["jax"]``), same signature as the op's impl
    op_impls = {name: op.lowering["jax"](jax) for name, op in OPS.items() if "jax" in op.lowering}

    def __init__(self) -> None:
        self.kernels: dict = {}
        self.dynamic_nodes: dict = {}
        self.device = jax.devices()[0]
        self.xp = _ScanningNumpy() if self.device.platform == "cpu" else jnp
        self.host = jax.devices("cpu")[0]
        on_cpu = self.device.platform == "cpu"
        # jax compiles a computation per distinct shape: ops whose shapes change from point to point (windows
        # of length T - t) run on NumPy instead, zero-copy on the CPU. On an accelerator that would be a host
        # round trip per op: there they stay on the device (vectorized loops pad windows to static shapes).
        self.host_for_dynamic_shapes = NumpyBackend() if on_cpu else None
        self._stack_on_host = on_cpu  # also: host arrays stay NumPy arrays (`from_numpy`)

    def compile(self, kernel):
        """Each op kernel is jitted once (per input shapes): eager jax dispatch costs ~0.4 ms per op. Kernels
        of ops with equal attributes share one jitted function (`timerl.backends.jax_keys`)."""
        return shared(kernel_key(kernel), lambda: kernel, jax.jit)

    def jit(self, function):
        return jax.jit(function)

    def row(self, value: jax.Array, index: int) -> jax.Array:
        """``value[index]`` in one dispatch of a computation compiled once per shape (eager indexing goes
        through jax's index parsing, ~10x slower)."""
        return _take(value, index)

    def unstack(self, value: jax.Array) -> list:
        """The rows of ``value``, one cheap dispatch each (a jit returning every row compiles for seconds at a
        few hundred rows, once per count)."""
        return [_take(value, k) for k in range(value.shape[0])]

    def vmap(self, kernel, axes):
        key = kernel_key(kernel)
        return shared(None if key is None else ("vmap", key, axes), lambda: jax.vmap(kernel, in_axes=axes), jax.jit)

    def session(self):
        """float64/int64 programs keep their dtypes, as on torch (scoped, not a global flag)."""
        return jax.enable_x64(True)

    def from_numpy(self, value: np.ndarray) -> jax.Array | np.ndarray:
        """On the CPU, a host array stays a (private, immutable by convention) NumPy copy: jax takes NumPy
        arguments into its computations at little cost, where ``device_put`` costs ~20 us per array, the
        largest per-step cost of a program stepping a gymnasium environment. Elsewhere it moves to the device."""
        if self._stack_on_host:
            return np.array(value)
        # constants are converted when a program is lowered, outside `session`: keep their float64/int64 too
        with jax.enable_x64(True):
            return jax.device_put(np.asarray(value), self.device)

    def from_user(self, value: np.ndarray) -> jax.Array | np.ndarray:
        """A value from user code (environments, sources, UDFs): like any host value on one device (split
        across devices by `timerl.backends.jax_sharded`)."""
        return self.from_numpy(value)

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def nbytes(self, value: jax.Array) -> int:
        return int(value.nbytes)

    def stack(self, values: Sequence[jax.Array]) -> jax.Array:
        if self._stack_on_host:  # zero-copy views, and no compile per stack length
            return self.from_numpy(np.stack([np.asarray(v) for v in values]))
        return jnp.stack(list(values))

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

    def fetch_ahead(self, values: tuple) -> tuple[tuple, None]:
        """A scheduled fetch issued ahead of its reader: ``device_put`` is asynchronous (the computation that
        reads the result waits for it), so nothing is left to wait for."""
        return tuple(None if v is None else jax.device_put(v, self.device) for v in values), None

    def cast(self, value: Any, dtype: str) -> jax.Array:
        array = value if isinstance(value, jax.Array) else jnp.asarray(np.asarray(value))
        return array if array.dtype == dtype else array.astype(dtype)
