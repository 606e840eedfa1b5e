"""DQN (`algorithms/dqn.py`) against its eager twin: CartPole-v1, a 120-84 ReLU Q-network, a replay buffer of
``CAPACITY`` transitions, a target network refreshed every ``TARGET_FREQUENCY`` steps, one Adam step on a
minibatch of ``BATCH`` every ``TRAIN_FREQUENCY`` steps after ``LEARNING_STARTS``; time-limit ends bootstrap
from the final observation. An iteration is ``steps`` steps of all ``envs`` environments."""

from __future__ import annotations

import copy
import time

import gymnasium as gym
import numpy as np
import torch

from algorithms import dqn

SIZES = [(4, 250), (8, 500)]
HYPER = dict(capacity=10_000, batch_size=128, gamma=0.99, lr=1e-3, target_frequency=100, train_frequency=1,
             learning_starts=200, start_epsilon=1.0, end_epsilon=0.05, exploration_fraction=0.5, hidden=(120, 84))


def run_timerl(envs: int, steps: int, iterations: int, backend: str, seed: int = 0, **changes) -> dict:
    curve = dqn.train(iterations=iterations, num_envs=envs, steps=steps, backend=backend, seed=seed,
                      **{**HYPER, **changes})
    return {"seconds": [row["seconds"] for row in curve], "cpu_seconds": [row["cpu_seconds"] for row in curve],
            "returns": [row["mean_return"] for row in curve]}


def run_eager(envs: int, steps: int, iterations: int, seed: int = 0, **changes) -> dict:
    return train_eager(envs, steps, iterations, seed, **{**HYPER, **changes})


def train_eager(envs: int, steps: int, iterations: int, seed: int, capacity: int, batch_size: int, gamma: float,
                lr: float, target_frequency: int, train_frequency: int, learning_starts: int, start_epsilon: float,
                end_epsilon: float, exploration_fraction: float, hidden: tuple[int, int],
                env_name: str = "CartPole-v1") -> dict:
    """DQN as CleanRL's dqn.py writes it (a ring buffer of tensors, a target network copied every K steps),
    with the timerl program's schedule: step ``t`` acts, stores its ``envs`` transitions, then learns."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    vector = gym.vector.SyncVectorEnv([lambda: gym.make(env_name) for _ in range(envs)],
                                      autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    obs_size, actions = int(np.prod(vector.single_observation_space.shape)), int(vector.single_action_space.n)
    sizes = [obs_size, *hidden, actions]
    layers: list[torch.nn.Module] = []
    for k in range(len(sizes) - 1):
        layers += [torch.nn.Linear(sizes[k], sizes[k + 1])] + ([torch.nn.ReLU()] if k < len(sizes) - 2 else [])
    q = torch.nn.Sequential(*layers)
    q_target = copy.deepcopy(q)
    optimizer = torch.optim.Adam(q.parameters(), lr=lr)
    window = max(1, capacity // envs)  # steps the buffer holds
    buffer = {"obs": torch.zeros((window, envs, obs_size)), "action": torch.zeros((window, envs), dtype=torch.int64),
              "reward": torch.zeros((window, envs)), "final": torch.zeros((window, envs, obs_size)),
              "terminated": torch.zeros((window, envs))}
    total, decay = iterations * steps, max(1, int(exploration_fraction * iterations * steps))
    obs, _ = vector.reset(seed=seed)
    out: dict = {"seconds": [], "cpu_seconds": [], "returns": []}
    lengths, returns, finished = np.zeros(envs), np.zeros(envs), []
    started, cpu = time.perf_counter(), time.process_time()
    for t in range(total):
        if t % target_frequency == 0:
            q_target.load_state_dict(q.state_dict())
        epsilon = min(max(start_epsilon + (end_epsilon - start_epsilon) * t / decay, end_epsilon), start_epsilon)
        observation = torch.as_tensor(obs, dtype=torch.float32)
        with torch.no_grad():
            greedy = q(observation).argmax(-1).numpy()
        explore = rng.random(envs) < epsilon
        action = np.where(explore, rng.integers(0, actions, envs), greedy)
        obs, reward, terminated, truncated, info = vector.step(action)
        final = np.array(obs, copy=True)
        for k in np.flatnonzero(info.get("_final_obs", np.zeros(envs, bool))):
            final[k] = info["final_obs"][k]
        slot = t % window
        buffer["obs"][slot] = observation
        buffer["action"][slot] = torch.as_tensor(action)
        buffer["reward"][slot] = torch.as_tensor(reward, dtype=torch.float32)
        buffer["final"][slot] = torch.as_tensor(final, dtype=torch.float32)
        buffer["terminated"][slot] = torch.as_tensor(terminated, dtype=torch.float32)
        lengths += 1
        returns += reward
        for k in np.flatnonzero(terminated | truncated):
            finished.append(returns[k])
            lengths[k], returns[k] = 0, 0.0
        if t >= learning_starts and t % train_frequency == 0:
            stored = min(t + 1, window) * envs
            sample = torch.as_tensor(rng.integers(0, stored, batch_size))
            b = {key: value[:min(t + 1, window)].reshape(-1, *value.shape[2:])[sample] for key, value in buffer.items()}
            with torch.no_grad():
                td_target = b["reward"] + gamma * q_target(b["final"]).max(-1).values * (1.0 - b["terminated"])
            predicted = q(b["obs"]).gather(-1, b["action"].unsqueeze(-1)).squeeze(-1)
            loss = ((predicted - td_target) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if t % steps == steps - 1:
            now, cpu_now = time.perf_counter(), time.process_time()
            out["seconds"].append(now - started)
            out["cpu_seconds"].append(cpu_now - cpu)
            out["returns"].append(float(np.mean(finished)) if finished else float("nan"))
            finished, started, cpu = [], now, cpu_now
    return out
