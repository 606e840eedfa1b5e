"""Windows of changing length in a vectorized statement (`timerl.runtime.batch`): which members hold a padded
window at each point, and a reduction over a padded window with its tail masked out."""

from __future__ import annotations

from typing import Any, Callable

from timerl.ops.registry import ACCUMULATE, CONST, OPS, SINK, WINDOW_CARRIED, WINDOW_REDUCED, Unsupported
from timerl.pdg.graph import Graph
from timerl.pdg.sizes import static_bytes
from timerl.runtime.evaluate import has_symbols
from timerl.runtime.plan import simple_read
from timerl.symbolic import TRUE


def masked_reduction(kernel: Callable, xp: Any, batched: bool = False) -> Callable:
    """``kernel`` on a padded window whose positions past the end (``valid`` false) are set to zero, the
    identity of the sums this is allowed for; ``batched``: the window and mask carry a leading batch axis.
    Called as ``masked(value, *others, valid)``: only the summed ``value`` is masked (a discounted sum's episode
    ends past the window's end weigh zeros)."""
    lead = 2 if batched else 1

    def masked(value: Any, *others_and_valid: Any) -> Any:
        others, valid = others_and_valid[:-1], others_and_valid[-1]
        keep = xp.reshape(valid, tuple(valid.shape) + (1,) * (value.ndim - lead))
        return kernel(xp.where(keep, value, xp.zeros_like(value)), *others)

    return masked


def windowed_members(graph: Graph, group: Any) -> set[int] | None:
    """The members whose values at a point are windows of a range read (padded in a batch), or None when the
    group cannot be batched (`batch_refusal` says why)."""
    found = _windows(graph, group)
    return None if isinstance(found, str) else found


def batch_refusal(graph: Graph, group: Any) -> str | None:
    """Why a group cannot run as one batched statement, in words naming the member and the property of the
    program that refuses; None when it can."""
    found = _windows(graph, group)
    return found if isinstance(found, str) else None


def _windows(graph: Graph, group: Any) -> set[int] | str:
    """`windowed_members`, or the reason the group cannot be batched. A window may flow through elementwise ops
    and a cumulative sum along it, and must end in a sum over it (``discounted_sum``, or ``sum`` over dim 0),
    inside the group. An op's check of input values (an index in range) runs once over the whole batch."""
    windowed: set[int] = set()
    for member_id in group.members:
        node = graph.nodes[member_id]
        category = node.category
        if category is CONST or category.batched == "evaluated":
            continue
        if has_symbols(node.attrs.as_dict()):
            return f"{node.label()} has attributes that depend on the point (a size or index written with a dimension)"
        if category is ACCUMULATE:
            if any(node.attrs["windows"]) or any(e.ranges() or e.condition is not TRUE for e in node.inputs):
                return f"{node.label()} sums gradient contributions read over ranges or under conditions"
            if static_bytes(node) is None:
                return f"{node.label()} has a size that depends on the point"
            continue
        if category is SINK:
            if any(e.producer in windowed or not simple_read(e) for e in node.inputs):
                return f"{node.label()} is a sink of a window or of a read that is not a plain point"
            continue  # called point by point once the batch is computed
        if category.batched == "selected":  # a merge: its inputs are other groups' points, gathered as they are
            if any(e.ranges() or e.masked_by is not None or e.producer in group.members or e.producer in windowed
                   for e in node.inputs) or static_bytes(node) is None:
                return (f"{node.label()} is a piecewise definition whose branch reads a range or its own "
                        "statement, or whose size depends on the point")
            continue
        if category.batched == "never":
            return f"{node.label()} {_NEVER.get(category.name, 'runs point by point')}"
        definition = OPS[node.op]
        if isinstance(definition.impl, Unsupported):
            return f"{node.label()} has no array kernel: {definition.impl.reason}"
        ranged = [e for e in node.inputs if e.ranges()]
        for edge in node.inputs:
            if edge.ranges():
                producer = graph.nodes[edge.producer]
                if (len(edge.ranges()) != 1 or edge.ranges()[0].step != 1 or edge.masked_by is not None
                        or edge.condition is not TRUE or static_bytes(producer) is None):
                    return (f"{node.label()} reads a window that is not one unit-step range of a fixed-size value "
                            "(several ranges, a step, a mask or a condition)")
            elif not simple_read(edge):
                return f"{node.label()} reads its input through an index the batch cannot gather"
        from_window = ranged or any(e.producer in windowed for e in node.inputs)
        if not from_window:
            if static_bytes(node) is None:
                return f"{node.label()} has a size that depends on the point"
            continue
        if definition.check_values is not None:
            return (f"{node.label()} checks the values of a padded window (the padding would be checked too); "
                    "apply it before the window is read")
        window = definition.window(node.attrs)
        if window == WINDOW_REDUCED:
            if static_bytes(node) is None:
                return f"{node.label()} has a size that depends on the point"
            continue
        if window == WINDOW_CARRIED:
            if member_id in group.freed_later:
                return (f"{node.label()} is a window that other statements read (its padding would need undoing); "
                        "reduce the window in the statement that computes it")
            windowed.add(member_id)
            continue
        return f"{node.label()} does not pass a window through ({node.op} has no window rule)"
    return windowed


_NEVER = {"source": "calls a user's source function, point by point",
          "draw": "draws random numbers, point by point",
          "udf": "calls a user's function (an environment step), point by point"}
