"""PPO: GAE against a NumPy loop, the loss and its gradients against eager PyTorch on the same batch, the
optimizer stepping along several update dimensions, and a short learning run. Long runs are in docs/algorithms/ppo.md."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_values, collect, run

import timerl as trl
from algorithms.ppo import gae, ppo_loss, train

ITERATIONS, STEPS, ENVS = 2, 7, 3
GAMMA, LAM = 0.9, 0.8


def numpy_gae(r, done, value, last_value):
    """CleanRL's loop (with episode ends marked on the step that ends them)."""
    adv = np.zeros_like(r)
    running = np.zeros(r.shape[1:])
    for t in reversed(range(r.shape[0])):
        next_value = last_value if t == r.shape[0] - 1 else value[t + 1]
        not_done = 1.0 - done[t]
        delta = r[t] + GAMMA * next_value * not_done - value[t]
        running = delta + GAMMA * LAM * not_done * running
        adv[t] = running
    return adv


def test_gae_matches_numpy(backend):
    rng = np.random.default_rng(0)
    r = rng.normal(size=(ITERATIONS, STEPS, ENVS))
    done = rng.random((ITERATIONS, STEPS, ENVS)) < 0.25
    value = rng.normal(size=(ITERATIONS, STEPS, ENVS))
    last = rng.normal(size=(ITERATIONS, ENVS))
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        def series(array, dtype="float64"):
            return trl.source(lambda p: array[p["i"], p["t"]], (ENVS,), dtype, (i, t))

        adv = gae(series(r), series(done, "bool"), series(value),
                  trl.source(lambda p: last[p["i"]], (ENVS,), "float64", (i,)), GAMMA, LAM)
        got = collect(adv)
    run(ctx, {I: ITERATIONS, T: STEPS}, backend)
    expected = {}
    for k in range(ITERATIONS):
        for step, row in enumerate(numpy_gae(r[k], done[k], value[k], last[k])):
            expected[(k, step)] = row
    assert_values(got, expected, rtol=1e-10, atol=1e-12)


def _torch_mlp(flat: np.ndarray, sizes: list[int], x: torch.Tensor):
    """The forward pass of ``trl.nn.MLP(sizes, flat=True)`` from its parameter vector."""
    vector = torch.tensor(flat, dtype=torch.float64, requires_grad=True)
    offset, h = 0, x
    for k, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        weight = vector[offset:offset + n_in * n_out].reshape(n_out, n_in)
        bias = vector[offset + n_in * n_out:offset + n_in * n_out + n_out]
        offset += n_in * n_out + n_out
        h = h @ weight.T + bias
        if k < len(sizes) - 2:
            h = torch.tanh(h)
    return vector, h


@pytest.mark.parametrize("discrete", [True, False], ids=["categorical", "normal"])
def test_loss_and_gradients_match_torch(backend, discrete):
    batch, obs_size, actions = 12, 4, 2
    rng = np.random.default_rng(1)
    obs = rng.normal(size=(batch, obs_size))
    action = rng.integers(0, actions, batch) if discrete else rng.normal(size=(batch, actions))
    old_logp, adv, ret = rng.normal(size=batch) * 0.3 - 0.7, rng.normal(size=batch), rng.normal(size=batch)
    clip, ent, vf = 0.2, 0.01, 0.5
    ctx = trl.Context("i")
    (i,), (I,) = ctx.dims, ctx.bounds
    with ctx:
        actor = trl.nn.MLP([obs_size, 8, actions], domain=(i,), dtype="float64", flat=True, gains=(1.4, 0.5))
        critic = trl.nn.MLP([obs_size, 8, 1], domain=(i,), dtype="float64", flat=True)
        log_std = trl.param(np.array([0.1, -0.2]), domain=(i,), dtype="float64")
        o = trl.tensor(obs, "float64")
        if discrete:
            pi = trl.distributions.Categorical(logits=actor(o))
            logp, entropy = pi.log_prob(trl.tensor(action)), pi.entropy()
        else:
            pi = trl.distributions.Normal(actor(o), log_std.exp())
            logp, entropy = pi.log_prob(trl.tensor(action, "float64")).sum(-1), pi.entropy().sum(-1)
        loss, _ = ppo_loss(logp, trl.tensor(old_logp, "float64"), trl.tensor(adv, "float64"),
                           critic(o).squeeze(-1), trl.tensor(ret, "float64"), entropy, clip, ent, vf)
        loss.backward()
        params = [actor.flat, critic.flat] + ([] if discrete else [log_std])
        values = [collect(p) for p in params]
        grads = [collect(p.grad) for p in params]
        got_loss = collect(loss)
    run(ctx, {I: 1}, backend)

    x = torch.tensor(obs)
    actor_vector, logits = _torch_mlp(values[0][(0,)], [obs_size, 8, actions], x)
    critic_vector, v = _torch_mlp(values[1][(0,)], [obs_size, 8, 1], x)
    if discrete:
        dist = torch.distributions.Categorical(logits=logits)
        logp_t, entropy_t, leaves = dist.log_prob(torch.tensor(action)), dist.entropy(), []
    else:
        std_log = torch.tensor(values[2][(0,)], requires_grad=True)
        dist = torch.distributions.Normal(logits, std_log.exp())
        action_t = torch.tensor(action)
        logp_t, entropy_t, leaves = dist.log_prob(action_t).sum(-1), dist.entropy().sum(-1), [std_log]
    adv_t = torch.tensor(adv)
    adv_t = (adv_t - adv_t.mean()) / (adv_t.std() + 1e-8)
    ratio = (logp_t - torch.tensor(old_logp)).exp()
    pg = torch.max(-adv_t * ratio, -adv_t * torch.clamp(ratio, 1 - clip, 1 + clip)).mean()
    v_loss = 0.5 * ((v.squeeze(-1) - torch.tensor(ret)) ** 2).mean()
    expected = pg - ent * entropy_t.mean() + vf * v_loss
    expected.backward()
    assert_values(got_loss, {(0,): expected.detach().numpy()}, rtol=1e-10)
    for store, leaf in zip(grads, [actor_vector, critic_vector, *leaves]):
        assert_values(store, {(0,): leaf.grad.numpy()}, rtol=1e-8, atol=1e-12)


