"""DQN (Mnih et al., 2015, "Human-level control through deep reinforcement learning") as recurrent tensors, in
the shape of CleanRL's dqn.py: epsilon-greedy acting in ``N`` environments, a replay buffer, a target
network refreshed every ``K`` steps, and one Adam step on the TD error of a sampled minibatch every
``train_frequency`` steps once ``learning_starts`` steps have been taken.

    python -m algorithms.dqn --iterations 20 --backend torch

The program has one dimension, ``t`` (the environment step). Everything per step is an RT over ``t``; the
replay buffer is no data structure of its own but the program's own per-step tensors read through a
window, ``x[max(0, t - W + 1):t + 1]`` (the last ``W = capacity / N`` steps of ``N`` transitions), from
which a minibatch is drawn with ``index_select``. The Q-network's parameters live over ``t``; acting reads
them at ``t`` and the target network at ``(t // K) * K``. Time-limit ends bootstrap from the final
observation (``env.step(..., truncation=True)``), as CleanRL's replay buffer does with
``handle_timeout_termination``. An iteration is ``steps`` environment steps (for logging and timing).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

import timerl as trl


def train(env_name: str = "CartPole-v1", iterations: int = 20, num_envs: int = 4, steps: int = 250,
          capacity: int = 10_000, batch_size: int = 128, gamma: float = 0.99, lr: float = 2.5e-4,
          target_frequency: int = 125, train_frequency: int = 2, learning_starts: int = 250,
          start_epsilon: float = 1.0, end_epsilon: float = 0.05, exploration_fraction: float = 0.5,
          hidden: tuple[int, int] = (120, 84), seed: int = 0, backend: str = "torch",
          compile_options: dict | None = None, stats: dict | None = None) -> list[dict[str, Any]]:
    """Run DQN for ``iterations * steps`` environment steps; returns one row per iteration (mean return of
    the episodes that ended in it, seconds). Frequencies and ``learning_starts`` count steps of all ``N``
    environments together (one ``t``), ``capacity`` counts transitions."""
    ctx = trl.Context("t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    env = trl.rl.make_env(env_name, num_envs=num_envs, seed=seed)
    n, actions = num_envs, env.num_actions
    window = max(1, capacity // num_envs)  # steps the buffer holds
    total = iterations * steps
    log = EpisodeLogger(env, steps)

    with ctx:
        q = trl.nn.MLP([int(np.prod(env.observation_shape)), *hidden, actions], activation="relu", domain=(t,),
                       seed=seed, flat=True)
        q_target = q.frozen((t // target_frequency) * target_frequency)

        # Acting: epsilon-greedy with the current weights; epsilon decays linearly over a fraction of the run
        o = trl.placeholder((n, *env.observation_shape), domain=(t,))
        o[0] = env.reset()
        decay = max(1, int(exploration_fraction * total))
        epsilon = (start_epsilon + (end_epsilon - start_epsilon) * t / decay).clip(end_epsilon, start_epsilon)
        explore = trl.rand((n,), domain=(t,)) < epsilon
        random_action = (trl.rand((n,), domain=(t,)) * actions).astype("int64")
        a = trl.where(explore, random_action, q.frozen(t)(o).argmax(-1))
        o[t + 1], r, terminated, _, final_o = env.step(a, truncation=True)

        # Learning: a minibatch of the last `window` steps' transitions, uniformly drawn
        with ctx.when((t >= learning_starts) & (t % train_frequency == 0)):
            first = trl.max(0, t - window + 1)
            stored = (trl.min(t + 1, window) * n).astype("float32")  # transitions in the buffer

            def replay(x: trl.RecurrentTensor) -> trl.RecurrentTensor:
                return x[first:t + 1].reshape((-1, *x.shape[1:])).index_select(0, sample)

            sample = (trl.rand((batch_size,), domain=(t,)) * stored).astype("int64")
            b_o, b_a, b_r, b_final, b_term = (replay(x) for x in (o, a, r, final_o, terminated))
            next_value = q_target(b_final).max(-1)
            td_target = b_r + gamma * next_value * (1.0 - b_term.astype("float32"))
            predicted = q(b_o).gather(-1, b_a.unsqueeze(-1)).squeeze(-1)
            loss = ((predicted - td_target.detach()) ** 2).mean()
            loss.backward()
            trl.optim.Adam(q.parameters(), lr=lr).step()

        with ctx.when(t % steps == steps - 1):
            r.sink(log.iteration_end)

    started = time.perf_counter()
    executable = ctx.compile(bounds={T: total}, backend=backend, seed=seed, **(compile_options or {}))
    log.start(time.perf_counter() - started)
    executable.execute()
    if stats is not None:
        stats.update(executable.stats, executable=executable)
    return log.curve


class EpisodeLogger:
    """One row per iteration, at its last step: the episodes that ended in it and the seconds it took."""

    def __init__(self, env: Any, steps: int) -> None:
        self.env, self.steps, self.curve = env, steps, []
        self.seen = 0

    def start(self, compile_seconds: float) -> None:
        self.compile_seconds = compile_seconds
        self.clock, self.cpu = time.perf_counter(), time.process_time()

    def iteration_end(self, point: dict, value: Any) -> None:
        # episodes come in step order; steps after this one may have run already (the executor's choice)
        episodes = [e for e in self.env.episodes[self.seen:] if e.point["t"] <= point["t"]]
        self.seen += len(episodes)
        now, cpu = time.perf_counter(), time.process_time()
        returns = [e.total_return for e in episodes]
        self.curve.append({"iteration": point["t"] // self.steps, "episodes": len(episodes),
                           "mean_return": float(np.mean(returns)) if returns else float("nan"),
                           "seconds": now - self.clock, "cpu_seconds": cpu - self.cpu})
        self.clock, self.cpu = now, cpu


def command_line(description: str, train, env: str, iterations: int, num_envs: int, steps: int,
                 argv: list[str] | None) -> list[dict[str, Any]]:
    """The off-policy learners' command line (DQN, TD3): train with the flags' values, print the curve."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--env", default=env)
    parser.add_argument("--iterations", type=int, default=iterations)
    parser.add_argument("--num-envs", type=int, default=num_envs)
    parser.add_argument("--steps", type=int, default=steps, help="environment steps per iteration")
    parser.add_argument("--capacity", type=int, default=10_000, help="replay buffer size in transitions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="torch", choices=("reference", "torch", "jax"))
    args = parser.parse_args(argv)
    curve = train(args.env, args.iterations, args.num_envs, args.steps, args.capacity, seed=args.seed,
                  backend=args.backend)
    print("iteration  episodes  mean return  seconds")
    for row in curve:
        print(f"{row['iteration']:9d}  {row['episodes']:8d}  {row['mean_return']:11.1f}  {row['seconds']:7.3f}")
    return curve


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    return command_line(__doc__.split("\n\n")[0], train, "CartPole-v1", 20, 4, 250, argv)


if __name__ == "__main__":
    main()
