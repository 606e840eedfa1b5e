"""One node at one point, on any backend: the per-kind evaluation shared by every executor.

Array kernels come from the op registry (written against the array API); sources, random draws, sinks,
merges, UDFs and gradient accumulation are handled here. Outputs are cast to the inferred dtypes, so every
backend agrees with the type rules rather than with its own promotion quirks.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping, Sequence

import numpy as np

from timerl.errors import ShapeError, Stop, TimeRLError, user_code_error
from timerl.ops.registry import ACCUMULATE, CONST, DRAW, INDEX, MERGE, OPS, SINK, SOURCE, UDF
from timerl.ops.special import draws_normal
from timerl.pdg.graph import Node
from timerl.runtime import rng
from timerl.runtime.access import point_dict
from timerl.runtime.host_values import owned_array
from timerl.runtime.runs import request_stop
from timerl.symbolic import Expr, Symbol, compile_function


def evaluate(node: Node, point: tuple[int, ...], inputs: list[Any], seed: int, bounds: Mapping[Symbol, int],
             backend: Any) -> tuple[Any, ...]:
    category = node.category
    if category.kernel or category is ACCUMULATE:
        return _evaluate_array(node, point, inputs, seed, bounds, backend)
    if category is INDEX:
        return (backend.from_numpy(index_value(node, point, bounds)),)
    return _BY_EXECUTOR[category](node, point, inputs, seed, node.attrs.as_dict(), backend)


def index_value(node: Node, point: tuple[int, ...], bounds: Mapping[Symbol, int]) -> np.ndarray:
    """An ``index`` op's value: its expression at ``point``, with the run's bounds."""
    return np.asarray(node.attrs["expr"].evaluate({**bounds, **dict(zip(node.domain, point))}), dtype=node.attrs["dtype"])


def _const(node, point, inputs, seed, attrs, backend):
    return (backend.from_numpy(attrs["value"]),)


def _draw(node, point, inputs, seed, attrs, backend):
    return (backend.from_numpy(rng.draw(seed, attrs["stream"], point, attrs["shape"], attrs["dtype"],
                                        draws_normal(node.op))),)


def _source(node, point, inputs, seed, attrs, backend):
    where = point_dict(node.domain, point)
    value = call_user(node, point, lambda: attrs["fn"](where))
    value = owned_array(value, attrs["dtype"], lambda: f"{node.label()}: the source function failed at {where}")
    return (backend.from_user(_check_shape(node, value, attrs["shape"])),)


def _merge(node, point, inputs, seed, attrs, backend):
    return (inputs[0],)  # the executor reads only the branch whose condition holds


def _sink(node, point, inputs, seed, attrs, backend):
    value, native = inputs[0], attrs.get("native", False)
    if native and isinstance(value, np.ndarray):  # kept on the host (jax on a CPU): the backend's array
        value = backend.xp.asarray(value)
    try:
        call_user(node, point, lambda: attrs["fn"](point_dict(node.domain, point), sink_value(value, native)))
    except Stop as stop:
        request_stop(stop)
    return ()


def _udf(node, point, inputs, seed, attrs, backend):
    arrays = [backend.to_numpy(v) for v in inputs]
    where = point_dict(node.domain, point)
    results = call_user(node, point, lambda: attrs["fn"](where, *arrays))

    def failed() -> str:  # the error's text, built only on an error
        return f"{node.label()}: the udf function failed at {where}"

    return tuple(backend.from_user(owned_array(v, t.dtype, failed)) for v, t in zip(results, attrs["outputs"]))


_BY_EXECUTOR = {CONST: _const, DRAW: _draw, SOURCE: _source, MERGE: _merge, SINK: _sink, UDF: _udf}


def _evaluate_array(node: Node, point: tuple[int, ...], inputs: list[Any], seed: int, bounds: Mapping[Symbol, int],
                    backend: Any) -> tuple[Any, ...]:
    """An op computed with arrays: its registry kernel, or a gradient accumulation."""
    op = node.op
    attrs = node.attrs.as_dict()
    accumulate = node.category is ACCUMULATE
    host = getattr(backend, "host_for_dynamic_shapes", None)
    if host is not None and _dynamic(node, backend) and not (accumulate and _whole_stacks(inputs, attrs)):
        return _on_host(node, point, inputs, seed, bounds, backend, host)
    if accumulate:
        return (accumulate_gradient(node, point, inputs, attrs, bounds, backend),)
    check_values(node, point, inputs, backend)
    try:
        kernel = backend.kernels.get(node.id)
        if kernel is None:
            kernel = backend.kernels[node.id] = _kernel(node, attrs, backend)
        if kernel is _SYMBOLIC:
            env = {**bounds, **dict(zip(node.domain, point))}
            attrs = {name: _concrete(value, env) for name, value in attrs.items()}
            return (backend.cast(OPS[op].impl(backend.xp, *inputs, **attrs), node.outputs[0].dtype),)
        return (kernel(*inputs),)
    except TimeRLError:
        raise
    except Exception as error:  # a kernel failing is a shape mistake the rules could not see before running
        raise ShapeError(f"{node.label()} failed at {point_dict(node.domain, point)}: {error}") from error


_SYMBOLIC = object()


def check_values(node: Node, point: tuple[int, ...], inputs: list[Any], backend: Any) -> None:
    """The op's check of concrete input values (an index out of range), on the host before its kernel."""
    check = OPS[node.op].check_values
    if check is None:
        return
    try:
        check(backend.xp, *inputs, **node.attrs.as_dict())
    except TimeRLError as error:
        raise _at(node, point, error) from None


