"""A2C with a GRU policy (`algorithms/recurrent_a2c.py`: the hidden state a recurrence over ``t`` restarted at
episode ends, backpropagation through the whole iteration) against its eager twin (`torch.nn.GRUCell`, the
rollout without gradients, then the hidden states recomputed with them, CleanRL's ppo_atari_lstm layout)."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import torch

from algorithms import recurrent_a2c
from algorithms.reinforce import iteration_summary
from benchmarks.zoo import from_curve
from benchmarks.zoo.a2c_gae import ENT_COEF, VF_COEF, gae

SIZES = [(8, 128), (32, 256)]
HIDDEN, LR = 32, 1e-3


def run_timerl(envs: int, steps: int, iterations: int, backend: str, seed: int = 0) -> dict:
    return from_curve(recurrent_a2c.train(iterations=iterations, num_envs=envs, steps=steps, hidden=HIDDEN, lr=LR,
                                          backend=backend, seed=seed))


def run_eager(envs: int, steps: int, iterations: int, seed: int = 0, env_name: str = "CartPole-v1") -> dict:
    torch.manual_seed(seed)
    vector = gym.vector.SyncVectorEnv([lambda: gym.make(env_name) for _ in range(envs)],
                                      autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    obs_size = int(np.prod(vector.single_observation_space.shape))
    gru = torch.nn.GRUCell(obs_size, HIDDEN)
    policy_head, value_head = torch.nn.Linear(HIDDEN, int(vector.single_action_space.n)), torch.nn.Linear(HIDDEN, 1)
    optimizer = torch.optim.Adam([*gru.parameters(), *policy_head.parameters(), *value_head.parameters()], lr=LR)
    out: dict = {"seconds": [], "cpu_seconds": [], "returns": []}
    for iteration in range(iterations):
        started, cpu = time.perf_counter(), time.process_time()
        obs, _ = vector.reset(seed=seed + iteration)
        observations, actions, rewards, dones = [], [], [], []
        h = torch.zeros(envs, HIDDEN)
        with torch.no_grad():
            for _ in range(steps):
                observation = torch.as_tensor(obs, dtype=torch.float32)
                h = gru(observation, h)
                action = torch.distributions.Categorical(logits=policy_head(h)).sample()
                obs, reward, terminated, truncated, _ = vector.step(action.numpy())
                done = terminated | truncated
                observations.append(observation)
                actions.append(action)
                rewards.append(reward)
                dones.append(done)
                h = h * torch.as_tensor(1.0 - done, dtype=torch.float32).unsqueeze(-1)
            last_observation = torch.as_tensor(obs, dtype=torch.float32)
        r = torch.as_tensor(np.asarray(rewards, np.float32))
        done = torch.as_tensor(np.asarray(dones, np.float32))
        hidden, h = [], torch.zeros(envs, HIDDEN)
        for t in range(steps):  # the hidden states again, with gradients through the whole iteration
            h = gru(observations[t], h)
            hidden.append(h)
            h = h * (1.0 - done[t]).unsqueeze(-1)
        states = torch.stack(hidden)
        value = value_head(states).squeeze(-1)
        with torch.no_grad():
            last_value = value_head(gru(last_observation, h)).squeeze(-1)
            next_value = torch.cat([value[1:], last_value.unsqueeze(0)])
            advantage = gae(r, done, value, next_value)
            ret = advantage + value
        pi = torch.distributions.Categorical(logits=policy_head(states))
        policy_loss = -(pi.log_prob(torch.stack(actions)) * advantage).mean(1).sum()
        value_loss = 0.5 * ((value - ret) ** 2).mean(1).sum()
        loss = policy_loss + VF_COEF * value_loss - ENT_COEF * pi.entropy().mean(1).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        out["seconds"].append(time.perf_counter() - started)
        out["cpu_seconds"].append(time.process_time() - cpu)
        out["returns"].append(iteration_summary(iteration, r.numpy(), done.numpy())["mean_return"])
    return out
