"""The hand-fused jax baseline of PPO with an in-jax CartPole-v1: what timerl's PPO on jax with
``simulator="rt"`` is measured against (issue 10: within 2x of it).

The same algorithm and configuration as `algorithms/ppo.py` and `benchmarks/eager_ppo.py`: a rollout of
``steps`` steps in ``num_envs`` environments that start fresh at every iteration (same-step autoreset,
truncation at 500 steps), GAE as a reverse scan with the last step bootstrapping from the value of the
observation it leads to, then ``epochs`` x ``minibatches`` Adam updates (eps 1e-5, gradient-norm clipping)
of CleanRL's loss: the clipped surrogate on normalized advantages, half the squared value error and an
entropy bonus. Actor and critic are 2 x ``hidden`` tanh MLPs with orthogonal initialization (gains sqrt 2,
0.01 and 1). One ``jax.jit`` runs a whole iteration: the rollout as a ``lax.scan`` over steps, GAE, and the
updates as a ``lax.scan`` over epochs of a ``lax.scan`` over minibatches. The CartPole dynamics are
`benchmarks/jax_scan_reinforce.py`'s (gymnasium's Euler step, in float32).

    python -m benchmarks.jax_scan_ppo --iterations 20 --num-envs 64 --steps 100 --timerl jax torch
"""

from __future__ import annotations

import argparse
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks.jax_scan_reinforce import MAX_EPISODE_STEPS, cartpole_step, fresh_states, timed_iterations

OBSERVATIONS, ACTIONS = 4, 2


class Adam(NamedTuple):
    step: jax.Array
    first: dict
    second: dict


def _orthogonal(rng: np.random.Generator, n_in: int, n_out: int, gain: float) -> jax.Array:
    """An orthogonal matrix scaled by ``gain``, like ``torch.nn.init.orthogonal_`` (QR of a Gaussian)."""
    flat = rng.normal(size=(max(n_in, n_out), min(n_in, n_out)))
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    weight = q if n_in >= n_out else q.T
    return jnp.asarray(gain * weight[:n_in, :n_out], jnp.float32)


def init_network(rng: np.random.Generator, sizes: tuple[int, ...], last_gain: float) -> list:
    gains = [math.sqrt(2)] * (len(sizes) - 2) + [last_gain]
    return [(_orthogonal(rng, n_in, n_out, gain), jnp.zeros(n_out, jnp.float32))
            for n_in, n_out, gain in zip(sizes[:-1], sizes[1:], gains)]


def forward(layers: list, x: jax.Array) -> jax.Array:
    for weight, bias in layers[:-1]:
        x = jnp.tanh(x @ weight + bias)
    weight, bias = layers[-1]
    return x @ weight + bias


def make_iteration(num_envs: int, steps: int, epochs: int, minibatches: int, gamma: float = 0.99,
                   gae_lambda: float = 0.95, clip_coef: float = 0.2, ent_coef: float = 0.01, vf_coef: float = 0.5,
                   lr: float = 2.5e-4, max_grad_norm: float = 0.5):
    batch = num_envs * steps
    minibatch = batch // minibatches
    betas, eps = (0.9, 0.999), 1e-5

    def rollout(params, key):
        def act(carry, noise):
            state, elapsed = carry
            gumbel, fresh = noise
            logits = forward(params["actor"], state)
            action = jnp.argmax(logits + gumbel, axis=-1)  # a categorical sample
            log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=-1)[:, 0]
            value = forward(params["critic"], state)[:, 0]
            after, terminated = cartpole_step(state, action)
            elapsed = elapsed + 1
            ended = terminated | (elapsed >= MAX_EPISODE_STEPS)
            following = jnp.where(ended[:, None], fresh, after)
            return (following, jnp.where(ended, 0, elapsed)), (state, action, log_prob, value, ended, following)

        first, gumbel_key, fresh_key = jax.random.split(key, 3)
        noise = (jax.random.gumbel(gumbel_key, (steps, num_envs, ACTIONS)),
                 jax.random.uniform(fresh_key, (steps, num_envs, OBSERVATIONS), jnp.float32, -0.05, 0.05))
        carry = (fresh_states(first, num_envs), jnp.zeros(num_envs, jnp.int32))
        _, trajectory = jax.lax.scan(act, carry, noise)
        return trajectory

    def gae(values, ends, last_value):
        """adv[t] = delta[t] + gamma * lam * (1 - done[t]) * adv[t + 1], CartPole's reward 1 at every step."""
        not_done = 1.0 - ends.astype(jnp.float32)
        next_values = jnp.concatenate([values[1:], last_value[None]], axis=0)
        deltas = 1.0 + gamma * not_done * next_values - values

        def back(running, step):
            delta, keep = step
            running = delta + gamma * gae_lambda * keep * running
            return running, running

        _, advantages = jax.lax.scan(back, jnp.zeros(num_envs, jnp.float32), (deltas, not_done), reverse=True)
        return advantages

    def loss_of(params, obs, actions, old_log_probs, advantages, returns):
        log_probs = jax.nn.log_softmax(forward(params["actor"], obs))
        new_log_prob = jnp.take_along_axis(log_probs, actions[:, None], axis=-1)[:, 0]
        entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
        advantages = (advantages - advantages.mean()) / (advantages.std(ddof=1) + 1e-8)
        ratio = jnp.exp(new_log_prob - old_log_probs)
        pg_loss = jnp.maximum(-advantages * ratio, -advantages * jnp.clip(ratio, 1 - clip_coef, 1 + clip_coef)).mean()
        v_loss = 0.5 * ((forward(params["critic"], obs)[:, 0] - returns) ** 2).mean()
        return pg_loss - ent_coef * entropy + vf_coef * v_loss

    def adam_step(params, adam: Adam, grads):
        norm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree.leaves(grads)))
        grads = jax.tree.map(lambda g: g * jnp.minimum(1.0, max_grad_norm / (norm + 1e-6)), grads)
        step = adam.step + 1
        first = jax.tree.map(lambda m, g: betas[0] * m + (1 - betas[0]) * g, adam.first, grads)
        second = jax.tree.map(lambda v, g: betas[1] * v + (1 - betas[1]) * g * g, adam.second, grads)
        scale1, scale2 = 1 - betas[0] ** step, 1 - betas[1] ** step
        params = jax.tree.map(lambda p, m, v: p - lr * (m / scale1) / (jnp.sqrt(v / scale2) + eps),
                              params, first, second)
        return params, Adam(step, first, second)

    @jax.jit
    def iteration(params, adam: Adam, key):
        rollout_key, order_key = jax.random.split(key)
        obs, actions, log_probs, values, ends, following = rollout(params, rollout_key)
        advantages = gae(values, ends, forward(params["critic"], following[-1])[:, 0])
        returns = advantages + values
        flat = [x.reshape((batch,) + x.shape[2:]) for x in (obs, actions, log_probs, advantages, returns)]

        def epoch(state, epoch_key):
            order = jax.random.permutation(epoch_key, batch).reshape(minibatches, minibatch)

            def update(state, index):
                params, adam = state
                grads = jax.grad(loss_of)(params, *(x[index] for x in flat))
                return adam_step(params, adam, grads), None

            return jax.lax.scan(update, state, order)[0], None

        (params, adam), _ = jax.lax.scan(epoch, (params, adam), jax.random.split(order_key, epochs))
        return params, adam, ends

    return iteration


