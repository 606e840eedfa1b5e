"""The hand-written, fully jitted jax baseline of REINFORCE with an in-jax CartPole-v1: what timerl on jax with
``simulator="rt"`` is measured against.

The same algorithm as `algorithms/reinforce.py` and `benchmarks/eager_reinforce.py`: Monte Carlo returns
masked at episode ends, the batch mean at each step as the baseline, an MLP 4-64-64-2 with tanh (PyTorch's
uniform initialization), Adam with lr 1e-2 and PyTorch's defaults. Each iteration starts fresh episodes (like
timerl's ``env.reset(domain=(i,))``), autoresets ended ones within the same step and truncates at 500 steps.
One ``jax.jit`` runs a whole iteration: a ``lax.scan`` over the steps (act, step every environment), the
returns as a reverse scan, the gradient of the policy loss and the Adam update. The dynamics are gymnasium's,
in float32 (speed is the point here; `timerl.envs.cartpole` keeps gymnasium's float64 state).

    python -m benchmarks.jax_scan_reinforce --iterations 20 --num-envs 64 --steps 100
    python -m benchmarks.jax_scan_reinforce --side-by-side 4   # alternating with timerl jax, CPU and wall
"""

from __future__ import annotations

import argparse
import math
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from algorithms.reinforce import train

GRAVITY, MASS_CART, MASS_POLE, LENGTH, FORCE, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
TOTAL_MASS = MASS_POLE + MASS_CART
POLE_MASS_LENGTH = MASS_POLE * LENGTH
THETA_LIMIT, X_LIMIT, MAX_EPISODE_STEPS = 12 * 2 * math.pi / 360, 2.4, 500
SIZES = (4, 64, 64, 2)


class Adam(NamedTuple):
    step: jax.Array
    first: list
    second: list


def init_policy(rng: np.random.Generator) -> list[tuple[jax.Array, jax.Array]]:
    layers = []
    for n_in, n_out in zip(SIZES[:-1], SIZES[1:]):
        limit = 1.0 / math.sqrt(n_in)
        layers.append((jnp.asarray(rng.uniform(-limit, limit, (n_in, n_out)), jnp.float32),
                       jnp.asarray(rng.uniform(-limit, limit, n_out), jnp.float32)))
    return layers


def logits_of(params, obs: jax.Array) -> jax.Array:
    for weight, bias in params[:-1]:
        obs = jnp.tanh(obs @ weight + bias)
    weight, bias = params[-1]
    return obs @ weight + bias


def cartpole_step(state: jax.Array, action: jax.Array) -> tuple[jax.Array, jax.Array]:
    """gymnasium's Euler step of a batch of states ``(n, 4)``; returns the next states and terminations."""
    x, x_dot, theta, theta_dot = state.T
    force = jnp.where(action == 1, FORCE, -FORCE)
    cos, sin = jnp.cos(theta), jnp.sin(theta)
    temp = (force + POLE_MASS_LENGTH * theta_dot ** 2 * sin) / TOTAL_MASS
    theta_acc = (GRAVITY * sin - cos * temp) / (LENGTH * (4.0 / 3.0 - MASS_POLE * cos ** 2 / TOTAL_MASS))
    x_acc = temp - POLE_MASS_LENGTH * theta_acc * cos / TOTAL_MASS
    x, x_dot = x + TAU * x_dot, x_dot + TAU * x_acc
    theta, theta_dot = theta + TAU * theta_dot, theta_dot + TAU * theta_acc
    terminated = (jnp.abs(x) > X_LIMIT) | (jnp.abs(theta) > THETA_LIMIT)
    return jnp.stack([x, x_dot, theta, theta_dot], axis=1), terminated


def fresh_states(key: jax.Array, num_envs: int) -> jax.Array:
    return jax.random.uniform(key, (num_envs, 4), jnp.float32, -0.05, 0.05)


