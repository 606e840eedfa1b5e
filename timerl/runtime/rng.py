"""Per-point random draws, identical on every backend: each point gets its own generator, seeded by
(seed, node, point), so a draw never depends on the order points are evaluated in."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def draw(seed: int, node_id: int, point: Sequence[int], shape: Sequence[int], dtype: str, normal: bool) -> np.ndarray:
    generator = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, node_id, *point])))
    kind = np.float32 if dtype == "float32" else np.float64
    values = generator.standard_normal(tuple(shape), dtype=kind) if normal else generator.random(tuple(shape), kind)
    return values.astype(dtype, copy=False)
