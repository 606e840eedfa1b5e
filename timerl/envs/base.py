"""What every environment behind the RT interface shares: the checks on ``reset`` and ``step`` calls, and
`RTEnvironment`, a batch of environments whose dynamics are recurrent tensors.

An `RTEnvironment`'s state is a float64 placeholder over reset's domain plus the action's time dimension,
defined by one recurrence; so is the count of steps into the current episode, which implements the time
limit exactly like gymnasium's ``TimeLimit`` wrapper (``truncated`` when it reaches ``max_episode_steps``).
Autoreset is same-step, as for the gymnasium batch (see `timerl.rl`): where an episode ends at ``t``, the
state at ``t + 1`` is a fresh draw and the count restarts at 0.

Initial states are ``trl.rand`` draws, uniform in gymnasium's reset ranges, from the program's random
stream (``ctx.compile(seed=...)``): they cannot reproduce gymnasium's own ``np_random`` draws, and the
``seed`` given to `make_env` does not change them. Everything else (dynamics, rewards, terminations,
truncations) is gymnasium's arithmetic, in the same precision, so trajectories from the same state under
the same actions agree with gymnasium's to rounding. Actions are not validated while the program runs
(that would take a host callback): a discrete action other than 1 pushes CartPole left like 0 does, and a
NaN torque makes a NaN pendulum.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from timerl.errors import ShapeError, TimeRLError, bool_argument, user_location
from timerl.rt import functional as F
from timerl.rt.context import current_context
from timerl.rt.placeholder import placeholder
from timerl.symbolic import Symbol
from timerl.rt.tensor import RecurrentTensor

RT = RecurrentTensor


class ActionError(TimeRLError):
    """An action the environment cannot take: wrong shape or dtype, out of range, NaN or infinite."""


def check_num_envs(num_envs: object) -> int:
    if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool) or num_envs < 1:
        raise TimeRLError(f"{user_location()}: num_envs must be a positive int, got {num_envs!r}")
    return int(num_envs)


def check_reset_domain(name: str, domain: Sequence[Symbol], already_reset: bool) -> tuple[Symbol, ...]:
    current_context()  # raises outside `with ctx:`
    domain = tuple(domain)
    if already_reset:
        raise TimeRLError(f"{user_location()}: {name}: reset() is called once per program; "
                          "make another environment for another rollout")
    if len(domain) > 1:
        raise TimeRLError(f"{user_location()}: {name}: reset(domain=...) takes at most one dimension "
                          f"(one batch of environments is stepped in one order), got {len(domain)}")
    return domain


def step_domain(env, action: object, outer: tuple[Symbol, ...] | None, stepped: bool
                ) -> tuple[tuple[Symbol, ...], Symbol, Symbol | None]:
    """Checks a ``step(action)`` call; returns the action's domain (reset's, then at most one dimension the
    episodes continue across, then time), the time dimension, and the continued dimension (None when
    reset's domain is all but time: episodes restart at every point of it)."""
    location = user_location()
    if outer is None:
        raise TimeRLError(f"{location}: {env.name}: call env.reset() or env.reset(domain=...) before env.step(...)")
    if stepped:
        raise TimeRLError(f"{location}: {env.name}: step() is called once per program")
    if not isinstance(action, RT):
        raise ActionError(f"{location}: env.step needs a recurrent tensor action, got {type(action).__name__}")
    _check_action_type(env, action)
    steps = action.ctx.order_dims(set(action.domain) | set(outer))
    outer_ids = {id(d) for d in outer}
    later = [d for d in steps if id(d) not in outer_ids]
    if not 1 <= len(later) <= 2 or [id(d) for d in steps[:len(outer)]] != [id(d) for d in outer]:
        raise TimeRLError(f"{location}: {env.name}: the action (created at {action.node.location}) must vary "
                          f"over reset's domain ({', '.join(d.name for d in outer)}) plus one later time "
                          "dimension, or plus an iteration and a time dimension (episodes then continue from "
                          f"one iteration to the next); it varies over ({', '.join(d.name for d in action.domain)})")
    return steps, later[-1], later[0] if len(later) == 2 else None


def carry_across(target: RT, outer: tuple[Symbol, ...], first: object, after: RT, t: Symbol,
                 continued: Symbol | None) -> None:
    """Defines the per-step ``target`` (over ``steps``) from one step to the next: ``first`` at the first
    step, ``after`` at ``t`` for ``t + 1``, and, where episodes continue across ``continued``, the last
    step's ``after`` for the first step of the next point of ``continued``."""
    if continued is None:
        target[(*outer, 0)] = first
        target[(*outer, t + 1)] = after
        return
    last = target.ctx.bound_of(t) - 1
    target[(*outer, 0, 0)] = first
    target[(*outer, continued + 1, 0)] = after[(*outer, continued, last)]
    target[(*outer, continued, t + 1)] = after


def _check_action_type(env, action: RT) -> None:
    expected = (env.num_envs, *env.action_shape)
    where = f"{user_location()}: {env.name}: the action created at {action.node.location}"
    if tuple(action.shape) != expected or not all(isinstance(s, int) for s in action.shape):
        raise ShapeError(f"{where} has shape {tuple(action.shape)}; the environment takes {expected} "
                         f"(num_envs, *action_shape)")
    kind = np.dtype(action.dtype).kind if action.dtype != "bfloat16" else "f"
    if env.num_actions is not None and kind not in "iu":
        raise ShapeError(f"{where} has dtype {action.dtype}; discrete actions are integers in "
                         f"[0, {env.num_actions})")
    if env.num_actions is None and kind != "f":
        raise ShapeError(f"{where} has dtype {action.dtype}; continuous actions are floats")


class RTEnvironment:
    """A batch of ``num_envs`` environments written in RT ops. A subclass gives gymnasium's constants as
    class attributes and writes `dynamics` and `observe`."""

    name: str
    observation_shape: tuple[int, ...]
    num_actions: int | None = None  # discrete environments
    action_shape: tuple[int, ...] = ()  # continuous ones
    reset_low: tuple[float, ...]  # gymnasium's uniform reset range, one entry per state component
    reset_high: tuple[float, ...]
    max_episode_steps: int
    observation_dtype = "float32"
    simulator = "rt"

    def __init__(self, num_envs: int, seed: int = 0, max_episode_steps: int | None = None) -> None:
        """``max_episode_steps`` overrides the time limit, like ``gymnasium.make``'s argument of that name."""
        self.num_envs, self.seed = check_num_envs(num_envs), seed
        if max_episode_steps is not None:
            if not isinstance(max_episode_steps, int) or isinstance(max_episode_steps, bool) or max_episode_steps < 1:
                raise TimeRLError(f"{user_location()}: max_episode_steps must be a positive int, "
                                  f"got {max_episode_steps!r}")
            self.max_episode_steps = max_episode_steps
        self.state: RT | None = None  # after step(): the float64 state each step starts from
        self._outer: tuple[Symbol, ...] | None = None
        self._first: RT | None = None
        self._stepped = False

    @property
    def discrete(self) -> bool:
        return self.num_actions is not None

    @property
    def episodes(self) -> list:
        raise TimeRLError(f"{user_location()}: {self.name}: the RT simulator runs no host code, so it keeps no "
                          "list of episodes; sink the rewards and ends (r[i, 0:T], terminated[i, 0:T]) and "
                          "count them with trl.rl.episode_statistics")

    @property
    def state_shape(self) -> tuple[int, ...]:
        return (self.num_envs, len(self.reset_low))

    def __repr__(self) -> str:
        actions = f"num_actions={self.num_actions}" if self.discrete else f"action_shape={self.action_shape}"
        return (f"{type(self).__name__}({self.name!r}, num_envs={self.num_envs}, "
                f"observation_shape={self.observation_shape}, {actions})")

    # ---- what a subclass writes -----------------------------------------------------------------------------
    def dynamics(self, state: RT, action: RT) -> tuple[RT, RT, RT]:
        """``next_state`` (float64, ``state_shape``), ``reward`` and ``terminated`` (``(num_envs,)``) of
        one step from ``state`` under ``action``, before any time limit or reset."""
        raise NotImplementedError

    def observe(self, state: RT) -> RT:
        """The float32 observation of a state."""
        raise NotImplementedError

    # ---- the interface -------------------------------------------------------------------------------------
    def reset(self, domain: Sequence[Symbol] = ()) -> RT:
        """The first observations, shape ``(num_envs, *observation_shape)``, at every point of ``domain``."""
        self._outer = check_reset_domain(self.name, domain, self._outer is not None)
        self._first = self._draw(self._outer)
        return self.observe(self._first)

    def step(self, action: RT, truncation: bool = False) -> tuple[RT, ...]:
        """``obs, reward, terminated`` over the action's domain; ``terminated`` marks every episode end,
        time limits included, and ``obs`` after an end is the next episode's first observation. With
        ``truncation=True``: ``obs, reward, terminated, truncated, final_obs``, gymnasium's meanings
        (``terminated`` only where the dynamics end the episode, ``truncated`` where the time limit does,
        ``final_obs`` the observation the step reached, before any reset)."""
        truncation = bool_argument("truncation", truncation)
        steps, t, continued = step_domain(self, action, self._outer, self._stepped)
        self._stepped = True
        outer, n = self._outer, self.num_envs
        state = placeholder(self.state_shape, "float64", steps)
        self.state = state
        elapsed = placeholder((n,), "int64", steps)  # steps taken in the current episode

        next_state, reward, terminated = self.dynamics(state, action)
        elapsed_after = elapsed + 1
        truncated = elapsed_after >= self.max_episode_steps
        ended = terminated | truncated
        fresh = self._draw(steps)
        after = F.where(ended.unsqueeze(1), fresh, next_state)
        carry_across(state, outer, self._first, after, t, continued)
        carry_across(elapsed, outer, F.zeros((n,), "int64"), F.where(ended, F.zeros((n,), "int64"), elapsed_after),
                     t, continued)
        if truncation:
            return self.observe(after), reward.astype("float32"), terminated, truncated, self.observe(next_state)
        return self.observe(after), reward.astype("float32"), ended

    def _draw(self, domain: tuple[Symbol, ...]) -> RT:
        """Uniform in ``[reset_low, reset_high)`` per component, like gymnasium's ``np_random.uniform``."""
        low = np.asarray(self.reset_low, dtype=np.float64)
        high = np.asarray(self.reset_high, dtype=np.float64)
        uniform = F.rand(self.state_shape, "float64", domain)
        return F.tensor(low, "float64") + F.tensor(high - low, "float64") * uniform
