"""Bytes of a node's points, when its shapes are plain ints: what the pool, the lowering and the vectorized
statements account (`timerl.runtime.memory`), and what the scheduler weighs to order a loop body
(`timerl.sched.schedule`)."""

from __future__ import annotations

import math

import numpy as np

from timerl.pdg.graph import Node


def static_bytes(node: Node) -> int | None:
    """Bytes of one point of ``node``'s outputs, when every size is a plain int."""
    total = 0
    for k in range(len(node.outputs)):
        size = output_bytes(node, k)
        if size is None:
            return None
        total += size
    return total


def output_bytes(node: Node, k: int) -> int | None:
    """Bytes of output ``k`` at one point of ``node``, when its size is a plain int."""
    produced = node.outputs[k]
    if not all(isinstance(d, int) for d in produced.shape):
        return None
    return math.prod(produced.shape) * np.dtype(produced.dtype).itemsize
