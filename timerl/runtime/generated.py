"""What the generated group functions of `timerl.runtime.plan` call besides kernels: the namespace they share,
the failure report naming the op and point, and the UDF call planned once."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from timerl.errors import ShapeError, TimeRLError
from timerl.pdg.graph import Graph, Node
from timerl.runtime.access import point_dict
from timerl.runtime.evaluate import call_user, evaluate
from timerl.runtime.host_values import owned_array
from timerl.symbolic import Symbol

SKIP = object()  # what a reader returns where its edge's condition does not hold


def udf_call(node: Node, backend: Any) -> Callable[[tuple, list], tuple]:
    """A UDF at a point: its inputs as NumPy arrays, its outputs converted to the declared dtypes (what
    `evaluate` does for a udf, with everything that is the same at every point decided once). An output
    declared with no elements (an environment's order token) has no values to convert: it is one backend
    array made here, shared by every point."""
    attrs = node.attrs.as_dict()
    fn, names = attrs["fn"], [d.name for d in node.domain]
    declared = attrs["outputs"]
    dtypes = [np.dtype(t.dtype) for t in declared]
    to_numpy, from_numpy = backend.to_numpy, backend.from_user

    def asarray(value: Any, dtype: np.dtype, point: tuple) -> Any:
        return owned_array(value, dtype.name,
                           lambda: f"{node.label()}: the udf function failed at {dict(zip(names, point))}")

    empty = [backend.from_numpy(np.zeros(t.shape, d))
             if all(isinstance(n, int) for n in t.shape) and math.prod(t.shape) == 0 else None
             for t, d in zip(declared, dtypes)]
    if not any(e is not None for e in empty):
        def call(point: tuple, inputs: list) -> tuple:
            results = call_user(node, point, lambda: fn(dict(zip(names, point)), *[to_numpy(v) for v in inputs]))
            return tuple(from_numpy(asarray(v, d, point)) for v, d in zip(results, dtypes))

        return call
    converted = [(d, e) for d, e in zip(dtypes, empty)]

    def call_with_empty(point: tuple, inputs: list) -> tuple:
        results = call_user(node, point, lambda: fn(dict(zip(names, point)), *[to_numpy(v) for v in inputs]))
        return tuple(from_numpy(asarray(v, d, point)) if e is None else e for v, (d, e) in zip(results, converted))

    return call_with_empty


def _no_input() -> None:
    raise TimeRLError("internal error: no input of a merge is active at this point (a scheduling bug)")


def failure(graph: Graph) -> Callable[[int | None, tuple, Exception], None]:
    """A kernel failing is a shape mistake the rules could not see before running: name the op and point."""

    def fail(node_id: int | None, point: tuple, error: Exception) -> None:
        if node_id is None:
            raise error
        node = graph.nodes[node_id]
        raise ShapeError(f"{node.label()} failed at {point_dict(node.domain, point)}: {error}") from error

    return fail


def namespace(graph: Graph, bounds: Mapping[Symbol, int], backend: Any, seed: int) -> dict:
    """The globals every generated group function shares; the pool's methods are bound at each run."""
    return {"TimeRLError": TimeRLError, "SKIP": SKIP, "evaluate": evaluate, "SEED": seed, "BOUNDS": dict(bounds),
            "BACKEND": backend, "fail": failure(graph), "NO_INPUT": _no_input}
