"""Vectorized loops (timerl.runtime.batch): the same values as point-by-point execution and as the reference,
with the loop really batched."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl
from conftest import collect, run

STEPS, WIDTH = 7, 3


def policy_gradient_program():
    """A recurrent state over t (not vectorizable), a loss per step read after the recurrence, and the
    gradient of an MLP parameter summed over t: the loss and gradient loops are vectorizable."""
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        net = trl.nn.MLP([WIDTH, 8, 2], activation="tanh", domain=(i,))
        s = trl.placeholder((4, WIDTH), "float32", domain=(i, t))
        s[i, 0] = trl.randn((4, WIDTH), domain=(i,))
        s[i, t + 1] = s[i, t] * 0.9 + trl.rand((4, WIDTH), domain=(i, t))
        logits = net(s)
        reward = trl.source(lambda p: np.float32(np.sin(p["t"] + p["i"])), (), "float32", (i, t))
        loss = -(logits.log_softmax(-1).spatial[:, 0] * reward).mean()
        loss.backward()
        grads = [collect(p.grad) for p in net.parameters()]
        losses = collect(loss)
    return ctx, I, T, grads, losses


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_vectorized_loops_match_reference_and_unvectorized(backend):
    results = {}
    for name, target, options in (("reference", "reference", {}), ("vectorized", backend, {}),
                                  ("pointwise", backend, {"vectorize": False})):
        ctx, I, T, grads, losses = policy_gradient_program()
        exe = ctx.compile({I: 1, T: STEPS}, backend=target, **options)
        exe.execute()
        results[name] = ([dict(g) for g in grads], dict(losses))
        if name == "vectorized":
            assert exe.stats["batched_statements"] > 0
        if name == "pointwise":
            assert exe.stats["batched_statements"] == 0
    reference_grads, reference_losses = results["reference"]
    for name in ("vectorized", "pointwise"):
        grads, losses = results[name]
        assert sorted(losses) == sorted(reference_losses)
        for key, value in reference_losses.items():
            np.testing.assert_allclose(losses[key], value, rtol=1e-5, atol=1e-6)
        for got, want in zip(grads, reference_grads):
            assert sorted(got) == sorted(want)
            for key, value in want.items():
                np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-5, err_msg=f"{name} at {key}")