def _at(node: Node, point: tuple[int, ...], error: Exception) -> Exception:
    return type(error)(f"{node.label()} at {point_dict(node.domain, point)}: {error}")


def find_violation(node: Node, xp: Any, inputs: Sequence[Any]) -> tuple[Any, tuple] | None:
    """The op's check of concrete input values as arrays ``(bad, details)``, to compute inside a compiled
    kernel (jax traces it); None when the op has no check or the inputs' types rule the failure out."""
    check = OPS[node.op].check_values
    return None if check is None else check.find(xp, *inputs, **node.attrs.as_dict())


def first_violation(xp: Any, found: Sequence[tuple[Any, tuple] | None]) -> tuple[Any, Any] | None:
    """Several checks' findings (`find_violation`, in the order the program runs them) as two arrays: ``code``,
    1 + the position of the first that found bad values (0 when none did), and its details, padded with zeros
    to the longest; None when none of them can fail. Inside a jitted function, so that the host reads one
    scalar after the call (`raise_violation`) instead of checking before it."""
    live = [(k, f) for k, f in enumerate(found) if f is not None]
    if not live:
        return None
    width = max(len(details) for _, (_, details) in live)
    code = xp.asarray(0, dtype=xp.int32)
    details = xp.zeros((width,), dtype=xp.int64)
    for k, (bad, values) in reversed(live):
        row = [xp.asarray(v, dtype=xp.int64) for v in values] + [xp.asarray(0, dtype=xp.int64)] * (width - len(values))
        code = xp.where(bad, xp.asarray(k + 1, dtype=xp.int32), code)
        if width:
            details = xp.where(bad, xp.stack(row), details)
    return code, details


def raise_violation(node: Node, point: tuple[int, ...], details: Any) -> None:
    """Raise the error of ``node``'s check (which found bad values at ``point``) from the details it found."""
    error = OPS[node.op].check_values.error([int(d) for d in host_array(details)])
    raise _at(node, point, error) from None


def host_array(value: Any) -> np.ndarray:
    """``value`` as a NumPy array in host memory (a torch tensor on a GPU is copied there first)."""
    if type(value).__module__.startswith("torch"):
        value = value.detach().cpu()
    return np.asarray(value)


