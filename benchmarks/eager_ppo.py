"""Eager PyTorch PPO in the usual CleanRL shape, configured like `algorithms.ppo`: the baseline of every PPO
comparison (``timerl bench ppo``, ``benchmarks/ppo_sweep.py``).

Same environment protocol as timerl's (environments reset once and kept running across iterations, as in
CleanRL, same-step autoreset),
same networks (2 x ``hidden`` tanh MLPs, orthogonal initialization), same loss (clipped surrogate, value
loss, entropy bonus, advantage normalization), Adam with ``eps=1e-5`` and gradient-norm clipping.

Peak memory is counted as the bytes the training state needs at once: the parameters and Adam's moments,
the rollout buffers of one iteration, and the activations autograd saves for one minibatch's backward
(measured with `torch.autograd.graph.saved_tensors_hooks`); timerl's ``peak_device_bytes`` counts the same
kinds of tensors in its memory pool.
"""

from __future__ import annotations

import argparse

import time

import gymnasium
import numpy as np
import torch
from torch import nn

from algorithms.reinforce import continuing_summary
from timerl.rl import RunningEpisodes


def _layer(n_in: int, n_out: int, gain: float) -> nn.Linear:
    layer = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_size: int, actions: int, hidden: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(_layer(obs_size, hidden, 2 ** 0.5), nn.Tanh(), _layer(hidden, hidden, 2 ** 0.5),
                                    nn.Tanh(), _layer(hidden, 1, 1.0))
        self.actor = nn.Sequential(_layer(obs_size, hidden, 2 ** 0.5), nn.Tanh(), _layer(hidden, hidden, 2 ** 0.5),
                                   nn.Tanh(), _layer(hidden, actions, 0.01))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def act(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        dist = torch.distributions.Categorical(logits=self.actor(obs))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.value(obs)


class _SavedBytes:
    """Bytes of the tensors autograd keeps for backward, at their peak."""

    def __init__(self) -> None:
        self.live = self.peak = 0

    def pack(self, tensor: torch.Tensor):
        size = tensor.numel() * tensor.element_size()
        self.live += size
        self.peak = max(self.peak, self.live)
        return tensor, size

    def unpack(self, packed):
        return packed[0]

    def reset(self) -> None:
        self.live = 0


def train_eager(env_name: str = "CartPole-v1", iterations: int = 10, num_envs: int = 64, steps: int = 100,
                epochs: int = 1, minibatches: int = 1, hidden: int = 64, gamma: float = 0.99,
                gae_lambda: float = 0.95, clip_coef: float = 0.2, ent_coef: float = 0.01, vf_coef: float = 0.5,
                lr: float = 2.5e-4, max_grad_norm: float = 0.5, seed: int = 0, obs_padding: int = 0,
                warmup: int = 1) -> dict[str, float]:
    """Seconds per iteration (after ``warmup`` iterations; wall, and CPU as ``cpu_seconds_per_iteration``),
    peak bytes, and the learning curve (``curve``: one `continuing_summary` per iteration, warmup included);
    ``obs_padding`` appends zeros to each observation (the observation-size sweep). Neither time counts making
    the environments and the networks."""
    torch.manual_seed(seed)
    envs = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make(env_name) for _ in range(num_envs)],
                                          autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)
    obs_size = int(np.prod(envs.single_observation_space.shape)) + obs_padding
    agent = Agent(obs_size, int(envs.single_action_space.n), hidden)
    optimizer = torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5)
    batch, minibatch = num_envs * steps, num_envs * steps // minibatches
    saved = _SavedBytes()

    def observe(raw: np.ndarray) -> torch.Tensor:
        obs = torch.as_tensor(raw, dtype=torch.float32)
        return torch.nn.functional.pad(obs, (0, obs_padding)) if obs_padding else obs

    obs_buf = torch.zeros((steps, num_envs, obs_size))
    actions, logprobs, rewards, dones, values = (torch.zeros((steps, num_envs)) for _ in range(5))
    timings, cpu_timings, curve = [], [], []
    counted = RunningEpisodes(num_envs)
    next_obs = observe(envs.reset(seed=seed)[0])
    for iteration in range(iterations + warmup):
        started, cpu_started = time.perf_counter(), time.process_time()
        with torch.no_grad():
            for step in range(steps):
                obs_buf[step] = next_obs
                action, logprob, _, value = agent.act(next_obs)
                raw, reward, terminated, truncated, _ = envs.step(action.numpy())
                actions[step], logprobs[step], values[step] = action, logprob, value
                rewards[step] = torch.as_tensor(reward)
                dones[step] = torch.as_tensor(np.logical_or(terminated, truncated), dtype=torch.float32)
                next_obs = observe(raw)
            advantages = torch.zeros_like(rewards)
            running = torch.zeros(num_envs)
            next_value = agent.value(next_obs)
            for step in reversed(range(steps)):
                not_done = 1.0 - dones[step]
                delta = rewards[step] + gamma * not_done * next_value - values[step]
                running = delta + gamma * gae_lambda * not_done * running
                advantages[step], next_value = running, values[step]
            returns = advantages + values
        b_obs, b_actions, b_logprobs = obs_buf.reshape(batch, obs_size), actions.reshape(-1), logprobs.reshape(-1)
        b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)
        for _ in range(epochs):
            order = torch.randperm(batch)
            for start in range(0, batch, minibatch):
                index = order[start:start + minibatch]
                saved.reset()
                with torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
                    _, new_logprob, entropy, new_value = agent.act(b_obs[index], b_actions[index].long())
                    adv = b_advantages[index]
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                    ratio = (new_logprob - b_logprobs[index]).exp()
                    pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip_coef, 1 + clip_coef)).mean()
                    v_loss = 0.5 * ((new_value - b_returns[index]) ** 2).mean()
                    loss = pg_loss - ent_coef * entropy.mean() + vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), max_grad_norm)
                optimizer.step()
        curve.append(continuing_summary(iteration, counted, rewards.numpy(), dones.numpy()))
        if iteration >= warmup:
            timings.append(time.perf_counter() - started)
            cpu_timings.append(time.process_time() - cpu_started)
    envs.close()
    state = sum(p.numel() * p.element_size() * 4 for p in agent.parameters())  # weights, grads, 2 moments
    buffers = sum(t.numel() * t.element_size() for t in (obs_buf, actions, logprobs, rewards, dones, values,
                                                         advantages, returns))
    return {"seconds_per_iteration": float(np.mean(timings)), "peak_bytes": state + buffers + saved.peak,
            "cpu_seconds_per_iteration": float(np.mean(cpu_timings)), "curve": curve}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.eager_ppo", description="eager PyTorch PPO on CartPole")
    parser.add_argument("--iterations", type=int, default=5)
    print(train_eager(iterations=parser.parse_args().iterations))
