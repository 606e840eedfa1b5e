"""An op's check of input values (`ValueCheck`: an index in range, an integer power) run once over a batched
statement's points (`timerl.runtime.batch`), so that a checked op batches like any other."""

from __future__ import annotations

from typing import Any, Callable

from timerl.ops.registry import OPS
from timerl.pdg.graph import Node


def batched_check(node: Node, axes: tuple, backend: Any) -> Callable | None:
    """``node``'s check (`ValueCheck.find`) over the whole batch, as a function of the member's inputs (``axes``:
    0 where an input is batched on its leading axis, None where it is the same at every point) returning
    ``(bad, (index of the first bad point in the batch, its details...))``, or None where the types and shapes
    rule a failure out; None for an op without a check. The check is the op's own, mapped over the batch like its
    kernel (the array library's vmap), written with array calls only so that jax traces it inside the statement's
    one jitted call and the host reads one flag after it."""
    check = OPS[node.op].check_values
    if check is None:
        return None
    attrs, xp = node.attrs.as_dict(), backend.xp
    axes = axes[:len(node.inputs)]  # (a window reduction's mask is not checked)

    def at_point(*values: Any) -> Any:
        found = check.find(xp, *values, **attrs)
        if found is None:
            return None
        return found[0], tuple(xp.asarray(d, dtype=xp.int64) for d in found[1])

    def over_batch(*values: Any) -> tuple | None:
        values = values[:len(axes)]
        if not any(a == 0 for a in axes):
            found = at_point(*values)
            return None if found is None else (found[0], (xp.asarray(0, dtype=xp.int64), *found[1]))
        if at_point(*(v[0] if a == 0 else v for v, a in zip(values, axes))) is None:
            return None  # the types and shapes rule the failure out, at every point alike
        bad, details = backend.vmap(at_point, axes)(*values)
        first = xp.argmax(xp.astype(bad, xp.int32))
        return xp.any(bad), (xp.astype(first, xp.int64), *(d[first] for d in details))

    return over_batch
