"""Programs at the edges of the language get a clear `TimeRLError` naming the user's line, never a crash in
generated code or isl: reserved or non-ASCII dimension names, a zero slice step, ``expand(-1, ...)`` into a
new dimension, a bound given twice, an integer tensor requiring gradients, a tensor made outside ``with ctx:``.
Names that are only unusual (Python builtins, names the generated code uses) work on every backend."""

from __future__ import annotations

import keyword

import numpy as np
import pytest
import torch
from conftest import collect, run

import timerl as trl
from timerl.rt.context import ISL_WORDS

HERE = r"test_edge_errors\.py:\d+"


@pytest.mark.parametrize("name", ["if", "None", "class", "lambda", "min", "max", "floor", "mod", "exists", "NaN",
                                  "t\u00e9", "\u03c4", "1t", "a-b"])
def test_reserved_or_foreign_dimension_names_are_refused(name):
    with pytest.raises(trl.TimeRLError, match=HERE):
        trl.Context(dims=["i", name])


def test_every_reserved_word_is_refused():
    for name in sorted(set(keyword.kwlist) | ISL_WORDS):
        with pytest.raises(trl.TimeRLError, match=HERE):
            trl.Context(dims=name)


@pytest.mark.parametrize("name", ["print", "np", "point", "load", "m", "error", "SKIP", "BOUNDS", "v0_0", "S0",
                                  "int", "match", "T"])
def test_unusual_dimension_names_work(backend, name):
    """A window sum and a recurrence over a dimension named like things the generated code or Python uses."""
    ctx = trl.Context(dims=["i", name])
    (i, d), (I, D) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.float32(p[name] + 10 * p["i"]), (), "float32", (i, d))
        s = trl.placeholder((), "float32", domain=(i, d))
        s[i, 0] = x[i, 0]
        s[i, d + 1] = s[i, d] + x[i, d:D].sum(0)
        values = collect(s)
    run(ctx, {I: 2, D: 3}, backend)
    for k in range(2):
        window = [sum(10 * k + j for j in range(m, 3)) for m in range(3)]
        expected = np.cumsum([10 * k] + window[:-1])  # the right side is read at the point before the target
        assert [float(values[(k, m)]) for m in range(3)] == list(expected)


def test_spatial_and_expand_mistakes():
    with trl.Context(dims="t"):
        x = trl.zeros((4, 1))
        for key in [slice(None, None, 0), (slice(0, 2), slice(None, None, 0)), 0.5, (slice(0.5, 2),), True]:
            with pytest.raises(trl.ShapeError, match=HERE):
                x.spatial[key]
        assert x.spatial[::2].shape == (2, 1) and x.spatial[..., 0].shape == (4,)
        with pytest.raises(trl.ShapeError, match=HERE + ".*new leading dimension"):
            x.expand(-1, 4, 3)
        with pytest.raises(trl.ShapeError, match=HERE):
            x.expand(3)
        assert x.expand(-1, 3).shape == (4, 3) and x.expand(2, -1, 5).shape == (2, 4, 5)
        assert tuple(torch.zeros(4, 1).expand(2, -1, 5).shape) == (2, 4, 5)  # PyTorch's rule


def test_a_bound_given_twice():
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        trl.zeros((), domain=(t,)).sink(lambda p, v: None)
    with pytest.raises(trl.TimeRLError, match=HERE + ".*given twice"):
        ctx.compile(bounds={T: 3, "T": 4}, backend="reference")


def test_integer_placeholders_cannot_require_gradients():
    with trl.Context(dims="t") as ctx:
        for dtype in ("int64", "int32", "bool", "uint8"):
            with pytest.raises(trl.TimeRLError, match=HERE + ".*floating-point"):
                trl.placeholder((2,), dtype, domain=ctx.dims, requires_grad=True)
        assert trl.placeholder((2,), "float64", domain=ctx.dims, requires_grad=True).dtype == "float64"


def test_a_tensor_made_outside_its_context_names_the_line():
    ctx = trl.Context(dims="t")
    with ctx:
        trl.zeros((2,))
    for make in (lambda: trl.zeros((2,)), lambda: trl.source(lambda p: 0.0), lambda: trl.rand(()),
                 lambda: trl.placeholder((2,), domain=ctx.dims)):
        with pytest.raises(trl.TimeRLError, match=HERE + ".*with ctx:"):
            make()
