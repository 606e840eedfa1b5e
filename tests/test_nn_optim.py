"""Optimizers against torch.optim, an MLP policy-gradient step against eager PyTorch, and the distributions
against torch.distributions."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_values, collect, run

import timerl as trl

ITERATIONS = 6
A = np.random.default_rng(0).normal(size=(4, 3))
B = np.random.default_rng(1).normal(size=(4,))
W0 = np.array([0.5, -1.0, 2.0])


def quadratic(w):
    """sum((A @ w - B)**2): the same formula on an RT and on a torch tensor."""
    if isinstance(w, torch.Tensor):
        residual = torch.tensor(A) @ w - torch.tensor(B)
    else:
        residual = trl.tensor(A, dtype="float64") @ w - trl.tensor(B, dtype="float64")
    return (residual * residual).sum()


def trajectory(backend, make_optimizer, make_lr=None):
    """Parameter values at i = 0 .. I-1 of trl, minimizing `quadratic` with ``make_optimizer(params, lr)``."""
    ctx = trl.Context(dims="i")
    (i,), (I,) = ctx.dims, ctx.bounds
    with ctx:
        w = trl.param(W0, dtype="float64")
        lr = make_lr(i) if make_lr else 0.05
        quadratic(w).backward()
        make_optimizer([w], lr).step()
        store = collect(w)
    run(ctx, {I: ITERATIONS}, backend)
    return store


def torch_trajectory(make_optimizer, lr_at=lambda k: 0.05):
    w = torch.tensor(W0, requires_grad=True)
    optimizer = make_optimizer([w], lr_at(0))
    values = {}
    for k in range(ITERATIONS):
        values[(k,)] = w.detach().numpy().copy()
        for group in optimizer.param_groups:
            group["lr"] = lr_at(k)
        optimizer.zero_grad()
        quadratic(w).backward()
        optimizer.step()
    return values


def test_sgd_matches_torch(backend):
    got = trajectory(backend, lambda params, lr: trl.optim.SGD(params, lr))
    assert_values(got, torch_trajectory(lambda params, lr: torch.optim.SGD(params, lr=lr)), rtol=1e-10, atol=1e-12)




def test_adam_matches_torch(backend):
    got = trajectory(backend, lambda params, lr: trl.optim.Adam(params, lr, betas=(0.8, 0.99), eps=1e-6))
    want = torch_trajectory(lambda params, lr: torch.optim.Adam(params, lr=lr, betas=(0.8, 0.99), eps=1e-6))
    assert_values(got, want, rtol=1e-9, atol=1e-11)


def decaying_lr(i):
    """lr[0] = 0.1, lr[i] = lr[i-1] * 0.9: a schedule written as a recurrence."""
    lr = trl.placeholder((), "float64", domain=(i,))
    lr[0] = 0.1
    lr[i + 1] = lr[i] * 0.9
    return lr


@pytest.mark.parametrize("name", ["SGD", "Adam"])
def test_learning_rate_schedule_plugs_in(backend, name):
    got = trajectory(backend, getattr(trl.optim, name), make_lr=decaying_lr)
    want = torch_trajectory(getattr(torch.optim, name), lr_at=lambda k: 0.1 * 0.9 ** k)
    assert_values(got, want, rtol=1e-9, atol=1e-11)


def test_optimizer_errors():
    ctx = trl.Context(dims="i")
    with ctx:
        with pytest.raises(trl.TimeRLError, match="trl.param"):
            trl.optim.SGD([trl.tensor(np.ones(2))], 0.1)
        w = trl.param(W0, dtype="float64")
        with pytest.raises(trl.TimeRLError, match="backward"):
            trl.optim.SGD([w], 0.1).step()


# ---- networks -------------------------------------------------------------------------------------------------


def test_linear_init_and_parameters():
    ctx = trl.Context(dims="i")
    with ctx:
        layer = trl.nn.Linear(16, 4, seed=3)
        again = trl.nn.Linear(16, 4, seed=3)
        net = trl.nn.MLP([16, 8, 8, 2])
    weight = layer.weight.node.inputs[0]
    init = ctx.nodes[weight.producer].attrs["value"]
    assert init.shape == (4, 16) and np.abs(init).max() <= 0.25 and np.abs(init).max() > 0.15
    assert np.array_equal(init, ctx.nodes[again.weight.node.inputs[0].producer].attrs["value"])
    assert [tuple(p.shape) for p in layer.parameters()] == [(4, 16), (4,)]
    assert [tuple(p.shape) for p in net.parameters()] == [(8, 16), (8,), (8, 8), (8,), (2, 8), (2,)]
    assert all(p.requires_grad and p.domain == ctx.dims for p in net.parameters())
    unseeded = ctx.nodes[net.parameters()[0].node.inputs[0].producer].attrs["value"]
    assert not np.array_equal(init[:, :8], unseeded[:4])
    with pytest.raises(trl.TimeRLError, match="activation"), ctx:
        trl.nn.MLP([2, 2], activation="swish")


BATCH, STEPS_PER_ITER, OBS, ACTIONS = 5, 3, 4, 3
POLICY_ITERATIONS = 3


def episode_data(seed):
    generator = np.random.default_rng(seed)
    return (generator.normal(size=(POLICY_ITERATIONS, STEPS_PER_ITER, BATCH, OBS)),
            generator.integers(0, ACTIONS, size=(POLICY_ITERATIONS, STEPS_PER_ITER, BATCH)),
            generator.normal(size=(POLICY_ITERATIONS, STEPS_PER_ITER, BATCH)))


def test_mlp_policy_gradient_matches_torch(backend):
    """loss[i, t] = -(log_prob(action) * advantage) summed; SGD on the MLP's parameters for I iterations."""
    obs, actions, advantages = episode_data(0)
    ctx = trl.Context(dims="i t")
    (i, t), (I, T) = ctx.dims, ctx.bounds
    with ctx:
        policy = trl.nn.MLP([OBS, 8, ACTIONS], activation="tanh")
        o = trl.source(lambda p: obs[p["i"], p["t"]], (BATCH, OBS), "float32", (i, t))
        a = trl.source(lambda p: actions[p["i"], p["t"]], (BATCH,), "int64", (i, t))
        adv = trl.source(lambda p: advantages[p["i"], p["t"]], (BATCH,), "float32", (i, t))
        dist = trl.distributions.Categorical(logits=policy(o))
        (-(dist.log_prob(a) * adv)).backward()
        grads = [collect(p.grad) for p in policy.parameters()]
        values = [collect(p) for p in policy.parameters()]
        trl.optim.SGD(policy.parameters(), lr=0.1).step()
    run(ctx, {I: POLICY_ITERATIONS, T: STEPS_PER_ITER}, backend)

    torch_params = [torch.tensor(store[(0,)], requires_grad=True) for store in values]
    optimizer = torch.optim.SGD(torch_params, lr=0.1)
    for k in range(POLICY_ITERATIONS):
        for store, tensor in zip(values, torch_params):
            np.testing.assert_allclose(store[(k,)], tensor.detach().numpy(), rtol=1e-5, atol=1e-6)
        optimizer.zero_grad()
        w1, b1, w2, b2 = torch_params
        x = torch.tensor(obs[k], dtype=torch.float32)
        logits = torch.tanh(x @ w1.T + b1) @ w2.T + b2
        log_probs = torch.distributions.Categorical(logits=logits).log_prob(torch.tensor(actions[k]))
        (-(log_probs * torch.tensor(advantages[k], dtype=torch.float32))).sum().backward()
        for store, tensor in zip(grads, torch_params):
            np.testing.assert_allclose(store[(k,)], tensor.grad.numpy(), rtol=1e-4, atol=1e-5)
        optimizer.step()


