"""Values that live only inside a group are freed after their last reader in the group, not when the group
returns, and the pool counts the most of them alive at once (`timerl.runtime.lifetimes.free_after_last_use`).
Before, a group of k layers held all k activations until its end (PPO's minibatch forward: 13 MiB of
transients at 64 x 100 steps, with the folded matmuls' products, which never exist, counted as well).

Peaks are compared across depths against the bytes the added layers' constants take (derived from the
shapes); values against the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl

ROWS, WIDTH = 8, 32
ACTIVATION = ROWS * WIDTH * 4  # one float32 intermediate of the chain


def chain(depth: int, backend: str, **options):
    """A group of ``depth`` dense layers ``tanh(y @ w + b)`` at each step, then a sum to a sink. Returns the
    executable, the sums per step and the bytes of the layers' constants (weights, biases)."""
    ctx = trl.Context("t")
    (t,), (T,) = ctx.dims, ctx.bounds
    rng = np.random.default_rng(0)
    sums: dict[int, float] = {}
    constant_bytes = 0
    with ctx:
        y = trl.source(lambda p: np.full((ROWS, WIDTH), 0.1 * (p["t"] + 1), np.float32), (ROWS, WIDTH),
                       "float32", (t,))
        for _ in range(depth):
            weight = rng.normal(0, 0.3, (WIDTH, WIDTH)).astype(np.float32)
            bias = rng.normal(0, 0.1, WIDTH).astype(np.float32)
            constant_bytes += weight.nbytes + bias.nbytes
            y = (y @ trl.tensor(weight) + trl.tensor(bias)).tanh()
        y.sum().sink(lambda p, v: sums.__setitem__(p["t"], float(v)))
    exe = ctx.compile({T: 3}, backend=backend, **options)
    exe.execute()
    return exe, sums, constant_bytes


@pytest.mark.parametrize("backend,options", [("torch", {}), ("torch", {"vectorize": False}), ("jax", {})])
def test_a_deeper_group_needs_only_its_constants_more(backend, options):
    shallow, _, shallow_constants = chain(2, backend, **options)
    deep, sums, deep_constants = chain(8, backend, **options)
    _, expected, _ = chain(8, "reference")
    assert sums.keys() == expected.keys()
    for step, value in expected.items():
        np.testing.assert_allclose(sums[step], value, rtol=1e-5)
    grown = deep.stats["peak_device_bytes"] - shallow.stats["peak_device_bytes"]
    # every activation dies at the next layer: six more layers add their constants and nothing else
    # (held to the end of the group, each would add two activations: the add's and the tanh's)
    assert grown == deep_constants - shallow_constants
    assert deep.stats["leaked_points"] == 0


def test_the_generated_group_deletes_each_intermediate_after_its_last_reader():
    # a property of a fused group: its options are stated, not left to TIMERL_PASS_OFF (fusion off: no group)
    exe, _, constant_bytes = chain(3, "torch", options=trl.CompileOptions(vectorize=False))
    sources = "\n".join(f.source for f in exe.group_functions.values())
    assert sources.count("del ") >= 3
    # the source's rows and one layer's input and output at once, never the three layers' activations
    assert exe.stats["peak_device_bytes"] - constant_bytes <= 3 * ACTIVATION