def train_scan(iterations: int = 20, num_envs: int = 64, steps: int = 100, epochs: int = 1, minibatches: int = 1,
               hidden: int = 64, seed: int = 0, lr: float = 2.5e-4, curve: list | None = None) -> float:
    """Seconds per iteration, the first (compiling) iteration excluded; appends each iteration's mean
    episode length to ``curve`` when given."""
    rng = np.random.default_rng(seed)
    params = {"actor": init_network(rng, (OBSERVATIONS, hidden, hidden, ACTIONS), 0.01),
              "critic": init_network(rng, (OBSERVATIONS, hidden, hidden, 1), 1.0)}
    zeros = jax.tree.map(jnp.zeros_like, params)
    adam = Adam(jnp.zeros((), jnp.float32), zeros, zeros)
    iteration = make_iteration(num_envs, steps, epochs, minibatches, lr=lr)
    return timed_iterations(iteration, params, adam, iterations, seed, curve)


def timerl_seconds_per_iteration(backend: str, iterations: int = 4, num_envs: int = 64, steps: int = 100,
                                 seed: int = 0, epochs: int = 1, minibatches: int = 1, lr: float = 2.5e-4) -> float:
    """timerl's `algorithms.ppo.train` with ``simulator="rt"``, the same sizes (``epochs`` of ``minibatches``),
    ``iterations + 3`` iterations: the median seconds of the ``iterations`` after the first two (they pay XLA's
    compiles) and before the last (it compiles more segments: its last step computes nothing read later).
    (Subtracting a run of ``iterations`` from one of ``2 * iterations`` went negative once the second run found
    the first run's XLA executables in jax's caches.)"""
    from algorithms.ppo import train

    curve = train("CartPole-v1", iterations=iterations + 3, num_envs=num_envs, steps=steps, epochs=epochs,
                  minibatches=minibatches, lr=lr, seed=seed, backend=backend, simulator="rt")
    return float(np.median([row["iteration_seconds"] for row in curve[2:-1]]))


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--minibatches", type=int, default=1)
    parser.add_argument("--lr", type=float, default=2.5e-4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timerl", nargs="*", default=[], choices=("torch", "jax"),
                        help="also time timerl's PPO with the RT CartPole on these backends")
    args = parser.parse_args(argv)
    curve: list[float] = []
    seconds = train_scan(args.iterations, args.num_envs, args.steps, args.epochs, args.minibatches, seed=args.seed,
                         lr=args.lr, curve=curve)
    print(f"jax lax.scan PPO, CartPole-v1, {args.num_envs} envs x {args.steps} steps, {args.epochs} epoch(s) x "
          f"{args.minibatches} minibatch(es): {seconds:.4f} s / iteration (warm-up excluded, {args.iterations} "
          "iterations)")
    print("mean episode length per iteration:", " ".join(f"{n:.0f}" for n in curve))
    for backend in args.timerl:
        theirs = timerl_seconds_per_iteration(backend, max(args.iterations // 2, 4), args.num_envs, args.steps,
                                              args.seed, args.epochs, args.minibatches, args.lr)
        print(f"timerl {backend}, simulator='rt': {theirs:.4f} s / iteration ({theirs / seconds:.1f}x the scan)")
    return seconds


if __name__ == "__main__":
    main()
