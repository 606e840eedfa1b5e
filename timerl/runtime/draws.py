"""Random draws computed ahead (plan once, run many): a draw depends only on its point (`timerl.runtime.rng`), so
the draws of a run of points, and the elementwise values computed from them alone, can come at the run's first
point, one array computation instead of one per point (`timerl.runtime.fusions.draw_chains`)."""

from __future__ import annotations

from typing import Any, Callable

from timerl.ops.special import draws_normal
from timerl.pdg.graph import Node
from timerl.runtime import rng
from timerl.runtime.evaluate import bound_kernel


class DrawPrefetch:
    """A draw and the elementwise chain computed from it for a run of ``CHUNK`` points along the innermost
    dimension at once, at the run's first point; each point then takes its row of the results. The run's bytes
    are held in the pool until its last point is taken (or the next run, or the end of the run), so memory stays
    independent of the dimension's length."""

    CHUNK = 32

    def __init__(self, draw: Node, chain: list[Node], count: int, seed: int, backend: Any, point_bytes: int,
                 kept: list[int] | None = None) -> None:
        attrs = draw.attrs.as_dict()
        self.draw = (seed, attrs["stream"], attrs["shape"], attrs["dtype"], draws_normal(draw.op))
        position = {m.id: k for k, m in enumerate(chain)}
        self.steps = [(bound_kernel(m, backend), [position[e.producer] for e in m.inputs]) for m in chain[1:]]
        self.count = count
        self.backend = backend
        self.point_bytes = point_bytes  # of the draw and its chain at one point
        self.kept = list(range(len(chain))) if kept is None else kept  # the chain's values a point takes
        self.reset(None)

    def reset(self, hold: Callable[[int], None] | None) -> None:
        """A new run, whose pool accounts the held bytes through ``hold``."""
        self.hold = hold
        self.run: tuple | None = None  # (outer point, first k)
        self.rows: list[tuple] = []
        self.held = 0

    def __call__(self, point: tuple) -> tuple:
        outer, k = point[:-1], point[-1]
        first = k - k % self.CHUNK
        if self.run != (outer, first):
            self._compute(outer, first)
        row = self.rows[k - first]
        if k - first == len(self.rows) - 1:
            self._release()
        return row

    def _compute(self, outer: tuple, first: int) -> None:
        self._release()
        seed, stream, shape, dtype, normal = self.draw
        points = [outer + (k,) for k in range(first, min(first + self.CHUNK, self.count))]
        values = [self.backend.from_numpy(rng.draw_many(seed, stream, points, shape, dtype, normal))]
        for kernel, inputs in self.steps:
            values.append(kernel(*[values[j] for j in inputs]))
        self.rows = list(zip(*[self.backend.unstack(values[k]) for k in self.kept]))
        self.run = (outer, first)
        self.held = self.point_bytes * len(points)
        if self.hold is not None:
            self.hold(self.held)

    def _release(self) -> None:
        if self.held and self.hold is not None:
            self.hold(-self.held)
        self.run, self.rows, self.held = None, [], 0
