"""MountainCar-v0 (gymnasium's ``MountainCarEnv``) in RT ops.

gymnasium computes in float64 (NumPy scalars and ``math.cos``); so does this, with the same order of
operations. Observations are the float32 cast of ``(position, velocity)``; the reward is -1 on every step;
an episode terminates on reaching the flag moving right, or ends by the 200-step time limit.
"""

from __future__ import annotations

from timerl.envs.base import RTEnvironment
from timerl.rt import functional as F
from timerl.rt.tensor import RecurrentTensor as RT

MIN_POSITION = -1.2
MAX_POSITION = 0.6
MAX_SPEED = 0.07
GOAL_POSITION = 0.5
GOAL_VELOCITY = 0.0
FORCE = 0.001
GRAVITY = 0.0025


class MountainCar(RTEnvironment):
    name = "MountainCar-v0"
    observation_shape = (2,)
    num_actions = 3
    reset_low = (-0.6, 0.0)  # the car starts at rest
    reset_high = (-0.4, 0.0)
    max_episode_steps = 200

    def dynamics(self, state: RT, action: RT) -> tuple[RT, RT, RT]:
        position, velocity = state.spatial[:, 0], state.spatial[:, 1]
        push = (action - 1).astype("float64") * FORCE
        velocity = velocity + (push + F.apply("cos", 3 * position) * (-GRAVITY))
        velocity = velocity.clip(-MAX_SPEED, MAX_SPEED)
        position = (position + velocity).clip(MIN_POSITION, MAX_POSITION)
        velocity = F.where((position == MIN_POSITION) & (velocity < 0), 0.0, velocity)  # the left wall stops it
        terminated = (position >= GOAL_POSITION) & (velocity >= GOAL_VELOCITY)
        reward = F.full((self.num_envs,), -1.0, "float32", domain=terminated.domain)
        return F.stack([position, velocity], dim=1), reward, terminated

    def observe(self, state: RT) -> RT:
        return state.astype("float32")
