"""Acrobot-v1 (gymnasium's ``AcrobotEnv``, the "book" dynamics, no torque noise) in RT ops.

gymnasium integrates one 0.2 s step with a single classical Runge-Kutta step in float64, NumPy scalars
folded left to right with Python-float constants; the same grouping here (constants written where
gymnasium's are, so Python folds them alike) makes the trajectories agree to rounding. Its reset draws are
float32 (``uniform(...).astype(np.float32)``) and so are ours. The angles wrap into ``[-pi, pi]`` by repeated
subtraction (``wrap``): with velocities bounded, a step moves an angle by less than two turns.
"""

from __future__ import annotations

from math import pi

from timerl.envs.base import RTEnvironment
from timerl.rt import functional as F
from timerl.rt.tensor import RecurrentTensor as RT

DT = 0.2
L1 = 1.0  # link lengths, masses, centres of mass, moments of inertia
M1 = M2 = 1.0
LC1 = LC2 = 0.5
I1 = I2 = 1.0
G = 9.8
MAX_VEL_1 = 4 * pi
MAX_VEL_2 = 9 * pi


def _cos(x: RT) -> RT:
    return F.apply("cos", x)


def _sin(x: RT) -> RT:
    return F.apply("sin", x)


def derivatives(theta1: RT, theta2: RT, dtheta1: RT, dtheta2: RT, torque: RT) -> tuple[RT, RT, RT, RT]:
    """gymnasium's ``_dsdt`` (the torque's own derivative, 0, is left out)."""
    d1 = M1 * LC1**2 + M2 * (L1**2 + LC2**2 + 2 * L1 * LC2 * _cos(theta2)) + I1 + I2
    d2 = M2 * (LC2**2 + L1 * LC2 * _cos(theta2)) + I2
    phi2 = M2 * LC2 * G * _cos(theta1 + theta2 - pi / 2.0)
    phi1 = (-M2 * L1 * LC2 * (dtheta2 * dtheta2) * _sin(theta2)
            - 2 * M2 * L1 * LC2 * dtheta2 * dtheta1 * _sin(theta2)
            + (M1 * LC1 + M2 * L1) * G * _cos(theta1 - pi / 2)
            + phi2)
    ddtheta2 = ((torque + d2 / d1 * phi1 - M2 * L1 * LC2 * (dtheta1 * dtheta1) * _sin(theta2) - phi2)
                / (M2 * LC2**2 + I2 - (d2 * d2) / d1))
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return dtheta1, dtheta2, ddtheta1, ddtheta2


def _wrap(x: RT) -> RT:
    for _ in range(2):
        x = F.where(x > pi, x - 2 * pi, x)
    for _ in range(2):
        x = F.where(x < -pi, x + 2 * pi, x)
    return x


class Acrobot(RTEnvironment):
    name = "Acrobot-v1"
    observation_shape = (6,)
    num_actions = 3
    reset_low = (-0.1,) * 4
    reset_high = (0.1,) * 4
    max_episode_steps = 500

    def dynamics(self, state: RT, action: RT) -> tuple[RT, RT, RT]:
        y0 = [state.spatial[:, k] for k in range(4)]
        torque = (action - 1).astype("float64")  # gymnasium's AVAIL_TORQUE[a]: -1, 0, 1
        k1 = derivatives(*y0, torque)
        k2 = derivatives(*(y + DT / 2.0 * k for y, k in zip(y0, k1)), torque)
        k3 = derivatives(*(y + DT / 2.0 * k for y, k in zip(y0, k2)), torque)
        k4 = derivatives(*(y + DT * k for y, k in zip(y0, k3)), torque)
        theta1, theta2, dtheta1, dtheta2 = (
            y + DT / 6.0 * (a + 2 * b + 2 * c + d) for y, a, b, c, d in zip(y0, k1, k2, k3, k4))
        theta1, theta2 = _wrap(theta1), _wrap(theta2)
        dtheta1 = dtheta1.clip(-MAX_VEL_1, MAX_VEL_1)
        dtheta2 = dtheta2.clip(-MAX_VEL_2, MAX_VEL_2)
        terminated = -_cos(theta1) - _cos(theta2 + theta1) > 1.0
        reward = F.where(terminated, 0.0, -1.0).astype("float32")
        return F.stack([theta1, theta2, dtheta1, dtheta2], dim=1), reward, terminated

    def observe(self, state: RT) -> RT:
        theta1, theta2 = state.spatial[:, 0], state.spatial[:, 1]
        parts = [_cos(theta1), _sin(theta1), _cos(theta2), _sin(theta2), state.spatial[:, 2], state.spatial[:, 3]]
        return F.stack(parts, dim=1).astype("float32")

    def _draw(self, domain: tuple) -> RT:
        return super()._draw(domain).astype("float32").astype("float64")
