"""PyTorch arrays. On a machine with a GPU values live on CUDA and host memory is pinned CPU memory."""

from __future__ import annotations

import ctypes
import functools
import warnings
from typing import Any, Sequence

import ml_dtypes
import numpy as np
import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.proxy_tensor import make_fx

from timerl.ops.registry import OPS

_DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "int64": torch.int64,
           "int32": torch.int32, "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
           "bfloat16": torch.bfloat16}

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_FROM_NUMPY = {np.dtype(name) for name in ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8",
                                           "bool")}


# Below this many elements torch's own tanh is cheaper than the four dispatches of `tanh` (measured: even at
# 4,096 elements, 12 us each; 20 against 44 us at 16,384; 0.27 against 1.2 ms at 409,600)
_SIGMOID_TANH_ELEMENTS = 8192


def tanh(x: torch.Tensor, /, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``tanh(x)``; on large float32 CPU arrays as ``2 * sigmoid(2 * x) - 1``. torch's CPU tanh kernel takes about
    3 ns an element (not vectorized for float32 here), its sigmoid 0.4 ns: four passes of the second take a
    quarter of the time of one of the first. The absolute error stays below 2.4e-7 (float32 rounding of values
    near 1 is 6e-8); near 0 the error is absolute, not relative. Other types and small arrays use torch.tanh."""
    if x.dtype != torch.float32 or x.numel() < _SIGMOID_TANH_ELEMENTS or x.device.type != "cpu":
        return torch.tanh(x, out=out)
    doubled = torch.mul(x, 2.0) if out is None else torch.mul(x, 2.0, out=out)
    return doubled.sigmoid_().mul_(2.0).sub_(1.0)


class TorchBackend:
    name = "torch"
    slices_are_views = True

    def __init__(self) -> None:
        self.kernels: dict = {}
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.xp = _fast_namespace(self.device)
        self.on_cpu = self.device.type == "cpu"
        self._copies: Any = None  # the CUDA stream of fetches issued ahead (`fetch_ahead`), made on first use
        if self.on_cpu:
            keep_freed_memory()

    def compile(self, kernel):
        return kernel

    def jit(self, function):
        """``function`` (of tensors, pure) compiled by TorchInductor for each layout of its inputs
        (`InductorFunction`); used for a group's pure kernels with the ``compile_groups`` option."""
        return InductorFunction(function)

    # torch's own kernels for ops whose array-API lowering takes several calls (the registry's ``lowering``):
    # (attributes) -> kernel, used where the inputs already have the result's floating-point type
    # (`timerl.runtime.evaluate.point_kernel`)
    native_kernels = {name: functools.partial(op.lowering["torch"], torch) for name, op in OPS.items()
                      if "torch" in op.lowering}

    # the kernels of ops that can write into a given buffer (``out=``): buffer donation, where an input dies at
    # the op and has the result's type (`timerl.runtime.fusions.buffer_donations`)
    inplace_kernels = {name: getattr(torch, name) for name in (
        "add", "sub", "mul", "div", "neg", "exp", "log", "sigmoid", "sqrt", "abs", "sin", "cos", "maximum",
        "minimum")}
    inplace_kernels["tanh"] = tanh

    @staticmethod
    def tanh_backward(grad: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
        """``grad * (1 - output * output)``, the gradient of ``output = tanh(x)``, in one kernel
        (`timerl.runtime.fusions`)."""
        return torch.ops.aten.tanh_backward(grad, output)

    @staticmethod
    def fused_matmul_add(x_shape: tuple, w_shape: tuple, bias_shape: tuple):
        """``x @ w + bias`` as one ``torch.addmm`` (one dispatch instead of two) where torch allows it: 2-D
        operands and a bias that broadcasts to the product; None otherwise."""
        if len(x_shape) != 2 or len(w_shape) != 2 or len(bias_shape) > 2:
            return None
        product = (x_shape[0], w_shape[1])
        if any(b not in (1, p) for b, p in zip(reversed(bias_shape), reversed(product))):
            return None
        return lambda x, w, bias: torch.addmm(bias, x, w)

    def unstack(self, value: torch.Tensor) -> tuple:
        return value.unbind(0)

    def row(self, value: torch.Tensor, index: int) -> torch.Tensor:
        return value[index]

    def vmap(self, kernel, axes):
        return torch.func.vmap(kernel, in_dims=axes)

    def session(self):
        return torch.no_grad()

    def from_numpy(self, value: np.ndarray) -> torch.Tensor:
        array = value if type(value) is np.ndarray else np.asarray(value)
        if array.dtype == _BFLOAT16:  # torch reads no NumPy bfloat16: through float32, which holds it exactly
            return self.from_numpy(array.astype(np.float32)).to(torch.bfloat16)
        if self.on_cpu and array.dtype in _FROM_NUMPY and array.flags.writeable:
            return torch.from_numpy(array)  # zero-copy, and the cheapest way in (2 us against 7 through dlpack)
        if array.ndim and array.dtype != np.bool_:
            tensor = torch.from_dlpack(np.ascontiguousarray(array))  # zero-copy
        else:
            tensor = torch.as_tensor(array)
        return tensor.to(self.device) if self.device.type != "cpu" else tensor

    from_user = from_numpy  # values from user code (environments, sources, UDFs): like any host value here

    def to_numpy(self, value: Any) -> np.ndarray:
        if isinstance(value, torch.Tensor) and value.dtype == torch.bfloat16:
            return self.to_numpy(value.float()).astype(_BFLOAT16)
        if isinstance(value, torch.Tensor):
            try:
                return value.numpy()  # a CPU tensor outside autograd: shares its memory
            except (RuntimeError, TypeError):  # on the GPU, or part of a graph
                return value.detach().cpu().numpy()
        return np.asarray(value)

    def nbytes(self, value: torch.Tensor) -> int:
        return int(value.element_size() * value.nelement())

    def stack(self, values: Sequence[torch.Tensor]) -> torch.Tensor:
        return torch.stack(list(values))

    def write(self, buffer: torch.Tensor, index: int, value: torch.Tensor) -> torch.Tensor:
        buffer[index] = value
        return buffer

    def write_block(self, buffer: torch.Tensor, start: int, values: torch.Tensor) -> torch.Tensor:
        buffer[start:start + values.shape[0]] = values
        return buffer

    def zeros(self, shape: Sequence[int], dtype: str) -> torch.Tensor:
        return torch.zeros(tuple(shape), dtype=_DTYPES[dtype], device=self.device)

    def to_host(self, value: torch.Tensor) -> torch.Tensor:
        """A swapped-out copy. On a GPU: into pinned host memory, without waiting for the copy (the host
        copy is only ever read by `to_device`, a copy on the same stream, so it comes after this one);
        on a CPU-only machine (the simulated device): a copy in the same memory."""
        if self.on_cpu:
            return value.clone()
        host = torch.empty(value.shape, dtype=value.dtype, device="cpu", pin_memory=True)
        return host.copy_(value, non_blocking=True)

    def to_device(self, value: torch.Tensor) -> torch.Tensor:
        """Back to the device: from pinned memory, ``non_blocking`` lets the CPU go on issuing work."""
        return value.to(self.device, non_blocking=True)

    def fetch_ahead(self, values: tuple) -> tuple[tuple, Any]:
        """A scheduled fetch issued ahead of its reader (`timerl.runtime.memory.MemoryPool.fetch`): on a GPU the
        copies run on a stream of their own, after what the compute stream has issued so far (the offload that
        wrote the host copy), so that they overlap with the compute in between; returns the device values and
        what to call before they are read (the compute stream waits for the copies' event, and the copies'
        memory is marked as used by it), None on the CPU (the simulated device: `to_device`)."""
        if self.on_cpu:
            return tuple(None if v is None else self.to_device(v) for v in values), None
        if self._copies is None:
            self._copies = torch.cuda.Stream(self.device)
        self._copies.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self._copies):
            fetched = tuple(None if v is None else v.to(self.device, non_blocking=True) for v in values)
            done = torch.cuda.Event()
            done.record(self._copies)

        def ready() -> None:
            compute = torch.cuda.current_stream(self.device)
            compute.wait_event(done)
            for value in fetched:
                if value is not None:
                    value.record_stream(compute)

        return fetched, ready

    def cast(self, value: Any, dtype: str) -> torch.Tensor:
        if not isinstance(value, torch.Tensor):
            value = torch.as_tensor(np.asarray(value), device=self.device)
        target = _DTYPES[dtype]
        return value if value.dtype == target else value.to(target)


class InductorFunction:
    """A pure function of tensors compiled by TorchInductor (C++ loops on the CPU) once per layout of its inputs
    (shapes, strides, dtypes; other arguments by value), then called without Python in between its ops.

    The function is traced into an FX graph of aten ops by ``make_fx`` (its Python runs once, on fake tensors
    of the first inputs' layout) and compiled by ``torch._inductor.compile``; later calls with the same layout
    call the compiled code directly. ``torch.compile`` would do the same behind TorchDynamo's guards, which
    re-check every input and every global the function reads at each call: on the RT MMapGame's move (~50
    inputs) about 1 ms per call. The layout key here is what the compiled code assumes of its inputs and what the callers
    (`timerl.runtime.jax_plan`'s fused calls) can vary. A function that cannot be traced (data-dependent Python
    control flow) runs as it is, with a warning; ``failures`` keeps why."""

    def __init__(self, function) -> None:
        self.function = function
        # input layout -> (compiled function or None, the output's tree structure, whether it is a flat tuple)
        self.compiled: dict = {}
        self.failures: list[str] = []

    def __call__(self, *inputs: Any) -> Any:
        key = tuple([(x.shape, x.stride(), x.dtype, x.device) if isinstance(x, torch.Tensor) else (type(x), x)
                     for x in inputs])  # a list comprehension: ~7% faster than a generator at 50 inputs
        entry = self.compiled.get(key)
        if entry is None:
            entry = self.compiled[key] = self._compile(inputs)
        compiled, structure, flat = entry
        if compiled is None:
            return self.function(*inputs)
        if flat:  # a flat tuple of tensors (`_compile`): no tree to rebuild at every call
            return tuple(compiled(*inputs))
        return pytree.tree_unflatten(compiled(*inputs), structure)

    def _compile(self, inputs: tuple) -> tuple:
        structure = []

        def flat(*arguments: Any) -> list:
            leaves, tree = pytree.tree_flatten(self.function(*arguments))
            structure.append(tree)
            return leaves

        import torch._inductor  # noqa: PLC0415 (seconds to import: only for programs that compile groups)

        try:
            # traced on fake tensors: Python that reads values (``if x.any()``, ``.item()``) fails here instead of
            # being specialized to the first call's values. Each argument is traced as a tensor object of its own
            # (`_distinct`): make_fx makes one fake tensor per object, so a tensor passed twice would be traced
            # as one placeholder, and the compiled code would read it for both arguments at every later call
            distinct = _distinct(inputs)
            graph = make_fx(flat, tracing_mode="fake")(*distinct)
            # one compile at a time needs no pool of compiling worker processes (slower to start on a small machine);
            # no checks of the inputs' sizes, strides and alignment at every call: the layout key above is what
            # selects this code (the RT MMapGame's move: ~100 checks a move)
            with torch._inductor.config.patch(compile_threads=1, **_UNCHECKED):
                compiled = torch._inductor.compile(graph, distinct)
        except Exception as error:  # noqa: BLE001 (any failure to trace or compile: the function runs as it is)
            self.failures.append(f"{type(error).__name__}: {error}")
            warnings.warn(f"compile_groups: a group's kernels could not be compiled by TorchInductor and run "
                          f"uncompiled ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})",
                          RuntimeWarning, stacklevel=2)
            return None, None, False
        tree = structure[-1]
        return compiled, tree, tree == pytree.tree_structure(tuple(range(tree.num_leaves)))


_UNCHECKED = {"size_asserts": False, "alignment_asserts": False}


def _distinct(inputs: tuple) -> list:
    """``inputs`` with each tensor as a new tensor object on the same memory (``detach``: no copy). A caller may
    pass one tensor as several arguments (a value read through two expressions: the RT MMapGame's move reads
    the same stored state twice at some moves, two values at others); the layout key of `InductorFunction`
    does not see that, so what is traced must not depend on it."""
    return [x.detach() if isinstance(x, torch.Tensor) else x for x in inputs]


def _fast_namespace(device: torch.device) -> Any:
    """array_api_compat's torch namespace, with the functions the per-step path calls most going straight to
    torch where the array API's answer is torch's own (same dtypes in, no promotion to do): the compat layer
    costs more than the kernel on small arrays (matmul of a 16x64 batch: 16 us against 6 us). On a GPU the
    creation functions make their arrays on ``device`` unless told otherwise (the array API's default device is
    torch's, the CPU): an op's constants (a window's discount matrix, a one-hot's classes) meet its inputs there."""
    import types

    import array_api_compat.torch as compat

    xp = types.ModuleType("timerl_torch_xp", compat.__doc__)
    xp.__dict__.update({k: v for k, v in vars(compat).items() if not k.startswith("__")})

    def matmul(x1, x2, /):
        if x1.dtype == x2.dtype:
            return torch.matmul(x1, x2)
        return compat.matmul(x1, x2)

    def astype(x, dtype, /, *, copy=True, device=None):
        if device is None and (x.dtype != dtype or not copy):  # a new tensor, or no copy asked for
            return x.to(dtype)
        return compat.astype(x, dtype, copy=copy, device=device)

    def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
        if axis is not None and dtype is None and not include_initial and x.dtype.is_floating_point:
            return torch.cumsum(x, dim=axis)
        return compat.cumulative_sum(x, axis=axis, dtype=dtype, include_initial=include_initial)

    def take_along_axis(x, indices, /, *, axis=-1):
        return torch.take_along_dim(x, torch.where(indices < 0, indices + x.shape[axis], indices), dim=axis)

    def clip(x, /, min=None, max=None):
        scalars = isinstance(min, (int, float)) and isinstance(max, (int, float))
        if scalars and x.is_floating_point() and not isinstance(min, bool) and not isinstance(max, bool):
            return torch.clamp(x, min, max)
        return compat.clip(x, min, max)

    xp.matmul, xp.astype, xp.cumulative_sum, xp.take_along_axis = matmul, astype, cumulative_sum, take_along_axis
    xp.clip, xp.tanh = clip, tanh
    if device.type != "cpu":
        for name in _CREATION:
            setattr(xp, name, _on_device(getattr(compat, name), device))
    return xp


# the array API's functions that make an array from no array: their default device is the process's (the CPU)
_CREATION = ("arange", "asarray", "empty", "eye", "full", "linspace", "ones", "zeros")


def _on_device(create, default: torch.device):
    """``create`` with ``default`` as its default device (an array made from a tensor stays where the tensor is)."""

    def on_device(*args: Any, device: Any = None, **kwargs: Any) -> torch.Tensor:
        if device is None and not (args and isinstance(args[0], torch.Tensor)):
            device = default
        return create(*args, device=device, **kwargs)

    return functools.wraps(create)(on_device)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


@functools.cache
def keep_freed_memory() -> bool:
    """Keep freed CPU memory in the process (glibc only; False elsewhere). A program that allocates and frees
    the same multi-MB arrays at every step (a loop-carried state, the temporaries of an op over it) otherwise
    has glibc hand each one back to the kernel (blocks above the mmap threshold, or a trim of the heap's top)
    and fault its pages in again, zeroed, at the next allocation: on the RT MMapGame (256 games, 1,041
    buffers, 6 MB records per step) that was 40-45% of a move's CPU time (5,981 moves per CPU s against
    10,592 with both thresholds raised, side by side in one process). Blocks up to 32 MB (glibc's largest
    mmap threshold) come from the heap, and the heap is trimmed only above 256 MB free at its top."""
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, 256 << 20))
    except (OSError, AttributeError):  # not glibc
        return False
