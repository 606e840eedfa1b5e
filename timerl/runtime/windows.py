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
    group cannot be batched. A window may flow through elementwise ops and a cumulative sum along it, and must
    end in a sum over it (``discounted_sum``, or ``sum`` over dim 0), inside the group."""
    windowed: set[int] = set()
    for member_id in group.members:
        node = graph.nodes[member_id]
        category = node.category
        if category is CONST:
            continue
        if has_symbols(node.attrs.as_dict()):
            return None
        if category is ACCUMULATE:
            if any(node.attrs["windows"]) or any(e.ranges() or e.condition is not TRUE for e in node.inputs):
                return None
            if static_bytes(node) is None:
                return None
            continue
        if category is SINK:
            if any(e.producer in windowed or not simple_read(e) for e in node.inputs):
                return None
            continue  # called point by point once the batch is computed
        if category.batched == "selected":  # a merge: its inputs are other groups' points, gathered as they are
            if any(e.ranges() or e.masked_by is not None or e.producer in group.members or e.producer in windowed
                   for e in node.inputs) or static_bytes(node) is None:
                return None
            continue
        if category.batched == "never":
            return None
        definition = OPS[node.op]
        if isinstance(definition.impl, Unsupported) or definition.check_values is not None:
            return None
        ranged = [e for e in node.inputs if e.ranges()]
        for edge in node.inputs:
            if edge.ranges():
                producer = graph.nodes[edge.producer]
                if (len(edge.ranges()) != 1 or edge.ranges()[0].step != 1 or edge.masked_by is not None
                        or edge.condition is not TRUE or static_bytes(producer) is None):
                    return None
            elif not simple_read(edge):
                return None
        from_window = ranged or any(e.producer in windowed for e in node.inputs)
        if not from_window:
            if static_bytes(node) is None:
                return None
            continue
        window = definition.window(node.attrs)
        if window == WINDOW_REDUCED:
            if static_bytes(node) is None:
                return None
            continue
        if window == WINDOW_CARRIED:
            if member_id in group.freed_later:
                return None  # a window stored for other groups would need its padding undone
            windowed.add(member_id)
            continue
        return None
    return windowed
