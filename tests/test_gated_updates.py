"""Optimizer steps under ``ctx.when(...)``: where the condition is false the parameters (and Adam's moments and
step count) stay as they are, so a warm-up or an update every K steps matches torch.optim step for step;
`nn` modules evaluated with other weights of the same shape (a Polyak-averaged target network)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import timerl as trl
from tests.conftest import collect, run

STEPS, WARMUP, EVERY = 12, 4, 3
DATA = np.random.default_rng(0).normal(size=(STEPS, 5, 3)).astype(np.float32)
TARGETS = np.random.default_rng(1).normal(size=(STEPS, 5)).astype(np.float32)
INITIAL = np.array([0.3, -0.2, 0.1], np.float32)


def gated_program(optimizer: str, gate):
    """A linear regression whose step at t runs where ``gate(t)`` holds."""
    ctx = trl.Context("t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    with ctx:
        w = trl.param(INITIAL, domain=(t,))
        x = trl.source(lambda p: DATA[p["t"]], shape=(5, 3), domain=(t,))
        y = trl.source(lambda p: TARGETS[p["t"]], shape=(5,), domain=(t,))
        loss = ((x @ w - y) ** 2).mean()
        loss.backward()
        with ctx.when(gate(t)):
            if optimizer == "adam":
                trl.optim.Adam([w], lr=0.1).step()
            else:
                trl.optim.SGD([w], lr=0.1).step()
        weights = collect(w)
    return ctx, {T: STEPS}, weights


def torch_loop(optimizer: str, gate) -> list[np.ndarray]:
    w = torch.tensor(INITIAL, requires_grad=True)
    opt = torch.optim.Adam([w], lr=0.1) if optimizer == "adam" else torch.optim.SGD([w], lr=0.1)
    seen = []
    for step in range(STEPS):
        seen.append(w.detach().numpy().copy())
        if gate(step):
            opt.zero_grad()
            ((torch.tensor(DATA[step]) @ w - torch.tensor(TARGETS[step])) ** 2).mean().backward()
            opt.step()
    return seen


GATES = {"warmup": lambda t: t >= WARMUP, "every": lambda t: t % EVERY == 0}


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
@pytest.mark.parametrize("gate", sorted(GATES))
def test_gated_step_matches_torch(backend, optimizer, gate):
    ctx, bounds, _ = gated_program(optimizer, GATES[gate])
    (weights,) = run(ctx, bounds, backend)
    want = torch_loop(optimizer, GATES[gate])
    for step in range(STEPS):
        np.testing.assert_allclose(weights[(step,)], want[step], rtol=2e-5, atol=2e-6)
    assert not np.allclose(weights[(STEPS - 1,)], INITIAL)


def test_modules_run_with_other_weights(compiled_backend):
    """A target network as a Polyak average of the online weights, a recurrence, fed to the same MLP."""
    tau, steps = 0.25, 6
    ctx = trl.Context("t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    inputs = np.random.default_rng(2).normal(size=(4, 3)).astype(np.float32)
    with ctx:
        online = trl.nn.MLP([3, 8, 2], domain=(t,), seed=0, flat=True)
        x = trl.tensor(inputs)
        loss = (online(x) ** 2).mean()
        loss.backward()
        trl.optim.SGD(online.parameters(), lr=0.5).step()
        (w,) = online.parameters()
        target = trl.placeholder(tuple(w.shape), domain=(t,))
        target[0] = w[0].detach()
        target[t + 1] = tau * w[t + 1].detach() + (1 - tau) * target[t]
        out = collect(online.using(target)(x))
        online_weights, target_weights = collect(w), collect(target)
    run(ctx, {T: steps}, compiled_backend)
    expected_target = online_weights[(0,)]
    layers = [torch.nn.Linear(3, 8), torch.nn.Linear(8, 2)]
    for step in range(steps):
        np.testing.assert_allclose(target_weights[(step,)], expected_target, rtol=1e-5, atol=1e-6)
        flat, offset = torch.tensor(expected_target), 0
        with torch.no_grad():
            for layer in layers:
                for tensor in (layer.weight, layer.bias):
                    tensor.copy_(flat[offset:offset + tensor.numel()].reshape(tensor.shape))
                    offset += tensor.numel()
            want = layers[1](torch.tanh(layers[0](torch.tensor(inputs)))).numpy()
        np.testing.assert_allclose(out[(step,)], want, rtol=1e-5, atol=1e-5)
        if step + 1 < steps:
            expected_target = tau * online_weights[(step + 1,)] + (1 - tau) * expected_target
    assert not np.allclose(target_weights[(steps - 1,)], online_weights[(steps - 1,)])


def test_gate_on_an_inner_dimension_is_refused():
    ctx = trl.Context("i m")
    i, m = ctx.dims
    with ctx:
        w = trl.param(INITIAL, domain=(i, m))
        (w * w).sum().backward()
        with ctx.when(m >= 1), pytest.raises(trl.TimeRLError, match="outermost one"):
            trl.optim.SGD([w], lr=0.1).step()
