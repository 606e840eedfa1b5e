"""A2C with GAE (`algorithms/a2c.py`) against its eager twin: CartPole-v1, separate 64-64 tanh actor and critic,
one Adam step per iteration of ``envs x steps``, environments reset at every iteration."""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
import torch

from algorithms import a2c
from algorithms.reinforce import iteration_summary
from benchmarks.zoo import from_curve

SIZES = [(8, 256), (64, 256)]
GAMMA, LAMBDA, LR, ENT_COEF, VF_COEF, HIDDEN = 0.99, 0.95, 1e-3, 0.01, 0.5, 64


def run_timerl(envs: int, steps: int, iterations: int, backend: str, seed: int = 0) -> dict:
    return from_curve(a2c.train(iterations=iterations, num_envs=envs, steps=steps, backend=backend, seed=seed))


def run_eager(envs: int, steps: int, iterations: int, seed: int = 0) -> dict:
    return train_eager(envs, steps, iterations, seed)


def _mlp(n_in: int, n_out: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(n_in, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, HIDDEN),
                               torch.nn.Tanh(), torch.nn.Linear(HIDDEN, n_out))


def train_eager(envs: int, steps: int, iterations: int, seed: int = 0, n_step: int | None = None,
                env_name: str = "CartPole-v1", lr: float = LR) -> dict:
    """A2C as one would write it in PyTorch (CleanRL's layout): a rollout without gradients, then the actor's and
    critic's outputs over the whole batch, GAE (or ``n_step`` returns) by a backward loop, one Adam step."""
    torch.manual_seed(seed)
    vector = gym.vector.SyncVectorEnv([lambda: gym.make(env_name) for _ in range(envs)],
                                      autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    obs_size = int(np.prod(vector.single_observation_space.shape))
    actor, critic = _mlp(obs_size, int(vector.single_action_space.n)), _mlp(obs_size, 1)
    optimizer = torch.optim.Adam(list(actor.parameters()) + list(critic.parameters()), lr=lr)
    out: dict = {"seconds": [], "cpu_seconds": [], "returns": []}
    for iteration in range(iterations):
        started, cpu = time.perf_counter(), time.process_time()
        obs, _ = vector.reset(seed=seed + iteration)
        observations, next_observations, actions, rewards, dones = [], [], [], [], []
        with torch.no_grad():
            for _ in range(steps):
                observation = torch.as_tensor(obs, dtype=torch.float32)
                action = torch.distributions.Categorical(logits=actor(observation)).sample()
                obs, reward, terminated, truncated, _ = vector.step(action.numpy())
                observations.append(observation)
                actions.append(action)
                next_observations.append(torch.as_tensor(obs, dtype=torch.float32))
                rewards.append(reward)
                dones.append(terminated | truncated)
        o, a = torch.stack(observations), torch.stack(actions)
        r = torch.as_tensor(np.asarray(rewards, np.float32))
        done = torch.as_tensor(np.asarray(dones, np.float32))
        value = critic(o).squeeze(-1)
        with torch.no_grad():
            next_value = critic(torch.stack(next_observations)).squeeze(-1)
            if n_step is None:
                advantage = gae(r, done, value, next_value)
                ret = advantage + value
            else:
                ret = n_step_returns(r, done, next_value, n_step)
                advantage = ret - value
        pi = torch.distributions.Categorical(logits=actor(o))
        policy_loss = -(pi.log_prob(a) * advantage).mean(1).sum()
        value_loss = 0.5 * ((value - ret) ** 2).mean(1).sum()
        loss = policy_loss + VF_COEF * value_loss - ENT_COEF * pi.entropy().mean(1).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        out["seconds"].append(time.perf_counter() - started)
        out["cpu_seconds"].append(time.process_time() - cpu)
        out["returns"].append(iteration_summary(iteration, r.numpy(), done.numpy())["mean_return"])
    return out


def gae(r: torch.Tensor, done: torch.Tensor, value: torch.Tensor, next_value: torch.Tensor) -> torch.Tensor:
    advantage = torch.zeros_like(r)
    running = torch.zeros_like(r[0])
    for t in reversed(range(r.shape[0])):
        delta = r[t] + GAMMA * (1 - done[t]) * next_value[t] - value[t]
        running = delta + GAMMA * LAMBDA * (1 - done[t]) * running
        advantage[t] = running
    return advantage


def n_step_returns(r: torch.Tensor, done: torch.Tensor, next_value: torch.Tensor, n: int) -> torch.Tensor:
    """``sum_k gamma**k r[t+k]`` over ``t .. min(t+n, T) - 1`` up to the first episode end, plus
    ``gamma**len V(o[end])`` where no episode ends inside the window: one shift of the window per k."""
    steps = r.shape[0]
    ret, alive = torch.zeros_like(r), torch.ones_like(r)
    last = torch.zeros_like(r)
    for k in range(min(n, steps)):
        ret[:steps - k] += GAMMA ** k * r[k:] * alive[:steps - k]
        alive[:steps - k] *= 1.0 - done[k:]
        last[:steps - k] = next_value[k:]  # V(o[t + k + 1]), the last one the window reaches
    length = torch.clamp(steps - torch.arange(steps), max=n).to(r.dtype).unsqueeze(-1)
    return ret + alive * GAMMA ** length * last
