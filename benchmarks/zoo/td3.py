"""TD3 (`algorithms/td3.py`) against its eager twin: Pendulum-v1, 64-64 ReLU actor and twin critics, a replay
buffer of ``CAPACITY`` transitions, uniform actions before ``LEARNING_STARTS``, critics every step, the actor and
the Polyak-averaged targets every ``POLICY_FREQUENCY`` steps; time-limit ends bootstrap from the final
observation. An iteration is ``steps`` steps of all ``envs`` environments."""

from __future__ import annotations

import copy
import time

import gymnasium as gym
import numpy as np
import torch

from algorithms import td3

SIZES = [(1, 1000), (4, 1000)]
HYPER = dict(capacity=10_000, batch_size=128, gamma=0.99, tau=0.005, lr=1e-3, policy_noise=0.2,
             exploration_noise=0.1, noise_clip=0.5, learning_starts=500, policy_frequency=2, hidden=(64, 64))


def run_timerl(envs: int, steps: int, iterations: int, backend: str, seed: int = 0, **changes) -> dict:
    curve = td3.train(iterations=iterations, num_envs=envs, steps=steps, backend=backend, seed=seed,
                      **{**HYPER, **changes})
    return {"seconds": [row["seconds"] for row in curve], "cpu_seconds": [row["cpu_seconds"] for row in curve],
            "returns": [row["mean_return"] for row in curve]}


def run_eager(envs: int, steps: int, iterations: int, seed: int = 0, **changes) -> dict:
    return train_eager(envs, steps, iterations, seed, **{**HYPER, **changes})


def _mlp(sizes: list[int]) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for k in range(len(sizes) - 1):
        layers += [torch.nn.Linear(sizes[k], sizes[k + 1])] + ([torch.nn.ReLU()] if k < len(sizes) - 2 else [])
    return torch.nn.Sequential(*layers)


def train_eager(envs: int, steps: int, iterations: int, seed: int, capacity: int, batch_size: int, gamma: float,
                tau: float, lr: float, policy_noise: float, exploration_noise: float, noise_clip: float,
                learning_starts: int, policy_frequency: int, hidden: tuple[int, int],
                env_name: str = "Pendulum-v1") -> dict:
    """TD3 as CleanRL's td3_continuous_action.py writes it, with the timerl program's schedule: step ``t``
    acts, stores its ``envs`` transitions, then learns."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    vector = gym.vector.SyncVectorEnv([lambda: gym.make(env_name) for _ in range(envs)],
                                      autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    obs_size = int(np.prod(vector.single_observation_space.shape))
    act_size = int(np.prod(vector.single_action_space.shape))
    low, high = float(np.min(vector.single_action_space.low)), float(np.max(vector.single_action_space.high))
    scale, bias = (high - low) / 2.0, (high + low) / 2.0
    actor, q1, q2 = _mlp([obs_size, *hidden, act_size]), *(_mlp([obs_size + act_size, *hidden, 1]) for _ in range(2))
    actor_target, q1_target, q2_target = (copy.deepcopy(net) for net in (actor, q1, q2))
    q_optimizer = torch.optim.Adam(list(q1.parameters()) + list(q2.parameters()), lr=lr)
    actor_optimizer = torch.optim.Adam(actor.parameters(), lr=lr)
    window = max(1, capacity // envs)
    buffer = {"obs": torch.zeros((window, envs, obs_size)), "action": torch.zeros((window, envs, act_size)),
              "reward": torch.zeros((window, envs)), "final": torch.zeros((window, envs, obs_size)),
              "terminated": torch.zeros((window, envs))}

    def act(network, o):
        return torch.tanh(network(o)) * scale + bias

    obs, _ = vector.reset(seed=seed)
    out: dict = {"seconds": [], "cpu_seconds": [], "returns": []}
    returns, finished = np.zeros(envs), []
    started, cpu = time.perf_counter(), time.process_time()
    for t in range(iterations * steps):
        observation = torch.as_tensor(obs, dtype=torch.float32)
        if t < learning_starts:
            action = rng.uniform(low, high, (envs, act_size)).astype(np.float32)
        else:
            with torch.no_grad():
                action = act(actor, observation) + torch.randn((envs, act_size)) * (scale * exploration_noise)
            action = action.clamp(low, high).numpy()
        obs, reward, terminated, truncated, info = vector.step(action)
        final = np.array(obs, copy=True)
        for k in np.flatnonzero(info.get("_final_obs", np.zeros(envs, bool))):
            final[k] = info["final_obs"][k]
        slot = t % window
        for key, value in (("obs", observation), ("action", action), ("reward", reward), ("final", final),
                           ("terminated", terminated)):
            buffer[key][slot] = torch.as_tensor(np.asarray(value, np.float32))
        returns += reward
        for k in np.flatnonzero(terminated | truncated):
            finished.append(returns[k])
            returns[k] = 0.0
        if t >= learning_starts:
            sample = torch.as_tensor(rng.integers(0, min(t + 1, window) * envs, batch_size))
            b = {key: value[:min(t + 1, window)].reshape(-1, *value.shape[2:])[sample] for key, value in buffer.items()}
            with torch.no_grad():
                smoothing = (torch.randn_like(b["action"]) * policy_noise).clamp(-noise_clip, noise_clip)
                next_a = (act(actor_target, b["final"]) + smoothing * scale).clamp(low, high)
                target_in = torch.cat([b["final"], next_a], -1)
                next_q = torch.minimum(q1_target(target_in), q2_target(target_in)).squeeze(-1)
                y = b["reward"] + gamma * (1.0 - b["terminated"]) * next_q
            taken = torch.cat([b["obs"], b["action"]], -1)
            q_loss = ((q1(taken).squeeze(-1) - y) ** 2).mean() + ((q2(taken).squeeze(-1) - y) ** 2).mean()
            q_optimizer.zero_grad()
            q_loss.backward()
            q_optimizer.step()
            if t % policy_frequency == 0:
                actor_loss = -q1(torch.cat([b["obs"], act(actor, b["obs"])], -1)).mean()
                actor_optimizer.zero_grad()
                actor_loss.backward()
                actor_optimizer.step()
                with torch.no_grad():
                    for net, target in ((actor, actor_target), (q1, q1_target), (q2, q2_target)):
                        for param, target_param in zip(net.parameters(), target.parameters()):
                            target_param.mul_(1.0 - tau).add_(tau * param)
        if t % steps == steps - 1:
            now, cpu_now = time.perf_counter(), time.process_time()
            out["seconds"].append(now - started)
            out["cpu_seconds"].append(cpu_now - cpu)
            out["returns"].append(float(np.mean(finished)) if finished else float("nan"))
            finished, started, cpu = [], now, cpu_now
    return out
