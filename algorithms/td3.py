"""TD3 (Fujimoto et al., 2018, "Addressing Function Approximation Error in Actor-Critic Methods") as recurrent
tensors, in the shape of CleanRL's td3_continuous_action.py: a deterministic actor with Gaussian exploration
noise, twin critics trained every step on the smaller target value, target policy smoothing, and a delayed
actor update followed by Polyak averaging of the target networks.

    python -m algorithms.td3 --iterations 10 --backend torch

As in `algorithms.dqn`, the program has one dimension ``t`` (the environment step) and the replay buffer is
the program's own per-step tensors read through the window ``x[max(0, t - W + 1):t + 1]``. The target
networks are recurrences of the program's own, ``w_target[t + 1] = tau * w[t + 1] + (1 - tau) * w_target[t]``
where the actor steps (and ``w_target[t]`` where it does not), fed to the same MLPs with ``module.using``.
Before ``learning_starts`` the actions are uniform; time-limit ends bootstrap from the final observation.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium
import numpy as np

import timerl as trl
from algorithms.dqn import EpisodeLogger, command_line


def train(env_name: str = "Pendulum-v1", iterations: int = 10, num_envs: int = 1, steps: int = 1000,
          capacity: int = 10_000, batch_size: int = 256, gamma: float = 0.99, tau: float = 0.005, lr: float = 3e-4,
          policy_noise: float = 0.2, exploration_noise: float = 0.1, noise_clip: float = 0.5,
          learning_starts: int = 1000, policy_frequency: int = 2, hidden: tuple[int, int] = (256, 256),
          seed: int = 0, backend: str = "torch", compile_options: dict | None = None,
          stats: dict | None = None, env_options: dict | None = None) -> list[dict[str, Any]]:
    """Run TD3 for ``iterations * steps`` environment steps; returns one row per iteration (mean return of the
    episodes that ended in it, seconds). ``capacity`` counts transitions, the rest steps of all environments;
    ``env_options``: keywords of ``gymnasium.make`` (``max_episode_steps``)."""
    ctx = trl.Context("t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    env = trl.rl.make_env(env_name, num_envs=num_envs, seed=seed, **(env_options or {}))
    n, obs_size, act_size = num_envs, int(np.prod(env.observation_shape)), int(np.prod(env.action_shape))
    space = gymnasium.make(env_name).action_space
    low, high = float(np.min(space.low)), float(np.max(space.high))
    scale, bias = (high - low) / 2.0, (high + low) / 2.0
    window = max(1, capacity // num_envs)
    log = EpisodeLogger(env, steps)

    with ctx:
        actor = trl.nn.MLP([obs_size, *hidden, act_size], activation="relu", domain=(t,), seed=seed, flat=True)
        q1 = trl.nn.MLP([obs_size + act_size, *hidden, 1], activation="relu", domain=(t,), seed=seed + 10, flat=True)
        q2 = trl.nn.MLP([obs_size + act_size, *hidden, 1], activation="relu", domain=(t,), seed=seed + 20, flat=True)
        learning = (t >= learning_starts)
        actor_steps = learning & (t % policy_frequency == 0)
        actor_target, q1_target, q2_target = (polyak(net, tau, actor_steps) for net in (actor, q1, q2))

        def act(network: trl.nn.Module, o: trl.RecurrentTensor) -> trl.RecurrentTensor:
            return network(o).tanh() * scale + bias

        def q_value(network: trl.nn.Module, o: trl.RecurrentTensor, a: trl.RecurrentTensor) -> trl.RecurrentTensor:
            return network(trl.cat([o, a], -1)).squeeze(-1)

        # Acting: uniform before learning starts, then the actor plus Gaussian exploration noise
        o = trl.placeholder((n, obs_size), domain=(t,))
        o[0] = env.reset()
        exploring = act(actor.frozen(t), o) + trl.randn((n, act_size), domain=(t,)) * (scale * exploration_noise)
        uniform = trl.rand((n, act_size), domain=(t,)) * (high - low) + low
        a = trl.where(t.astype("float32") < learning_starts, uniform, exploring.clip(low, high))
        o[t + 1], r, terminated, _, final_o = env.step(a, truncation=True)

        with ctx.when(learning):
            first = trl.max(0, t - window + 1)
            stored = (trl.min(t + 1, window) * n).astype("float32")
            sample = (trl.rand((batch_size,), domain=(t,)) * stored).astype("int64")

            def replay(x: trl.RecurrentTensor) -> trl.RecurrentTensor:
                return x[first:t + 1].reshape((-1, *x.shape[1:])).index_select(0, sample)

            b_o, b_a, b_r, b_final, b_term = (replay(x) for x in (o, a, r, final_o, terminated))
            # Critics: the smaller of the two target values at a smoothed target action
            smoothing = (trl.randn((batch_size, act_size), domain=(t,)) * policy_noise).clip(-noise_clip, noise_clip)
            next_a = (act(actor_target, b_final) + smoothing * scale).clip(low, high)
            next_q = trl.rt.functional.minimum(q_value(q1_target, b_final, next_a), q_value(q2_target, b_final, next_a))
            y = (b_r + gamma * (1.0 - b_term.astype("float32")) * next_q).detach()
            q_loss = ((q_value(q1, b_o, b_a) - y) ** 2).mean() + ((q_value(q2, b_o, b_a) - y) ** 2).mean()
            q_loss.backward()
            trl.optim.Adam(q1.parameters() + q2.parameters(), lr=lr).step()
            # Actor, every `policy_frequency` steps: up the first critic (its weights held fixed)
            with ctx.when(t % policy_frequency == 0):
                actor_loss = -q_value(q1.frozen(t), b_o, act(actor, b_o)).mean()
                actor_loss.backward()
                trl.optim.Adam(actor.parameters(), lr=lr).step()

        with ctx.when(t % steps == steps - 1):
            r.sink(log.iteration_end)

    started = time.perf_counter()
    executable = ctx.compile(bounds={T: iterations * steps}, backend=backend, seed=seed, **(compile_options or {}))
    log.start(time.perf_counter() - started)
    executable.execute()
    if stats is not None:
        stats.update(executable.stats, executable=executable)
    return log.curve


def polyak(network: trl.nn.MLP, tau: float, update: trl.Cond) -> trl.nn.MLP:
    """The network with Polyak-averaged weights, a recurrence over ``t``: ``tau * w + (1 - tau) * w_target``
    with the weights ``w[t + 1]`` just stepped, where ``update`` holds at ``t``; unchanged elsewhere."""
    (w,) = network.parameters()
    (t,) = w.domain
    ctx = w.ctx
    w_target = trl.placeholder(tuple(w.shape), domain=(t,))
    w_target[0] = w[0].detach()
    with ctx.when(update):
        w_target[t + 1] = tau * w[t + 1].detach() + (1.0 - tau) * w_target[t]
    with ctx.when(~update):
        w_target[t + 1] = w_target[t]
    return network.using(w_target)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    return command_line(__doc__.split("\n\n")[0], train, "Pendulum-v1", 10, 1, 1000, argv)


if __name__ == "__main__":
    main()
