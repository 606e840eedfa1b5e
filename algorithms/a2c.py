"""A2C (Mnih et al., 2016, "Asynchronous Methods for Deep Reinforcement Learning", synchronous form) as recurrent
tensors: ``N`` environments act ``T`` steps with the current policy, then one Adam step on the policy gradient
with an advantage, half the squared value error and an entropy bonus. Separate 64-64 tanh MLPs for the actor
and the critic.

Two advantages, chosen by ``--n-step``:

- GAE (Schulman et al., 2016; default): the backward recurrence
  ``adv[t] = delta[t] + gamma * lam * (1 - done[t]) * adv[t + 1]`` as a discounted sum over the window
  ``delta[t:T]`` that stops at the first episode end;
- n-step returns: ``ret[t] = r[t] + ... + gamma**(k-1) r[t+k-1] + gamma**k V(o[t+k])`` over the window
  ``r[t:min(t + n, T)]``, bootstrapped only where no episode ends inside the window.

    python -m algorithms.a2c --iterations 100 --backend torch
    python -m algorithms.a2c --n-step 5 --backend jax

Episodes restart at the start of every iteration (``env.reset`` over ``i``); the last step of an iteration
bootstraps from the value of the observation it leads to.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

import timerl as trl
from algorithms.reinforce import compile_and_run, iteration_summary
from timerl.runlog import IterationClock


def train(env_name: str = "CartPole-v1", iterations: int = 100, num_envs: int = 8, steps: int = 256,
          n_step: int | None = None, gamma: float = 0.99, gae_lambda: float = 0.95, lr: float = 1e-3,
          ent_coef: float = 0.01, vf_coef: float = 0.5, hidden: int = 64, seed: int = 0, backend: str = "torch",
          compile_options: dict | None = None, stats: dict | None = None) -> list[dict[str, Any]]:
    """Run A2C; returns the learning curve, one dict per iteration (`iteration_summary`, and the wall and CPU
    seconds since the iteration before: `IterationClock`)."""
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    env = trl.rl.make_env(env_name, num_envs=num_envs, seed=seed)
    obs_size = int(np.prod(env.observation_shape))
    curve: list[dict[str, Any]] = []

    with ctx:
        actor = trl.nn.MLP([obs_size, hidden, hidden, env.num_actions], activation="tanh", domain=(i,))
        critic = trl.nn.MLP([obs_size, hidden, hidden, 1], activation="tanh", domain=(i,))

        # Acting
        o = trl.placeholder((num_envs, *env.observation_shape), domain=(i, t))
        o[i, 0] = env.reset(domain=(i,))
        pi = trl.distributions.Categorical(logits=actor(o))
        a = pi.sample()
        next_o, r, done = env.step(a)
        o[i, t + 1] = next_o

        # Advantages
        value = critic(o).squeeze(-1)
        next_value = critic(next_o).squeeze(-1).detach()
        not_done = 1.0 - done.astype("float32")
        if n_step is None:
            delta = r + gamma * not_done * next_value - value.detach()
            adv = delta[i, t:T].discounted_sum(gamma * gae_lambda, until=done[i, t:T])
            ret = adv + value.detach()
        else:
            ret = n_step_returns(r, done, next_value, gamma, n_step)
            adv = ret - value.detach()

        # Learning: one update per iteration
        policy_loss = -(pi.log_prob(a) * adv).mean()
        value_loss = 0.5 * ((value - ret) ** 2).mean()
        entropy = pi.entropy().mean()
        loss = policy_loss + vf_coef * value_loss - ent_coef * entropy
        loss.backward()
        trl.optim.Adam(actor.parameters() + critic.parameters(), lr=lr).step()

        # Logging: every iteration's rewards and episode ends
        clock = IterationClock(None, num_envs * steps)

        def log(point: dict, value: Any) -> None:
            value = np.asarray(value)
            curve.append(clock.complete(iteration_summary(point["i"], value[0], value[1])))

        trl.stack([r[i, 0:T], done[i, 0:T].astype("float32")]).sink(log)

    compile_and_run(ctx, {I: iterations, T: steps}, clock, backend, seed, compile_options, stats)
    return curve


def n_step_returns(r: trl.RecurrentTensor, done: trl.RecurrentTensor, next_value: trl.RecurrentTensor,
                   gamma: float, n: int) -> trl.RecurrentTensor:
    """``sum_k gamma**k r[t+k]`` over the window ``t .. min(t+n, T) - 1`` up to the first episode end, plus
    ``gamma**len V(o[end])`` where no episode ends inside the window."""
    i, t = r.domain
    T = r.ctx.bound_of(t)
    end = trl.min(t + n, T)
    rewards = r[i, t:end].discounted_sum(gamma, until=done[i, t:end])
    alive = done[i, t:end].astype("float32").sum(0) == 0
    bootstrap = gamma ** (end - t) * next_value[i, end - 1]
    return rewards + trl.where(alive, bootstrap, 0.0)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=256, help="environment steps per iteration (T)")
    parser.add_argument("--n-step", type=int, default=None, help="n-step returns (default: GAE)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="torch", choices=("reference", "torch", "jax"))
    args = parser.parse_args(argv)
    curve = train(args.env, args.iterations, args.num_envs, args.steps, args.n_step, lr=args.lr, seed=args.seed,
                  backend=args.backend)
    print("iteration  episodes  mean length  mean return  seconds")
    for row in curve:
        print(f"{row['iteration']:9d}  {row['episodes']:8d}  {row['mean_length']:11.1f}  {row['mean_return']:11.1f}"
              f"  {row['iteration_seconds']:7.3f}")
    return curve


if __name__ == "__main__":
    main()
