"""The batched bincount op against NumPy's own bincount, row by row, on every backend."""

import numpy as np
from conftest import assert_values, collect, run

import timerl as trl
from timerl.rt import functional as F


def _bincount(index, weights, size, backend):
    """The collected result of the bincount op on ``backend``."""
    ctx = trl.Context(dims="t")
    with ctx:
        store = collect(F.apply("bincount", trl.tensor(index), trl.tensor(weights), size=size))
    run(ctx, {}, backend)
    return store


def test_bincount_matches_numpy_row_by_row(backend):
    generator = np.random.default_rng(3)
    index = generator.integers(0, 7, size=(2, 3, 9)).astype(np.int64)
    weights = generator.integers(-4, 5, size=(2, 3, 9)).astype(np.int64)
    got = _bincount(index, weights, 7, backend)
    want = np.stack([[np.bincount(i, w, minlength=7) for i, w in zip(rows_i, rows_w)]
                     for rows_i, rows_w in zip(index, weights)]).astype(np.int64)
    assert_values(got, {(): want})


def test_bincount_with_row_weights_is_one_histogram_per_row_entry(backend):
    # weights (..., J, R): each index adds a row; column r of the result is the bincount of weights[..., r]
    generator = np.random.default_rng(4)
    index = generator.integers(0, 6, size=(3, 10)).astype(np.int32)
    weights = generator.integers(-3, 4, size=(3, 10, 2)).astype(np.int32)
    got = _bincount(index, weights, 6, backend)
    want = np.stack([np.stack([np.bincount(i, w[:, r], minlength=6) for r in range(2)], 1)
                     for i, w in zip(index, weights)]).astype(np.int32)
    assert_values(got, {(): want})
