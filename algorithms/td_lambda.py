"""TD(lambda) (Sutton, 1988; Sutton and Barto, 2018, §12.2): online policy evaluation with accumulating
eligibility traces, a linear value function ``v(s) = w . x(s)`` over the features ``x(s) = [s, 1]``, learning at
every step of ``N`` environments that follow a uniformly random policy:

    delta[t] = r[t] + gamma * (1 - done[t]) * v(s[t + 1]) - v(s[t])
    e[t]     = gamma * lam * (1 - done[t - 1]) * e[t - 1] + x(s[t])        (per environment)
    w[t + 1] = w[t] + alpha * mean_env(delta[t] * e[t])

The weights are a recurrence over ``(i, t)``: iteration ``i + 1`` starts from where iteration ``i`` ended.

    python -m algorithms.td_lambda --iterations 20 --backend torch
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

import timerl as trl
from algorithms.reinforce import compile_and_run, iteration_summary
from timerl.runlog import IterationClock


def train(env_name: str = "CartPole-v1", iterations: int = 20, num_envs: int = 8, steps: int = 256,
          gamma: float = 0.99, lam: float = 0.9, alpha: float = 0.01, seed: int = 0, backend: str = "torch",
          compile_options: dict | None = None, stats: dict | None = None) -> list[dict[str, Any]]:
    """Run TD(lambda); one dict per iteration: `iteration_summary`, `IterationClock`'s seconds and ``value_error``,
    the mean squared difference of ``v(s[t])`` and the discounted return that followed (`monte_carlo_returns`)."""
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    env = trl.rl.make_env(env_name, num_envs=num_envs, seed=seed)
    features = int(np.prod(env.observation_shape)) + 1
    curve: list[dict[str, Any]] = []

    with ctx:
        def x(obs: trl.RecurrentTensor) -> trl.RecurrentTensor:
            return trl.cat([obs, trl.ones((num_envs, 1))], -1)

        # Acting: a uniformly random policy
        s = trl.placeholder((num_envs, *env.observation_shape), domain=(i, t))
        s[i, 0] = env.reset(domain=(i,))
        a = trl.distributions.Categorical(logits=trl.zeros((num_envs, env.num_actions), domain=(i, t))).sample()
        next_s, r, done = env.step(a)
        s[i, t + 1] = next_s
        not_done = 1.0 - done.astype("float32")

        # Learning at every step: the TD error, the eligibility trace, the weights
        w = trl.placeholder((features,), domain=(i, t))
        trace = trl.placeholder((num_envs, features), domain=(i, t))
        value = x(s) @ w
        delta = r + gamma * not_done * (x(next_s) @ w) - value
        trace[i, 0] = x(s[i, 0])
        trace[i, t + 1] = gamma * lam * not_done.unsqueeze(-1) * trace + x(next_s)
        w_next = w + alpha * (delta.unsqueeze(-1) * trace).mean(0)
        w[0, 0] = trl.zeros((features,))
        w[i, t + 1] = w_next
        w[i + 1, 0] = w_next[i, T - 1]

        clock = IterationClock(None, num_envs * steps)

        def log(point: dict, value: Any) -> None:
            value = np.asarray(value)
            row = iteration_summary(point["i"], value[0], value[1])
            error = np.mean((value[2] - monte_carlo_returns(value[0], value[1], gamma)) ** 2)
            curve.append(clock.complete({**row, "value_error": float(error)}))

        trl.stack([r[i, 0:T], done[i, 0:T].astype("float32"), value[i, 0:T]]).sink(log)

    compile_and_run(ctx, {I: iterations, T: steps}, clock, backend, seed, compile_options, stats)
    return curve


def monte_carlo_returns(rewards: np.ndarray, ends: np.ndarray, gamma: float) -> np.ndarray:
    """The discounted return from each step to its episode's end (or the iteration's), ``(T, N)``."""
    returns, running = np.zeros_like(rewards), np.zeros_like(rewards[0])
    for step in reversed(range(rewards.shape[0])):
        running = rewards[step] + gamma * (1.0 - ends[step]) * running
        returns[step] = running
    return returns


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=256, help="environment steps per iteration (T)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="torch", choices=("reference", "torch", "jax"))
    args = parser.parse_args(argv)
    curve = train(args.env, args.iterations, args.num_envs, args.steps, seed=args.seed, backend=args.backend)
    print("iteration  value error  seconds")
    for row in curve:
        print(f"{row['iteration']:9d}  {row['value_error']:11.4f}  {row['iteration_seconds']:7.3f}")
    return curve


if __name__ == "__main__":
    main()
