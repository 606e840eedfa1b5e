"""PPO with continuous actions on Pendulum-v1 (`algorithms/ppo.py`: a Normal policy with a state-independent
log-std, actions clipped to [-2, 2] when taken, 4 epochs x 4 minibatches per iteration, the critic learning
rewards scaled by 0.1) against its eager twin in the shape of CleanRL's ppo_continuous_action.py."""

from __future__ import annotations

import math
import time

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from algorithms import ppo
from algorithms.reinforce import iteration_summary
from benchmarks.eager_ppo import _layer
from benchmarks.zoo import from_curve

SIZES = [(8, 200), (64, 200)]
EPOCHS, MINIBATCHES, LR, HIDDEN, REWARD_SCALE = 4, 4, 3e-4, 64, 0.1
GAMMA, LAMBDA, CLIP, ENT_COEF, VF_COEF, MAX_GRAD_NORM = 0.99, 0.95, 0.2, 0.0, 0.5, 0.5


def run_timerl(envs: int, steps: int, iterations: int, backend: str, seed: int = 0) -> dict:
    curve = ppo.train("Pendulum-v1", iterations=iterations, num_envs=envs, steps=steps, epochs=EPOCHS,
                      minibatches=MINIBATCHES, lr=LR, ent_coef=ENT_COEF, hidden=HIDDEN, seed=seed, backend=backend,
                      reward_scale=REWARD_SCALE)
    return from_curve(curve)


def run_eager(envs: int, steps: int, iterations: int, seed: int = 0) -> dict:
    torch.manual_seed(seed)
    vector = gym.vector.SyncVectorEnv([lambda: gym.make("Pendulum-v1") for _ in range(envs)],
                                      autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    obs_size, act_size = vector.single_observation_space.shape[0], vector.single_action_space.shape[0]
    actor = nn.Sequential(_layer(obs_size, HIDDEN, math.sqrt(2)), nn.Tanh(), _layer(HIDDEN, HIDDEN, math.sqrt(2)),
                          nn.Tanh(), _layer(HIDDEN, act_size, 0.01))
    critic = nn.Sequential(_layer(obs_size, HIDDEN, math.sqrt(2)), nn.Tanh(), _layer(HIDDEN, HIDDEN, math.sqrt(2)),
                           nn.Tanh(), _layer(HIDDEN, 1, 1.0))
    log_std = nn.Parameter(torch.zeros(act_size))
    params = [*actor.parameters(), *critic.parameters(), log_std]
    optimizer = torch.optim.Adam(params, lr=LR, eps=1e-5)
    batch = envs * steps
    minibatch = batch // MINIBATCHES
    out: dict = {"seconds": [], "cpu_seconds": [], "returns": []}
    for iteration in range(iterations):
        started, cpu = time.perf_counter(), time.process_time()
        obs, _ = vector.reset(seed=seed + iteration)
        observations, actions, logprobs, rewards, dones, values = [], [], [], [], [], []
        with torch.no_grad():
            for _ in range(steps):
                observation = torch.as_tensor(obs, dtype=torch.float32)
                dist = torch.distributions.Normal(actor(observation), log_std.exp())
                action = dist.sample()
                obs, reward, terminated, truncated, _ = vector.step(action.clamp(-2.0, 2.0).numpy())
                observations.append(observation)
                actions.append(action)
                logprobs.append(dist.log_prob(action).sum(-1))
                values.append(critic(observation).squeeze(-1))
                rewards.append(reward)
                dones.append(terminated | truncated)
            r = torch.as_tensor(np.asarray(rewards, np.float32))
            done = torch.as_tensor(np.asarray(dones, np.float32))
            value = torch.stack(values)
            next_value = torch.cat([value[1:], critic(torch.as_tensor(obs, dtype=torch.float32)).squeeze(-1)[None]])
            advantage = torch.zeros_like(r)
            running = torch.zeros(envs)
            for t in reversed(range(steps)):
                not_done = 1.0 - done[t]
                delta = REWARD_SCALE * r[t] + GAMMA * not_done * next_value[t] - value[t]
                running = delta + GAMMA * LAMBDA * not_done * running
                advantage[t] = running
            ret = advantage + value
        b_obs, b_actions = torch.stack(observations).reshape(batch, obs_size), torch.stack(actions).reshape(batch, -1)
        b_logprobs, b_adv, b_ret = torch.stack(logprobs).reshape(-1), advantage.reshape(-1), ret.reshape(-1)
        for _ in range(EPOCHS):
            order = torch.randperm(batch)
            for start in range(0, batch, minibatch):
                index = order[start:start + minibatch]
                dist = torch.distributions.Normal(actor(b_obs[index]), log_std.exp())
                new_logprob = dist.log_prob(b_actions[index]).sum(-1)
                adv = b_adv[index]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                log_ratio = new_logprob - b_logprobs[index]
                ratio = log_ratio.exp()
                pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - CLIP, 1 + CLIP)).mean()
                v_loss = 0.5 * ((critic(b_obs[index]).squeeze(-1) - b_ret[index]) ** 2).mean()
                loss = pg_loss - ENT_COEF * dist.entropy().sum(-1).mean() + VF_COEF * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, MAX_GRAD_NORM)
                optimizer.step()
        out["seconds"].append(time.perf_counter() - started)
        out["cpu_seconds"].append(time.process_time() - cpu)
        out["returns"].append(iteration_summary(iteration, r.numpy(), done.numpy())["mean_return"])
    return out