# ---- distributions ------------------------------------------------------------------------------------------


def test_categorical_against_torch(backend):
    logits = np.random.default_rng(4).normal(size=(2, ACTIONS)).astype(np.float32)
    actions = np.array([2, 0])
    ctx = trl.Context(dims="t")
    with ctx:
        dist = trl.distributions.Categorical(logits=trl.tensor(logits))
        log_prob, entropy = collect(dist.log_prob(trl.tensor(actions))), collect(dist.entropy())
    run(ctx, {}, backend)
    reference = torch.distributions.Categorical(logits=torch.tensor(logits))
    assert_values(log_prob, {(): reference.log_prob(torch.tensor(actions)).numpy()})
    assert_values(entropy, {(): reference.entropy().numpy()})


def test_categorical_samples_follow_probabilities(backend):
    probs = np.array([0.2, 0.5, 0.3], dtype=np.float32)
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        logits = trl.tensor(np.log(np.tile(probs, (500, 1))), domain=(t,))
        samples = trl.distributions.Categorical(logits=logits).sample()
        assert samples.dtype == "int64" and samples.shape == (500,) and samples.domain == (t,)
        store = collect(samples)
    first = {k: v.copy() for k, v in run(ctx, {T: 4}, backend, seed=7)[0].items()}
    again = run(ctx, {T: 4}, backend, seed=7)[0]
    assert all(np.array_equal(first[k], again[k]) for k in first)
    drawn = np.concatenate([store[(k,)] for k in range(4)])
    assert not np.array_equal(store[(0,)], store[(1,)])
    np.testing.assert_allclose(np.bincount(drawn, minlength=3) / drawn.size, probs, atol=0.04)


def test_normal_against_torch(backend):
    mean = np.random.default_rng(5).normal(size=(3,)).astype(np.float32)
    std = np.array([0.5, 1.0, 2.0], dtype=np.float32)
    value = np.array([0.1, -0.3, 1.5], dtype=np.float32)
    ctx = trl.Context(dims="t")
    with ctx:
        dist = trl.distributions.Normal(trl.tensor(mean), trl.tensor(std))
        log_prob, entropy = collect(dist.log_prob(trl.tensor(value))), collect(dist.entropy())
        samples = collect(trl.distributions.Normal(trl.zeros((4000,)), 2.0).sample() + 1.0)
    run(ctx, {}, backend)
    reference = torch.distributions.Normal(torch.tensor(mean), torch.tensor(std))
    assert_values(log_prob, {(): reference.log_prob(torch.tensor(value)).numpy()})
    assert_values(entropy, {(): reference.entropy().numpy()})
    drawn = samples[()]
    assert abs(drawn.mean() - 1.0) < 0.15 and abs(drawn.std() - 2.0) < 0.15


def test_normal_rsample_is_differentiable(backend):
    """d/d(mean, std) of sum(rsample) is (n, sum(noise)): the reparameterization gradient."""
    ctx = trl.Context(dims="t")
    with ctx:
        mean = trl.tensor(np.zeros(3), dtype="float64", requires_grad=True)
        std = trl.tensor(np.ones(3), dtype="float64", requires_grad=True)
        draw = trl.distributions.Normal(mean, std).rsample()
        draw.backward()
        grads, drawn = collect(mean.grad), collect(draw)
        std_grad = collect(std.grad)
    run(ctx, {}, backend)
    assert_values(grads, {(): np.ones(3)})
    assert_values(std_grad, {(): drawn[()]})