def test_optimizer_steps_through_several_update_dimensions():
    """Adam over (i, e, m) visits the points like nested loops and matches torch.optim.Adam step for step."""
    sizes = {"I": 2, "E": 3, "M": 2}
    targets = np.random.default_rng(2).normal(size=(2, 3, 2, 4))
    ctx = trl.Context("i e m")
    i, e, m = ctx.dims
    I, E, M = ctx.bounds
    with ctx:
        w = trl.param(np.ones(4), domain=(i, e, m), dtype="float64")
        target = trl.source(lambda p: targets[p["i"], p["e"], p["m"]], (4,), "float64", (i, e, m))
        ((w - target) ** 2).sum().backward()
        trl.optim.Adam([w], lr=0.1, max_grad_norm=1.5).step()
        got = collect(w)
    run(ctx, {I: 2, E: 3, M: 2}, "reference")
    weight = torch.ones(4, dtype=torch.float64, requires_grad=True)
    adam = torch.optim.Adam([weight], lr=0.1)
    expected = {}
    for point in np.ndindex(sizes["I"], sizes["E"], sizes["M"]):
        expected[point] = weight.detach().numpy().copy()
        adam.zero_grad()
        ((weight - torch.tensor(targets[point])) ** 2).sum().backward()
        torch.nn.utils.clip_grad_norm_([weight], 1.5)
        adam.step()
    assert_values(got, expected, rtol=1e-9, atol=1e-12)


def test_ppo_learns_cartpole(tmp_path):
    """A short run on torch: the mean episode length of the last iterations beats the first ones, and the
    run log holds every iteration."""
    curve = train("CartPole-v1", iterations=12, num_envs=8, steps=48, epochs=4, minibatches=2, lr=5e-3,
                  backend="torch", seed=1, logdir=str(tmp_path))
    assert [row["iteration"] for row in curve] == list(range(12))
    first = np.mean([row["mean_length"] for row in curve[:3]])
    last = np.mean([row["mean_length"] for row in curve[-3:]])
    assert last > 1.5 * first, (first, last)
    (run_dir,) = tmp_path.iterdir()
    assert len((run_dir / "progress.csv").read_text().splitlines()) == 13


def test_epochs_and_minibatches_as_dimensions_match_the_reference():
    """PPO over (i, e, m) on torch runs isl's loop program, whose deallocations carry select points (an
    epoch's last minibatch is followed by the next epoch's first); the reference interpreter runs no
    schedule. Same samples, same losses."""
    names = ("mean_return", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
    curves = {backend: train("CartPole-v1", iterations=2, num_envs=3, steps=8, epochs=2, minibatches=2,
                             backend=backend, seed=3) for backend in ("reference", "torch")}
    for expected, got in zip(curves["reference"], curves["torch"]):
        np.testing.assert_allclose([got[n] for n in names], [expected[n] for n in names], rtol=1e-4, atol=1e-6)
