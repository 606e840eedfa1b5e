"""A2C with a recurrent policy: a GRU (Cho et al., 2014) summarizes the observations of the current episode, its
hidden state a recurrence over ``t`` that restarts at zero after every episode end; a policy head and a value
head read it. Advantages by GAE, one Adam step per iteration on the same loss as `algorithms.a2c`, with the
gradient through the hidden state over the whole iteration (backpropagation through time).

    h[t] = GRU(o[t], h[t - 1] * (1 - done[t - 1]))        (h[-1] = 0)

    python -m algorithms.recurrent_a2c --iterations 100 --backend torch
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

import timerl as trl
from algorithms.reinforce import compile_and_run, iteration_summary
from timerl.runlog import IterationClock


class GRU(trl.nn.Module):
    """One GRU cell (PyTorch's equations): ``z``, ``r`` gates, candidate ``n``; ``h' = (1 - z) n + z h``."""

    def __init__(self, n_in: int, hidden: int, domain) -> None:
        self.hidden = hidden
        self.inputs = trl.nn.Linear(n_in, 3 * hidden, domain=domain)
        self.state = trl.nn.Linear(hidden, 3 * hidden, domain=domain)

    def step(self, x: trl.RecurrentTensor, h: trl.RecurrentTensor) -> trl.RecurrentTensor:
        H = self.hidden
        gx, gh = self.inputs(x), self.state(h)
        z = (gx.spatial[..., 0:H] + gh.spatial[..., 0:H]).sigmoid()
        r = (gx.spatial[..., H:2 * H] + gh.spatial[..., H:2 * H]).sigmoid()
        n = (gx.spatial[..., 2 * H:] + r * gh.spatial[..., 2 * H:]).tanh()
        return (1 - z) * n + z * h

    def parameters(self) -> list[trl.RecurrentTensor]:
        return self.inputs.parameters() + self.state.parameters()


def train(env_name: str = "CartPole-v1", iterations: int = 100, num_envs: int = 8, steps: int = 128,
          gamma: float = 0.99, gae_lambda: float = 0.95, lr: float = 1e-3, ent_coef: float = 0.01,
          vf_coef: float = 0.5, hidden: int = 32, seed: int = 0, backend: str = "torch",
          compile_options: dict | None = None, stats: dict | None = None) -> list[dict[str, Any]]:
    """Run recurrent A2C; returns the learning curve, one dict per iteration (as `algorithms.a2c.train`)."""
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    env = trl.rl.make_env(env_name, num_envs=num_envs, seed=seed)
    obs_size = int(np.prod(env.observation_shape))
    curve: list[dict[str, Any]] = []

    with ctx:
        gru = GRU(obs_size, hidden, domain=(i,))
        policy_head = trl.nn.Linear(hidden, env.num_actions, domain=(i,))
        value_head = trl.nn.Linear(hidden, 1, domain=(i,))

        # Acting: the hidden state after observing o[t], restarted after an episode's last step
        o = trl.placeholder((num_envs, *env.observation_shape), domain=(i, t))
        h = trl.placeholder((num_envs, hidden), domain=(i, t))
        o[i, 0] = env.reset(domain=(i,))
        h[i, 0] = gru.step(o[i, 0], trl.zeros((num_envs, hidden)))
        pi = trl.distributions.Categorical(logits=policy_head(h))
        a = pi.sample()
        next_o, r, done = env.step(a)
        not_done = 1.0 - done.astype("float32")
        next_h = gru.step(next_o, h * not_done.unsqueeze(-1))
        o[i, t + 1] = next_o
        h[i, t + 1] = next_h

        # Advantages by GAE; the value of the next step's state bootstraps (masked at episode ends)
        value = value_head(h).squeeze(-1)
        next_value = value_head(next_h).squeeze(-1).detach()
        delta = r + gamma * not_done * next_value - value.detach()
        adv = delta[i, t:T].discounted_sum(gamma * gae_lambda, until=done[i, t:T])
        ret = adv + value.detach()

        # Learning: one update per iteration, the gradient through h over all steps
        policy_loss = -(pi.log_prob(a) * adv).mean()
        value_loss = 0.5 * ((value - ret) ** 2).mean()
        loss = policy_loss + vf_coef * value_loss - ent_coef * pi.entropy().mean()
        loss.backward()
        params = gru.parameters() + policy_head.parameters() + value_head.parameters()
        trl.optim.Adam(params, lr=lr).step()

        clock = IterationClock(None, num_envs * steps)

        def log(point: dict, value: Any) -> None:
            value = np.asarray(value)
            curve.append(clock.complete(iteration_summary(point["i"], value[0], value[1])))

        trl.stack([r[i, 0:T], done[i, 0:T].astype("float32")]).sink(log)

    compile_and_run(ctx, {I: iterations, T: steps}, clock, backend, seed, compile_options, stats)
    return curve


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=128, help="environment steps per iteration (T)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="torch", choices=("reference", "torch", "jax"))
    args = parser.parse_args(argv)
    curve = train(args.env, args.iterations, args.num_envs, args.steps, lr=args.lr, seed=args.seed,
                  backend=args.backend)
    print("iteration  episodes  mean length  mean return  seconds")
    for row in curve:
        print(f"{row['iteration']:9d}  {row['episodes']:8d}  {row['mean_length']:11.1f}  {row['mean_return']:11.1f}"
              f"  {row['iteration_seconds']:7.3f}")
    return curve


if __name__ == "__main__":
    main()
