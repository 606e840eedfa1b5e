"""The op registry: every op defined once, its rules side by side (shared/STYLE.md, example 1).

Rule kinds, for every op:
- ``shape``: input `TensorType`s and attributes -> output shapes (ints or symbolic expressions);
- ``dtype``: input dtypes and attributes -> output dtypes;
- ``impl``: the lowering, written once against the Python array API (``xp`` is NumPy's, torch's or
  jax.numpy's namespace, as `array_api_compat` exposes them), so the reference interpreter, the torch
  backend and the jax backend run the same definition;
- ``grad``: the vector-Jacobian product written with other ops (``F`` is `timerl.rt.functional`);
- ``vectorize``: the op at many points in one call, the points stacked on a new leading axis (paper §5.2;
  the rules are built in `timerl.ops.batching`);
- ``incrementalize``: how a reduction over a whole range of a dimension becomes an accumulation along it
  (paper §5.3): a `RunningSum` or `RunningContributions` record that `timerl.pdg.incrementalize` rewrites;
- ``lowering``: the backends' own kernels where one call replaces several array-API calls: backend name ->
  ``(backend's array module) -> (attributes) -> kernel`` (torch's fused ``log_softmax``); ``impl`` elsewhere.
Optionally, ``window``: how a vectorized statement passes a window (a range read, padded in a batch to its
longest length, `timerl.runtime.windows`) through the op, by its attributes: `WINDOW_REDUCED` (a sum over the
window's axis, the padding masked to zeros), `WINDOW_CARRIED` (the window's axis kept, position by position),
or None (the default: a statement holding it is not batched over windows). Optionally, ``window_scan``: how
the op is computed when a batched statement's windows all end at one position (``x[t:T]``) or all start at one
(``x[0:t+1]``): then every window is a suffix (or prefix) of the one run of positions they cover, and
`timerl.runtime.window_scans` computes the window's ops once on that run instead of on every padded window (paper
§5.3 inside vectorized code): `POSITIONWISE` (elementwise ops: a position's value depends on that position alone)
or a `WindowScan` (a reduction over the window as a suffix or prefix scan of the run). And ``check_values``: a
`ValueCheck` of concrete input values that no shape rule can see (an index out of range). The NumPy and torch
executors call it like ``impl`` on the host before the kernel; jax computes its ``find`` inside the jitted
computation, next to the kernel, and raises after the call (`timerl.runtime.evaluate.first_violation`).
Either way it raises a `TimeRLError` that the executor completes with the op's line and point. And
``promotion``: a `timerl.ops.dtypes.Promotion`, the inputs that meet in one dtype as in PyTorch; the op is
built with them converted to it (`timerl.rt.apply`), so its kernel sees operands of one dtype on every backend.
A rule an op cannot have is `unsupported("why")`; ``tests/test_registry.py`` walks every op and rule kind.
Ops whose evaluation the executors do themselves (sources, sinks, merges, UDFs) have ``impl=executor``; what
the passes need to know of them is their category (`timerl.ops.categories`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping, Sequence

from timerl.errors import IndexOutOfRangeError, ShapeError
from timerl.ops.categories import (  # noqa: F401  (the op files register with these)
    ACCUMULATE,
    CONST,
    CONTRACTION,
    DRAW,
    ELEMENTWISE,
    INDEX,
    MERGE,
    MOVEMENT,
    REDUCTION,
    SCAN,
    SINK,
    SOURCE,
    UDF,
    Category,
)
from timerl.ops.dtypes import (  # noqa: F401  (the op files take the dtype helpers from here)
    DTYPE_ORDER,
    FLOAT_DTYPES,
    INT_DTYPES,
    Promotion,
    is_float,
    promote,
)
from timerl.ops.types import Attrs, Dim, TensorType
from timerl.symbolic import as_expr


@dataclass(frozen=True)
class Unsupported:
    """A rule an op deliberately does not have, with the reason."""

    reason: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(self.reason)


def unsupported(reason: str) -> Unsupported:
    return Unsupported(reason)


EXECUTOR = unsupported("evaluated by the executor itself, not by an array kernel")
NOT_DIFFERENTIABLE = unsupported("not differentiable: its output is discrete or it is a leaf")

@dataclass(frozen=True)
class ValueCheck:
    """A check of concrete input values, in two parts so that it runs on the host or inside a compiled kernel.

    ``find(xp, *inputs, **attrs)``: ``(bad, details)``, a boolean scalar array (the values break the rule) and
    a tuple of integer scalars saying how (the offending index, the size), written with array-API calls only so
    that jax can trace it; or None when the input types and shapes alone rule the failure out.
    ``error(details)``: the `TimeRLError` to raise, from the details as Python ints (followed by zeros where
    several checks share one array of details). Calling the check runs both on the host."""

    find: Callable[..., tuple[Any, tuple] | None]
    error: Callable[[Sequence[int]], Exception]

    def __call__(self, xp: Any, *inputs: Any, **attrs: Any) -> None:
        found = self.find(xp, *inputs, **attrs)
        if found is not None and bool(found[0]):
            raise self.error([int(d) for d in found[1]])


ShapeRule = Callable[[Sequence[TensorType], Attrs], Sequence[tuple[Dim, ...]]]
DtypeRule = Callable[[Sequence[TensorType], Attrs], Sequence[str]]


@dataclass(frozen=True)
class RunningSum:
    """A sum over the whole range of one dimension, read by this op, becomes an accumulation along it, the op
    reading the total; where ``applies(attrs, output dtype)`` holds."""

    applies: Callable[[Attrs, str], bool]


@dataclass(frozen=True)
class RunningContributions:
    """Gradient contributions read over the whole range of one dimension (a masked read) are summed as
    they come, step by step, instead of all at the end."""


WINDOW_REDUCED, WINDOW_CARRIED = "reduced", "carried"


@dataclass(frozen=True)
class WindowScan:
    """A reduction over windows that share their end (``suffix``) or their start (``prefix``), from one scan of
    the run ``x`` (M positions along axis 0) the windows cover: ``suffix(xp, x, attrs)`` holds at row ``k`` the
    reduction of the window starting at position ``k`` of the run (M + 1 rows, the last one an empty window's);
    ``prefix(xp, x, attrs)`` at row ``k`` the reduction of the window of the first ``k`` positions (M + 1 rows).
    Either may be `unsupported`; ``applies(attrs)``: the attributes for which the scans hold (a sum over the
    window's axis only)."""

    suffix: Callable[..., Any] | Unsupported
    prefix: Callable[..., Any] | Unsupported
    applies: Callable[[Any], bool] = lambda attrs: True


POSITIONWISE = "positionwise"  # ``window_scan`` of an elementwise op: computed once on the run of positions
NO_WINDOW_SCAN = Unsupported("not computed on the run of positions windows cover: a statement holding it pads "
                             "every window")


def no_window(attrs: Any) -> None:
    return None


NOT_A_REDUCTION = unsupported("reads no range it reduces: nothing to accumulate step by step")


@dataclass(frozen=True)
class OpDef:
    name: str
    category: Category
    shape: ShapeRule | Unsupported
    dtype: DtypeRule | Unsupported
    impl: Callable[..., Any] | Unsupported
    grad: Callable[..., Any] | Unsupported
    vectorize: Callable[..., Any] | Unsupported
    incrementalize: RunningSum | RunningContributions | Unsupported
    lowering: Mapping[str, Callable[..., Any]]
    window: Callable[[Any], str | None] = no_window
    check_values: ValueCheck | None = None
    window_scan: WindowScan | str | Unsupported = NO_WINDOW_SCAN
    promotion: Promotion | None = None

    def infer(self, inputs: Sequence[TensorType], attrs: Attrs) -> tuple[TensorType, ...]:
        shapes = self.shape(inputs, attrs)
        dtypes = self.dtype(inputs, attrs)
        return tuple(TensorType(tuple(s), d) for s, d in zip(shapes, dtypes))


RULE_KINDS = ("shape", "dtype", "impl", "grad", "vectorize", "incrementalize")
OPS: dict[str, OpDef] = {}


def register(name: str, category: Category, *, shape: Any, dtype: Any, impl: Any, grad: Any, vectorize: Any,
             incrementalize: Any, lowering: Mapping[str, Callable[..., Any]] | None = None,
             window: Callable[[Any], str | None] = no_window, check_values: ValueCheck | None = None,
             window_scan: WindowScan | str | Unsupported = NO_WINDOW_SCAN,
             promotion: Promotion | None = None) -> OpDef:
    if name in OPS:
        raise ValueError(f"op {name} registered twice")
    op = OpDef(name, category, shape, dtype, impl, grad, vectorize, incrementalize,
               MappingProxyType(dict(lowering or {})), window, check_values, window_scan, promotion)
    OPS[name] = op
    return op


def lookup(name: str) -> OpDef:
    return OPS[name]


# ---- shape and dtype helpers shared by the op files -------------------------------------------------------


def same_dim(a: Dim, b: Dim) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return as_expr(a).same(b)


def broadcast_shapes(*shapes: tuple[Dim, ...]) -> tuple[Dim, ...]:
    """NumPy broadcasting; symbolic sizes must match exactly or meet a 1."""
    rank = max((len(s) for s in shapes), default=0)
    result: list[Dim] = []
    for axis in range(rank):
        size: Dim = 1
        for shape in shapes:
            offset = axis - (rank - len(shape))
            if offset < 0:
                continue
            dim = shape[offset]
            if isinstance(dim, int) and dim == 1:
                continue
            if isinstance(size, int) and size == 1:
                size = dim
            elif not same_dim(size, dim):
                if isinstance(size, int) and isinstance(dim, int):
                    raise ShapeError(f"shapes {', '.join(map(_fmt, shapes))} cannot be broadcast together")
                size = size if isinstance(dim, int) else dim
        result.append(size)
    return tuple(result)


def _fmt(shape: tuple[Dim, ...]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def normalize_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ShapeError(f"dimension {axis} is out of range for a tensor with {rank} dimensions")
    return axis % rank if rank else 0


def normalize_axes(axes: int | Sequence[int] | None, rank: int) -> tuple[int, ...]:
    if axes is None:
        return tuple(range(rank))
    if isinstance(axes, int):
        axes = (axes,)
    return tuple(sorted(normalize_axis(a, rank) for a in axes))


def index_range(op: str, index: int, dim: str | None = None) -> ValueCheck:
    """Every element of input ``index`` in ``[0, size)``, ``size`` the length of dimension ``attrs[dim]`` of
    input 0, or ``attrs["num_classes"]`` without ``dim`` (torch requires it; NumPy and jax would wrap negative
    indices, and jax would clamp or fill out-of-range reads)."""

    def find(xp: Any, *inputs: Any, **attrs: Any) -> tuple[Any, tuple] | None:
        values = inputs[index]
        if values.shape and 0 in values.shape:
            return None
        size = inputs[0].shape[attrs[dim]] if dim is not None else attrs["num_classes"]
        low, high = xp.min(values), xp.max(values)
        return (low < 0) | (high >= size), (xp.where(low < 0, low, high), size)

    def error(details: Sequence[int]) -> Exception:
        bad, size = details[:2]
        return IndexOutOfRangeError(f"{op}: index {bad} is out of range for a dimension of size {size} "
                                    f"(valid: 0 .. {size - 1})")

    return ValueCheck(find, error)


def numel(shape: Sequence[Dim]) -> Dim:
    total: Dim = 1
    for dim in shape:
        total = total * dim
    return total