def sink_value(value: Any, native: bool = False) -> Any:
    """What a sink function receives: a value it may keep but cannot use to change what other ops read.

    A NumPy array in host memory on every backend: a read-only view of a NumPy or jax value (both are never
    written again), a copy of a torch tensor (the executor may reuse its memory). With ``native`` (``x.sink(fn,
    native=True)``), the backend's own array instead: a torch tensor is cloned (it has no read-only flag), a jax
    array is immutable already."""
    if type(value).__module__.startswith("torch"):
        if native:
            return value.clone()
        if str(value.dtype) == "torch.bfloat16":  # NumPy reads no torch bfloat16: through float32, exactly
            return value.detach().to("cpu", copy=True).float().numpy().astype("bfloat16")
        return value.detach().to("cpu", copy=True).numpy()
    if native and not isinstance(value, np.ndarray):
        return value
    view = np.asarray(value).view()
    view.flags.writeable = False
    return view


def _dynamic(node: Node, backend: Any) -> bool:
    """Whether the node's shapes change from point to point (range reads, symbolic sizes, accumulations)."""
    known = backend.dynamic_nodes.get(node.id)
    if known is None:
        known = backend.dynamic_nodes[node.id] = (
            node.category is ACCUMULATE or has_symbols(node.attrs.as_dict())
            or any(not isinstance(d, int) for t in node.outputs for d in t.shape)
            or any(e.ranges() for e in node.inputs))
    return known


def _on_host(node: Node, point: tuple[int, ...], inputs: list[Any], seed: int, bounds: Mapping[Symbol, int],
             backend: Any, host: Any) -> tuple[Any, ...]:
    """Evaluate with the host backend (NumPy) and move the results back: for jax, whose eager mode compiles a
    computation for every new shape, a window that grows by one each step would compile at every step."""
    moved = [[(q, backend.to_numpy(v)) for q, v in value] if isinstance(value, (list, StackedContributions))
             else backend.to_numpy(value) for value in inputs]
    return tuple(backend.from_numpy(np.asarray(v)) for v in evaluate(node, point, moved, seed, bounds, host))


def _kernel(node: Node, attrs: dict, backend: Any):
    """The op's array kernel with its attributes bound, compiled by the backend where it can (jax.jit);
    attributes with symbolic sizes are bound per point instead."""
    if has_symbols(attrs):
        return _SYMBOLIC
    kernel = bound_kernel(node, backend)
    if any(not isinstance(d, int) for t in node.outputs for d in t.shape) or any(
            e.ranges() for e in node.inputs):
        return kernel  # shapes change from point to point: compiling would retrace at every length
    return backend.compile(kernel)


def bound_kernel(node: Node, backend: Any):
    """The op's registry kernel with its attributes bound and its result cast to the inferred dtype, so every
    backend agrees with the type rules rather than with its own promotion quirks."""
    return op_kernel(node.op, node.attrs.as_dict(), node.outputs[0].dtype, backend)


def op_kernel(op: str, attrs: dict, dtype: str, backend: Any):
    """`bound_kernel` for an op with the given attributes and result dtype."""
    impl = getattr(backend, "op_impls", {}).get(op, OPS[op].impl)  # a backend's own lowering (registry's)
    xp, cast = backend.xp, backend.cast

    def kernel(*inputs: Any) -> Any:
        return cast(impl(xp, *inputs, **attrs), dtype)

    kernel.signature = (op, attrs, dtype)  # what it computes: equal signatures, interchangeable kernels
    return kernel


FLOAT_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})


def point_kernel(node: Node, backend: Any, input_dtypes: Sequence[str]) -> Any:
    """`bound_kernel` without the work that the input types make unnecessary, for the per-step path: the
    backend's own kernel for the op where it has one (torch's fused ``log_softmax``), and no cast where every
    input already has the op's floating-point result type (array-API promotion then keeps it). ``input_dtypes``
    are the types the inputs have at run time (a constant's as moved in, not as declared)."""
    dtype = node.outputs[0].dtype if len(node.outputs) == 1 else None
    if dtype not in FLOAT_DTYPES or any(d != dtype for d in input_dtypes):
        return bound_kernel(node, backend)
    attrs = node.attrs.as_dict()
    native = getattr(backend, "native_kernels", {}).get(node.op)
    kernel = native(**attrs) if native is not None else None
    if kernel is None:
        kernel = functools.partial(OPS[node.op].impl, backend.xp, **attrs)
    kernel.signature = (node.op, attrs, dtype)
    return kernel