def make_iteration(num_envs: int, steps: int, gamma: float, lr: float):
    betas, eps = (0.9, 0.999), 1e-8

    def rollout(params, key):
        def act(carry, noise):
            state, elapsed = carry
            gumbel, fresh = noise
            action = jnp.argmax(logits_of(params, state) + gumbel, axis=-1)  # a categorical sample
            after, terminated = cartpole_step(state, action)
            elapsed = elapsed + 1
            ended = terminated | (elapsed >= MAX_EPISODE_STEPS)
            after = jnp.where(ended[:, None], fresh, after)
            return (after, jnp.where(ended, 0, elapsed)), (state, action, ended)

        # every random number of the iteration in two draws before the loop: threefry per step costs more
        first, gumbel_key, fresh_key = jax.random.split(key, 3)
        noise = (jax.random.gumbel(gumbel_key, (steps, num_envs, SIZES[-1])),
                 jax.random.uniform(fresh_key, (steps, num_envs, 4), jnp.float32, -0.05, 0.05))
        carry = (fresh_states(first, num_envs), jnp.zeros(num_envs, jnp.int32))
        _, (observations, actions, ends) = jax.lax.scan(act, carry, noise)
        return observations, actions, ends

    def returns_of(ends):
        def back(running, end):
            running = 1.0 + gamma * running * (1.0 - end)  # CartPole's reward is 1 on every step
            return running, running

        _, returns = jax.lax.scan(back, jnp.zeros(num_envs, jnp.float32), ends.astype(jnp.float32), reverse=True)
        return returns

    def loss_of(params, observations, actions, advantage):
        log_probs = jax.nn.log_softmax(logits_of(params, observations))
        taken = jnp.take_along_axis(log_probs, actions[..., None], axis=-1)[..., 0]
        return -(taken * advantage).mean(axis=1).sum()  # summed over steps, like backward() over t

    @jax.jit
    def iteration(params, adam: Adam, key):
        observations, actions, ends = rollout(params, key)
        returns = returns_of(ends)
        advantage = returns - returns.mean(axis=1, keepdims=True)
        grads = jax.grad(loss_of)(params, observations, actions, advantage)
        step = adam.step + 1
        first = jax.tree.map(lambda m, g: betas[0] * m + (1 - betas[0]) * g, adam.first, grads)
        second = jax.tree.map(lambda v, g: betas[1] * v + (1 - betas[1]) * g * g, adam.second, grads)
        scale1, scale2 = 1 - betas[0] ** step, 1 - betas[1] ** step
        params = jax.tree.map(lambda p, m, v: p - lr * (m / scale1) / (jnp.sqrt(v / scale2) + eps),
                              params, first, second)
        return params, Adam(step, first, second), ends

    return iteration


def mean_length(ends: np.ndarray) -> float:
    """Mean length of the iteration's episodes; one still running at the end counts with length T."""
    lengths = []
    for k in range(ends.shape[1]):
        marks = np.flatnonzero(ends[:, k])
        starts = np.concatenate([[0], marks + 1])
        lengths += list(np.diff(starts))
        if not len(marks):
            lengths.append(ends.shape[0])
    return float(np.mean(lengths))


def train_scan(iterations: int = 20, num_envs: int = 64, steps: int = 100, seed: int = 0, gamma: float = 0.99,
               lr: float = 1e-2, curve: list | None = None) -> float:
    """Seconds per iteration, the first (compiling) iteration excluded; appends each iteration's mean
    episode length to ``curve`` when given."""
    params = init_policy(np.random.default_rng(seed))
    zeros = jax.tree.map(jnp.zeros_like, params)
    adam = Adam(jnp.zeros((), jnp.float32), zeros, zeros)
    iteration = make_iteration(num_envs, steps, gamma, lr)
    return timed_iterations(iteration, params, adam, iterations, seed, curve)


def timed_iterations(iteration, params, adam, iterations: int, seed: int, curve: list | None) -> float:
    """Run ``iteration(params, adam, key) -> (params, adam, ends)`` once to compile, then ``iterations`` times,
    each waited for (as timerl's iterations are: they log their episodes); the median seconds of the timed
    iterations (the first few after the compile are several times slower than the rest, so a mean over a
    short run varied threefold between runs), and each one's mean episode length appended to ``curve``."""
    keys = jax.random.split(jax.random.PRNGKey(seed), iterations + 1)
    params, adam, ends = iteration(params, adam, keys[0])  # warm-up: compiles
    ends.block_until_ready()
    all_ends, seconds = [], []
    for key in keys[1:]:
        started = time.perf_counter()
        params, adam, ends = iteration(params, adam, key)
        ends.block_until_ready()
        seconds.append(time.perf_counter() - started)
        all_ends.append(ends)
    if curve is not None:
        curve += [mean_length(np.asarray(e)) for e in all_ends]
    return float(np.median(seconds))


