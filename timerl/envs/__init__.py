"""Environments whose dynamics are recurrent tensors (``trl.rl.make_env(..., simulator="rt")``)."""

from timerl.envs.acrobot import Acrobot
from timerl.envs.base import ActionError, RTEnvironment
from timerl.envs.cartpole import CartPole
from timerl.envs.mountain_car import MountainCar
from timerl.envs.pendulum import Pendulum

ENVIRONMENTS: dict[str, type[RTEnvironment]] = {env.name: env for env in (Acrobot, CartPole, MountainCar, Pendulum)}

__all__ = ["Acrobot", "ActionError", "CartPole", "ENVIRONMENTS", "MountainCar", "Pendulum", "RTEnvironment"]