def has_symbols(value: Any) -> bool:
    """Attributes with symbolic sizes, e.g. a gradient expanded back to a window of length ``T - t``."""
    if isinstance(value, Expr):
        return True
    if isinstance(value, dict):
        return any(has_symbols(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return any(has_symbols(v) for v in value)
    if isinstance(value, slice):
        return any(has_symbols(v) for v in (value.start, value.stop, value.step))
    return False


def _concrete(value: Any, env: Mapping[Symbol, int]) -> Any:
    """``value`` with every symbolic size evaluated at the point being computed."""
    if isinstance(value, Expr):
        return value.evaluate(env)
    if isinstance(value, (tuple, list)):
        return type(value)(_concrete(v, env) for v in value)
    if isinstance(value, slice):
        return slice(*(_concrete(v, env) for v in (value.start, value.stop, value.step)))
    return value


def call_user(node: Node, point: tuple[int, ...], call: Any) -> Any:
    """Run a user's source, sink or UDF function; what it raises reaches the user as a `UserCodeError` naming
    the op, the line that created it, the point and the line that raised, with the original chained."""
    try:
        return call()
    except TimeRLError:
        raise
    except Exception as error:
        kind = node.category.name  # a source, a sink or a udf
        raise user_code_error(f"{node.label()}: the {kind} function failed at {point_dict(node.domain, point)}",
                              error) from error


def _check_shape(node: Node, value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    if tuple(value.shape) != tuple(shape):
        if value.size == int(np.prod(shape)) and value.ndim <= 1 and len(shape) <= 1:
            return value.reshape(shape)
        raise ShapeError(f"{node.label()} returned shape {tuple(value.shape)}, declared {tuple(shape)}")
    return value


class StackedContributions:
    """Gradient contributions that are the rows of one batched array (a vectorized statement's result), in
    the order of their consumer points: iterated like the list of (point, value) pairs it stands for, and
    summed as one reduction where each contribution counts whole."""

    def __init__(self, points: list[tuple[int, ...]], stacked: Any, backend: Any) -> None:
        self.points, self.stacked, self.backend = points, stacked, backend

    def __iter__(self):
        return ((q, self.backend.row(self.stacked, k)) for k, q in enumerate(self.points))

    def total(self) -> Any:
        return self.backend.xp.sum(self.stacked, axis=0)


def _whole_stacks(inputs: list[Any], attrs: dict) -> bool:
    """Every input of a gradient accumulation is a `StackedContributions` whose contributions count whole."""
    return bool(inputs) and all(isinstance(c, StackedContributions) and not window
                                for c, window in zip(inputs, attrs["windows"]))


def accumulate_gradient(node: Node, point: tuple[int, ...], inputs: list[Any], attrs: dict,
                        bounds: Mapping[Symbol, int], backend: Any) -> Any:
    """Sum of gradient contributions read through inverted dependences (see `timerl.rt.autodiff`).

    Each input is a list of (consumer point q, contribution at q); ``windows`` says, for a forward range
    read, where this point sits inside the window read at q."""
    if _whole_stacks(inputs, attrs):  # one reduction per input, no zeros of a shape that may change per point
        total = inputs[0].total()
        for contributions in inputs[1:]:
            total = total + contributions.total()
        return backend.cast(total, attrs["dtype"])
    here = dict(zip(node.domain, point))
    total = backend.zeros(_concrete(tuple(attrs["shape"]), {**bounds, **here}), attrs["dtype"])
    for contributions, window in zip(inputs, attrs["windows"]):
        for q, value in contributions:
            selected = value
            for dim, start, step, consumer_domain in window:
                begin = compile_function((start.substitute(bounds),), tuple(consumer_domain))(*q)[0]
                selected = selected[(here[dim] - begin) // step]
            total = total + selected
    return backend.cast(total, attrs["dtype"])
