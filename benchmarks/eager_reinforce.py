"""The eager PyTorch baseline of `algorithms/reinforce.py`: the same algorithm, written the usual way."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import torch

from algorithms.reinforce import PATCH_FEATURES, iteration_summary


def train_eager(iterations: int = 5, num_envs: int = 16, steps: int = 200, gamma: float = 0.99, lr: float = 1e-2,
                seed: int = 0, n_step: int | None = None, env_name: str = "CartPole-v1",
                env_options: dict | None = None, hidden: int = 64, seconds: list | None = None,
                cpu_seconds: list | None = None, device: str | None = None, mean_returns: list | None = None) -> float:
    """REINFORCE (Monte Carlo, or n-step returns truncated at the window's end) with masked returns and a
    batch-mean baseline; returns the mean seconds per iteration, and appends each iteration's seconds to
    ``seconds`` when given (and its CPU seconds, `time.process_time`, to ``cpu_seconds``; its mean episode return,
    `algorithms.reinforce.iteration_summary`, to ``mean_returns``). Image observations
    (3 x H x W) go through a convolution with kernel and stride H / 8 and 4 channels (`algorithms.reinforce`'s
    patch embedding) first. ``device``: where the policy and its tensors live; by default the GPU where there is
    one, as the torch backend's values (the same device on both sides of the bench)."""
    torch.manual_seed(seed)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(env_name, **(env_options or {})) for _ in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    shape = envs.single_observation_space.shape
    actions = int(envs.single_action_space.n)
    layers: list[torch.nn.Module] = []
    if len(shape) == 3:
        patch = shape[1] // 8
        layers = [torch.nn.Conv2d(shape[0], PATCH_FEATURES, patch, stride=patch), torch.nn.Tanh(), torch.nn.Flatten()]
        features = PATCH_FEATURES * (shape[1] // patch) * (shape[2] // patch)
    else:
        features = int(np.prod(shape))
    policy = torch.nn.Sequential(*layers, torch.nn.Linear(features, hidden), torch.nn.Tanh(),
                                 torch.nn.Linear(hidden, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, actions))
    policy.to(device)
    optimizer = torch.optim.Adam(policy.parameters(), lr=lr)
    obs, _ = envs.reset(seed=seed)
    started = time.perf_counter()
    for _ in range(iterations):
        iteration_started, iteration_cpu = time.perf_counter(), time.process_time()
        log_probs, rewards, ends = [], [], []
        for _ in range(steps):
            observation = torch.as_tensor(obs, dtype=torch.float32, device=device)
            dist = torch.distributions.Categorical(logits=policy(observation))
            action = dist.sample()
            log_probs.append(dist.log_prob(action))
            obs, reward, terminated, truncated, _ = envs.step(action.cpu().numpy())
            rewards.append(reward)
            ends.append(terminated | truncated)
        rewards_t, ends_t = np.asarray(rewards, np.float32), np.asarray(ends, np.float32)
        returns, running = np.zeros_like(rewards_t), np.zeros(num_envs, np.float32)
        if n_step is None:
            for t in reversed(range(steps)):
                running = rewards_t[t] + gamma * running * (1.0 - ends_t[t])
                returns[t] = running
        else:  # all steps at once, one shift of the window per k
            alive = np.ones_like(rewards_t)
            for k in range(min(n_step, steps)):
                returns[:steps - k] += gamma ** k * rewards_t[k:] * alive[:steps - k]
                alive[:steps - k] *= 1.0 - ends_t[k:]
        returns_t = torch.as_tensor(returns, device=device)
        advantage = returns_t - returns_t.mean(dim=1, keepdim=True)
        loss = -(torch.stack(log_probs) * advantage).mean(dim=1).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if seconds is not None:
            seconds.append(time.perf_counter() - iteration_started)
        if cpu_seconds is not None:
            cpu_seconds.append(time.process_time() - iteration_cpu)
        if mean_returns is not None:
            mean_returns.append(iteration_summary(len(mean_returns), rewards_t, ends_t)["mean_return"])
    return (time.perf_counter() - started) / iterations
