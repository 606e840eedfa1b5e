"""Pendulum-v1 (gymnasium's ``PendulumEnv``) in RT ops.

gymnasium keeps ``(theta, theta_dot)`` in float64 but the action stays float32 where it meets a Python
float (``3.0 * u``, ``0.001 * u**2`` are float32 products under NumPy 2's promotion rules) before joining
the float64 sums; the same casts here make the trajectories agree to rounding. The pendulum never
terminates: episodes end by the 200-step time limit only.
"""

from __future__ import annotations

import math

from timerl.envs.base import RTEnvironment
from timerl.rt import functional as F
from timerl.rt.tensor import RecurrentTensor as RT

MAX_SPEED = 8.0
MAX_TORQUE = 2.0
DT = 0.05
G = 10.0
MASS = 1.0
LENGTH = 1.0


def angle_normalize(theta: RT) -> RT:
    return F.apply("remainder", theta + math.pi, 2 * math.pi) - math.pi


class Pendulum(RTEnvironment):
    name = "Pendulum-v1"
    observation_shape = (3,)
    action_shape = (1,)
    reset_low = (-math.pi, -1.0)
    reset_high = (math.pi, 1.0)
    max_episode_steps = 200

    def dynamics(self, state: RT, action: RT) -> tuple[RT, RT, RT]:
        theta, theta_dot = state.spatial[:, 0], state.spatial[:, 1]
        u = action.astype("float32").clip(-MAX_TORQUE, MAX_TORQUE).spatial[:, 0]
        effort = (0.001 * (u * u)).astype("float64")
        costs = angle_normalize(theta) * angle_normalize(theta) + 0.1 * (theta_dot * theta_dot) + effort
        torque = (3.0 / (MASS * LENGTH**2) * u).astype("float64")
        theta_dot = theta_dot + (3 * G / (2 * LENGTH) * F.apply("sin", theta) + torque) * DT
        theta_dot = theta_dot.clip(-MAX_SPEED, MAX_SPEED)
        theta = theta + theta_dot * DT
        terminated = F.full((self.num_envs,), False, "bool", domain=costs.domain)
        return F.stack([theta, theta_dot], dim=1), -costs, terminated

    def observe(self, state: RT) -> RT:
        theta, theta_dot = state.spatial[:, 0], state.spatial[:, 1]
        return F.stack([F.apply("cos", theta), F.apply("sin", theta), theta_dot], dim=1).astype("float32")
