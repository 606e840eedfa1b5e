"""CartPole-v1 (gymnasium's ``CartPoleEnv``, Euler integrator) in RT ops.

gymnasium keeps the state in float64 and forms its constants in Python floats; the same constants, the same
order of operations and float64 state make the trajectories agree to rounding. Observations are the
float32 cast of the state, the reward is 1 on every step (the last one of an episode included).
"""

from __future__ import annotations

import math

from timerl.envs.base import RTEnvironment
from timerl.rt import functional as F
from timerl.rt.tensor import RecurrentTensor as RT

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_POLE + MASS_CART
LENGTH = 0.5  # half the pole's length
POLE_MASS_LENGTH = MASS_POLE * LENGTH
FORCE = 10.0
TAU = 0.02  # seconds between state updates
THETA_LIMIT = 12 * 2 * math.pi / 360
X_LIMIT = 2.4


class CartPole(RTEnvironment):
    name = "CartPole-v1"
    observation_shape = (4,)
    num_actions = 2
    reset_low = (-0.05,) * 4
    reset_high = (0.05,) * 4
    max_episode_steps = 500

    def dynamics(self, state: RT, action: RT) -> tuple[RT, RT, RT]:
        x, x_dot, theta, theta_dot = (state.spatial[:, k] for k in range(4))
        force = F.where(action == 1, FORCE, -FORCE).astype("float64")
        cos, sin = F.apply("cos", theta), F.apply("sin", theta)
        temp = (force + POLE_MASS_LENGTH * (theta_dot * theta_dot) * sin) / TOTAL_MASS
        theta_acc = (GRAVITY * sin - cos * temp) / (
            LENGTH * (4.0 / 3.0 - MASS_POLE * (cos * cos) / TOTAL_MASS))
        x_acc = temp - POLE_MASS_LENGTH * theta_acc * cos / TOTAL_MASS
        x = x + TAU * x_dot
        x_dot = x_dot + TAU * x_acc
        theta = theta + TAU * theta_dot
        theta_dot = theta_dot + TAU * theta_acc
        terminated = (x < -X_LIMIT) | (x > X_LIMIT) | (theta < -THETA_LIMIT) | (theta > THETA_LIMIT)
        reward = F.full((self.num_envs,), 1.0, "float32", domain=terminated.domain)
        return F.stack([x, x_dot, theta, theta_dot], dim=1), reward, terminated

    def observe(self, state: RT) -> RT:
        return state.astype("float32")
