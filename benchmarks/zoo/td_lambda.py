"""Online TD(lambda) policy evaluation with eligibility traces (`algorithms/td_lambda.py`: a linear value function,
updated at every step, under a uniformly random policy) against its eager twin, the same loop in PyTorch. The
return column is the random policy's; ``value_error`` (in the timerl curve) is what improves."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import torch

from algorithms import td_lambda
from algorithms.reinforce import iteration_summary
from benchmarks.zoo import from_curve

SIZES = [(8, 256), (64, 256)]
GAMMA, LAMBDA, ALPHA = 0.99, 0.9, 0.01


def run_timerl(envs: int, steps: int, iterations: int, backend: str, seed: int = 0) -> dict:
    curve = td_lambda.train(iterations=iterations, num_envs=envs, steps=steps, gamma=GAMMA, lam=LAMBDA, alpha=ALPHA,
                            seed=seed, backend=backend)
    return {**from_curve(curve), "value_error": [row["value_error"] for row in curve]}


def run_eager(envs: int, steps: int, iterations: int, seed: int = 0, env_name: str = "CartPole-v1") -> dict:
    torch.manual_seed(seed)
    vector = gym.vector.SyncVectorEnv([lambda: gym.make(env_name) for _ in range(envs)],
                                      autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    actions = int(vector.single_action_space.n)
    w = torch.zeros(int(np.prod(vector.single_observation_space.shape)) + 1)
    ones = torch.ones(envs, 1)
    out: dict = {"seconds": [], "cpu_seconds": [], "returns": [], "value_error": []}
    for iteration in range(iterations):
        started, cpu = time.perf_counter(), time.process_time()
        obs, _ = vector.reset(seed=seed + iteration)
        x = torch.cat([torch.as_tensor(obs, dtype=torch.float32), ones], -1)
        trace = x.clone()
        rewards, dones, values = [], [], []
        for _ in range(steps):
            action = torch.randint(actions, (envs,))
            obs, reward, terminated, truncated, _ = vector.step(action.numpy())
            not_done = torch.as_tensor(1.0 - (terminated | truncated), dtype=torch.float32)
            next_x = torch.cat([torch.as_tensor(obs, dtype=torch.float32), ones], -1)
            value = x @ w
            delta = torch.as_tensor(reward, dtype=torch.float32) + GAMMA * not_done * (next_x @ w) - value
            w = w + ALPHA * (delta.unsqueeze(-1) * trace).mean(0)
            trace = GAMMA * LAMBDA * not_done.unsqueeze(-1) * trace + next_x
            x = next_x
            rewards.append(reward)
            dones.append(1.0 - not_done.numpy())
            values.append(value.numpy())
        out["seconds"].append(time.perf_counter() - started)
        out["cpu_seconds"].append(time.process_time() - cpu)
        r, done = np.asarray(rewards, np.float32), np.asarray(dones, np.float32)
        out["returns"].append(iteration_summary(iteration, r, done)["mean_return"])
        error = np.mean((np.asarray(values) - td_lambda.monte_carlo_returns(r, done, GAMMA)) ** 2)
        out["value_error"].append(float(error))
    return out
