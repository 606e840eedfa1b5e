"""CartPole seen as pictures: gymnasium's CartPole-v1 whose observation is a ``3 x size x size`` float32 frame,
for the large-observation experiment (TimeRL paper §8.3, Fig. 10 and 11, at CPU scale).

    env = trl.rl.make_env("algorithms.pixel_cartpole:PixelCartPole-v0", num_envs=4, size=64)

The frame is drawn with NumPy, not pygame, so that a step costs little next to learning from it:
channel 0 is the cart (a block at its position on the track), channel 1 the pole (a line from the cart at
the pole's angle), channel 2 the previous frame's channels 0 and 1 summed, so that one frame shows which
way cart and pole move (the velocities a policy needs). Values are 0 or 1 (2 where channel 2 overlaps).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

_TRACK = 2.4  # CartPole's x limit: the frame spans [-2.4, 2.4]
_POLE_LENGTH = 1.0  # the drawn pole, in track units (CartPole's physical half-length is 0.5)


class PixelCartPole(gymnasium.Env):
    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, size: int = 64) -> None:
        if not isinstance(size, int) or size < 8:
            raise ValueError(f"size must be an int >= 8, got {size!r}")
        self.size = size
        self._cartpole = CartPoleEnv()
        self.action_space = self._cartpole.action_space
        self.observation_space = gymnasium.spaces.Box(0.0, 2.0, (3, size, size), np.float32)
        self._previous = np.zeros((size, size), np.float32)
        self._along = np.linspace(0.0, 1.0, 2 * size)  # points drawn along the pole

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        state, info = self._cartpole.reset(seed=seed, options=options)
        self._previous[:] = 0.0
        return self._frame(state), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        state, reward, terminated, truncated, info = self._cartpole.step(action)
        return self._frame(state), float(reward), terminated, truncated, info

    def _pixel(self, x: np.ndarray) -> np.ndarray:
        """Track coordinates in [-2.4, 2.4] to pixel indices."""
        return np.clip(((x + _TRACK) / (2 * _TRACK) * (self.size - 1)).round().astype(np.int64), 0, self.size - 1)

    def _frame(self, state: np.ndarray) -> np.ndarray:
        size = self.size
        frame = np.zeros((3, size, size), np.float32)
        position, _, angle, _ = (float(v) for v in state)
        base_row = size - 1 - size // 8
        cart = int(self._pixel(np.array(position)))
        half = max(1, size // 32)
        frame[0, base_row - half:base_row + half + 1, max(0, cart - 2 * half):cart + 2 * half + 1] = 1.0
        xs = position + _POLE_LENGTH * np.sin(angle) * self._along
        heights = _POLE_LENGTH * np.cos(angle) * self._along  # track units above the cart
        rows = np.clip(base_row - (heights / (2 * _TRACK) * (size - 1)).round().astype(np.int64), 0, size - 1)
        frame[1, rows, self._pixel(xs)] = 1.0
        frame[2] = self._previous
        self._previous = frame[0] + frame[1]
        return frame


gymnasium.register("PixelCartPole-v0", entry_point=PixelCartPole, max_episode_steps=500)