def timerl_seconds_per_iteration(backend: str, iterations: int = 5, num_envs: int = 64, steps: int = 100,
                                 seed: int = 0, compile_options: dict | None = None) -> tuple[float, float, float]:
    """timerl's `algorithms.reinforce.train` with ``simulator="rt"``, the same sizes, ``iterations + 2``
    iterations: (first iteration's seconds, median seconds of the ``iterations`` between, last iteration's
    seconds). The first and the last pay compiles (on jax with scans, the last iteration's conditions differ:
    its last step computes nothing the program reads, so its scans compile once more)."""
    curve = train("CartPole-v1", iterations=iterations + 2, num_envs=num_envs, steps=steps, seed=seed,
                  backend=backend, simulator="rt", compile_options=compile_options)
    seconds = [row["iteration_seconds"] for row in curve]
    return seconds[0], float(np.median(seconds[1:-1])), seconds[-1]


def side_by_side(rounds: int = 4, iterations: int = 20, num_envs: int = 64, steps: int = 100, seed: int = 0
                 ) -> list[tuple[float, float, float, float]]:
    """The scan and timerl's jax REINFORCE (``simulator="rt"``) alternating in one process, ``rounds`` times;
    per round, seconds per iteration: (scan CPU, timerl CPU, scan wall, timerl wall). The scan: the median of
    ``iterations`` iterations, each waited for; timerl: its compiled executable run again (``iterations``
    iterations, every segment already compiled), divided by them. CPU is `time.process_time` (every thread),
    which a loaded machine inflates far less than wall time."""
    stats: dict = {}
    train("CartPole-v1", iterations=iterations, num_envs=num_envs, steps=steps, seed=seed, backend="jax",
          simulator="rt", stats=stats)
    executable = stats["executable"]
    params = init_policy(np.random.default_rng(seed))
    zeros = jax.tree.map(jnp.zeros_like, params)
    adam = Adam(jnp.zeros((), jnp.float32), zeros, zeros)
    iteration = make_iteration(num_envs, steps, 0.99, 1e-2)
    keys = jax.random.split(jax.random.PRNGKey(seed), iterations + 1)
    params, adam, ends = iteration(params, adam, keys[0])  # compiles
    ends.block_until_ready()
    rows = []
    for _ in range(rounds):
        cpu, wall = [], []
        for key in keys[1:]:
            started, clock = time.perf_counter(), time.process_time()
            params, adam, ends = iteration(params, adam, key)
            np.asarray(ends)  # on the host, as timerl's logging sink reads its episode ends
            cpu.append(time.process_time() - clock)
            wall.append(time.perf_counter() - started)
        started, clock = time.perf_counter(), time.process_time()
        executable.execute()
        rows.append((float(np.median(cpu)), (time.process_time() - clock) / iterations, float(np.median(wall)),
                     (time.perf_counter() - started) / iterations))
    return rows


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timerl", nargs="*", default=[], choices=("torch", "jax", "reference"),
                        help="also time timerl's REINFORCE with the RT CartPole on these backends")
    parser.add_argument("--side-by-side", type=int, default=0, metavar="ROUNDS",
                        help="alternate the scan and timerl jax in this process, ROUNDS times (CPU and wall)")
    args = parser.parse_args(argv)
    if args.side_by_side:
        print("| round | lax.scan CPU s | timerl jax CPU s | CPU ratio | lax.scan wall s | timerl jax wall s | wall ratio |")
        print("|---|---|---|---|---|---|---|")
        rows = side_by_side(args.side_by_side, args.iterations, args.num_envs, args.steps, args.seed)
        for k, (scan_cpu, ours_cpu, scan_wall, ours_wall) in enumerate(rows):
            print(f"| {k} | {scan_cpu:.4f} | {ours_cpu:.4f} | {ours_cpu / scan_cpu:.2f}x | {scan_wall:.4f} | "
                  f"{ours_wall:.4f} | {ours_wall / scan_wall:.2f}x |")
        return float(np.median([row[0] for row in rows]))
    curve: list[float] = []
    seconds = train_scan(args.iterations, args.num_envs, args.steps, args.seed, curve=curve)
    print(f"jax lax.scan REINFORCE, CartPole-v1, {args.num_envs} envs x {args.steps} steps: "
          f"{seconds:.4f} s / iteration (warm-up excluded, {args.iterations} iterations)")
    print("mean episode length per iteration:", " ".join(f"{n:.0f}" for n in curve))
    for backend in args.timerl:
        _, theirs, _ = timerl_seconds_per_iteration(backend, max(args.iterations // 4, 1), args.num_envs,
                                                    args.steps, args.seed)
        print(f"timerl {backend}, simulator='rt': {theirs:.4f} s / iteration ({theirs / seconds:.1f}x the scan)")
    return seconds


if __name__ == "__main__":
    main()
