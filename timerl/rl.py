"""Environments behind the recurrent-tensor interface: a batch of gymnasium environments as two `udf` nodes,
or (``simulator="rt"``) environments whose dynamics are RT ops themselves (`timerl.envs`).

```python
env = trl.rl.make_env("CartPole-v1", num_envs=16, seed=0)
o = trl.placeholder((16, *env.observation_shape), domain=(i, t))
o[i, 0] = env.reset(domain=(i,))
o[i, t + 1], r, terminated = env.step(action)          # action over (i, t)
```

Autoreset is *same-step* (gymnasium's ``AutoresetMode.SAME_STEP``): when an episode ends at step ``t``,
``terminated[..., t]`` is true, ``reward[..., t]`` is its last reward, and ``obs[..., t]`` (which becomes
``o[i, t + 1]``) is already the first observation of the next episode. An episode that ends by the time
limit (gymnasium's ``truncated``) also counts as ended: no return may flow across it either.

Environments are stateful, so their udf nodes are chained by zero-size *order tokens*, real data edges that
any executor (the lazy reference interpreter or a polyhedral scheduler) must respect:
- ``step`` at ``(i, t)`` reads its own token at ``(i, t - 1)``, or ``reset``'s token at ``i`` when ``t = 0``;
- ``reset`` at ``i >= 1`` reads ``step``'s token at ``(i - 1, T - 1)``: the previous iteration's last step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import gymnasium
import numpy as np

from timerl.envs import ENVIRONMENTS, RTEnvironment
from timerl.envs.base import ActionError, carry_across, check_num_envs, check_reset_domain, step_domain
from timerl.errors import ArgumentError, TimeRLError, bool_argument, int_argument, str_argument, user_location
from timerl.pdg.graph import Edge, TensorType
from timerl.rt import functional as F
from timerl.rt.placeholder import placeholder
from timerl.symbolic import Symbol
from timerl.rt.tensor import RecurrentTensor

RT = RecurrentTensor
_TOKEN = TensorType((0,), "float32")
_NO_TOKEN = np.zeros((0,), np.float32)


@dataclass(frozen=True)
class Episode:
    """A completed episode: where it ended (the step's point), which environment, its length and return."""

    point: dict
    env: int
    length: int
    total_return: float


SIMULATORS = ("gymnasium", "rt")


def make_env(name: str, num_envs: int = 16, seed: int = 0, simulator: str = "gymnasium",
             **kwargs: Any) -> Env | RTEnvironment:
    """A batch of ``num_envs`` environments with the same RT interface:
    - ``simulator="gymnasium"``: ``gymnasium.make(name, **kwargs)`` environments, seeded ``seed + k``,
      stepped on the host;
    - ``simulator="rt"``: the dynamics as RT ops (CartPole-v1, Pendulum-v1, MountainCar-v0, Acrobot-v1:
      see `timerl.envs`), no host code at run time; ``max_episode_steps`` overrides the time limit.
      Initial states come from the program's random stream (``ctx.compile(seed=...)``), uniform in
      gymnasium's ranges; they cannot match gymnasium's draws and ``seed`` does not change them."""
    str_argument("name", name)
    int_argument("seed", seed)
    if simulator == "gymnasium":
        return Env(name, num_envs, seed, **kwargs)
    if simulator != "rt":
        raise TimeRLError(f"{user_location()}: simulator={simulator!r}: choose one of {', '.join(SIMULATORS)}")
    if name not in ENVIRONMENTS:
        raise TimeRLError(f"{user_location()}: no RT simulator for {name!r}; there are "
                          f"{', '.join(sorted(ENVIRONMENTS))} (simulator='gymnasium' runs any gymnasium env)")
    unknown = set(kwargs) - {"max_episode_steps"}
    if unknown:
        raise TimeRLError(f"{user_location()}: the RT {name} takes only max_episode_steps of gymnasium's "
                          f"options, got {', '.join(sorted(unknown))}")
    return ENVIRONMENTS[name](num_envs, seed, **kwargs)


class Env:
    simulator = "gymnasium"

    def __init__(self, name: str, num_envs: int = 16, seed: int = 0, **kwargs: Any) -> None:
        num_envs = check_num_envs(num_envs)
        name, seed = str_argument("name", name), int_argument("seed", seed)
        try:
            self._vector = gymnasium.vector.SyncVectorEnv(
                [lambda: gymnasium.make(name, **kwargs) for _ in range(num_envs)],
                autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP)
        except Exception as error:  # gymnasium's own errors, and an option the environment does not take
            kind = ArgumentError if isinstance(error, TypeError) else TimeRLError
            raise kind(f"{user_location()}: cannot make environment {name!r}"
                       f"{' with ' + ', '.join(sorted(kwargs)) if kwargs else ''}: {type(error).__name__}: "
                       f"{error}") from error
        self.name, self.num_envs, self.seed = name, num_envs, seed
        observation_space = self._vector.single_observation_space
        action_space = self._vector.single_action_space
        if not isinstance(observation_space, gymnasium.spaces.Box):
            raise TimeRLError(f"{user_location()}: {name}: only Box observation spaces are supported")
        self.observation_shape: tuple[int, ...] = tuple(observation_space.shape)
        self.observation_dtype = str(np.dtype(observation_space.dtype))
        if isinstance(action_space, gymnasium.spaces.Discrete):
            self.num_actions: int | None = int(action_space.n)
            self.action_shape: tuple[int, ...] = ()
            self._action_start = int(action_space.start)
        elif isinstance(action_space, gymnasium.spaces.Box):
            self.num_actions = None
            self.action_shape = tuple(action_space.shape)
        else:
            raise TimeRLError(f"{user_location()}: {name}: only Discrete and Box action spaces are supported")
        # every completed episode, in the order they end, kept per step as arrays (`episodes` makes the records)
        self._ended: list[tuple[dict, np.ndarray, np.ndarray, np.ndarray]] = []
        self._episodes: list[Episode] = []
        self._reset_view: RT | None = None
        self._reset_chain: RT | None = None
        self._stepped = False
        self._continues = False  # episodes continue from one iteration to the next (reset's domain lacks it)
        self._next: tuple[int, ...] | None = None  # the step point that must run next (ordering check)
        self._lengths = np.zeros(num_envs, dtype=np.int64)
        self._returns = np.zeros(num_envs, dtype=np.float64)

    @property
    def episodes(self) -> list[Episode]:
        """Every completed episode, in the order they end (built when asked for: a step only notes which
        environments ended, with their lengths and returns)."""
        for point, envs, lengths, returns in self._ended:
            self._episodes.extend(Episode(dict(point), int(k), int(n), float(g))
                                  for k, n, g in zip(envs, lengths, returns))
        self._ended.clear()
        return self._episodes

    @property
    def discrete(self) -> bool:
        return self.num_actions is not None

    def __repr__(self) -> str:
        actions = f"num_actions={self.num_actions}" if self.discrete else f"action_shape={self.action_shape}"
        return f"Env({self.name!r}, num_envs={self.num_envs}, observation_shape={self.observation_shape}, {actions})"

    # ---- the two udf nodes ---------------------------------------------------------------------------------
    def reset(self, domain: Sequence[Symbol] = ()) -> RT:
        """The first observations, shape ``(num_envs, *observation_shape)``, at every point of ``domain``
        (at most one dimension: one fresh batch of episodes per iteration)."""
        domain = check_reset_domain(self.name, domain, self._reset_view is not None)
        if domain:
            (dim,) = domain
            # reset(i) runs after the last step of i - 1; until step() exists, after reset(i - 1)
            chain = placeholder((0,), "float32", domain)
            chain[0] = F.zeros((0,))
            order = chain
        else:
            chain, order = None, F.zeros((0,))
        observation = TensorType((self.num_envs, *self.observation_shape), self.observation_dtype)
        obs, token = _udf(f"{self.name}.reset", self._reset, (observation, _TOKEN), order)
        if chain is not None:
            chain[dim + 1] = token
        self._reset_view, self._reset_chain, self._reset_token = obs, chain, token
        return obs

    def step(self, action: RT, truncation: bool = False) -> tuple[RT, ...]:
        """``obs, reward, terminated`` over the action's domain, which is ``reset``'s plus one (time)
        dimension. ``obs`` is the observation after the step (the next episode's first one after an end);
        ``terminated`` marks every end. With ``truncation=True``: ``obs, reward, terminated, truncated,
        final_obs`` as gymnasium means them (``final_obs``: the observation the step reached, before any reset)."""
        truncation = bool_argument("truncation", truncation)
        outer = None if self._reset_view is None else self._reset_view.domain
        steps, t, continued = step_domain(self, action, outer, self._stepped)
        ctx = action.ctx
        order = placeholder((0,), "float32", steps)
        n = self.num_envs
        observation = TensorType((n, *self.observation_shape), self.observation_dtype)
        flag = TensorType((n,), "bool")
        types = (observation, TensorType((n,), "float32"), flag, flag, flag, observation, _TOKEN)
        fn = _Step(self, action.node.location)
        obs, reward, ended, terminated, truncated, final_obs, token = _udf(f"{self.name}.step", fn, types, action,
                                                                          order)
        carry_across(order, outer, self._reset_token, token, t, continued)
        self._continues = continued is not None
        if self._reset_chain is not None:
            (i,) = outer
            last_step = token[i, ctx.bound_of(t) - 1]
            chain = self._reset_chain.node
            provisional = chain.inputs[1]
            index = tuple(item.substitute({i: i - 1}) for item in last_step.index)
            chain.inputs[1] = Edge(last_step.node.id, last_step.output, index, provisional.condition)
        self._stepped = True
        if truncation:
            return obs, reward, terminated, truncated, final_obs
        return obs, reward, ended

    # ---- what runs at execution time -------------------------------------------------------------------------
    def _reset(self, point: dict, *tokens: Any) -> tuple[np.ndarray, np.ndarray]:
        first = all(v == 0 for v in point.values())
        obs, _ = self._vector.reset(seed=self.seed if first else None)
        self._lengths[:] = 0
        self._returns[:] = 0.0
        self._next = tuple(point.values()) + (0,) * (1 + self._continues)
        return np.asarray(obs, dtype=self.observation_dtype), np.zeros((0,), np.float32)

    def _take(self, point: dict, action: np.ndarray, location: str) -> tuple[np.ndarray, ...]:
        here = tuple(point.values())
        if self._next != here and not (self._continues and here[-1] == 0 and self._next[-1] > 0
                                       and here[:-1] == self._next[:-2] + (self._next[-2] + 1,)):
            raise TimeRLError(f"{self.name}: step at {point} ran out of order (expected {self._next}); "
                              "the executor did not respect the environment's order tokens")
        action = self._validate(np.asarray(action), location, point)
        obs, reward, terminated, truncated, info = self._vector.step(action)
        ended = terminated | truncated
        final_obs = obs
        if ended.any():  # the observations the ended episodes reached, before the autoreset replaced them
            final_obs = np.array(obs, copy=True)
            for k in np.flatnonzero(info["_final_obs"]):
                final_obs[k] = info["final_obs"][k]
        self._lengths += 1
        self._returns += reward
        if ended.any():
            envs = np.flatnonzero(ended)
            self._ended.append((dict(point), envs, self._lengths[envs], self._returns[envs]))  # (copies)
            self._lengths[envs] = 0
            self._returns[envs] = 0.0
        self._next = here[:-1] + (here[-1] + 1,)
        # the udf call converts them to the declared types
        return obs, reward, ended, terminated, truncated, final_obs, _NO_TOKEN

    def _validate(self, action: np.ndarray, location: str, point: dict) -> np.ndarray:
        expected = (self.num_envs, *self.action_shape)
        where = _Where(location, self.name, point)  # formatted only if an error is raised
        if action.shape != expected:
            raise ActionError(f"{where} has shape {action.shape}; the environment takes {expected}")
        if self.discrete:
            if action.dtype.kind not in "iu":
                raise ActionError(f"{where} has dtype {action.dtype}; discrete actions are integers")
            # one reduction for both bounds: read as unsigned, a negative action is larger than any valid one
            if action.size and action.view(f"u{action.dtype.itemsize}").max() >= self.num_actions:
                bad = (action < 0) | (action >= self.num_actions)
                raise ActionError(f"{where} is {action[bad][0]} for environment {int(np.flatnonzero(bad)[0])}; "
                                  f"actions are in [0, {self.num_actions})")
            if self._action_start == 0 and action.dtype == np.int64:
                return action  # (the vector env reads the actions, it does not keep or change them)
            return action.astype(np.int64) + self._action_start
        if not np.isfinite(action).all():
            bad = int(np.flatnonzero(~np.isfinite(action).reshape(self.num_envs, -1).all(axis=1))[0])
            raise ActionError(f"{where} is not finite (NaN or infinite) for environment {bad}")
        return action.astype(self._vector.single_action_space.dtype)


class _Where:
    """The start of an action error's message, built only when one is raised (this runs at every step)."""

    def __init__(self, location: str, name: str, point: dict) -> None:
        self.location, self.name, self.point = location, name, point

    def __format__(self, spec: str) -> str:
        return f"{self.location}: {self.name} step at {self.point}: the action created here"


def _udf(name: str, fn: Any, outputs: tuple[TensorType, ...], *inputs: RT) -> tuple[RT, ...]:
    """A ``udf`` node over the union of the inputs' domains: ``fn(point, *input_values)`` returns one array
    per declared output."""
    results = F.apply("udf", *inputs, fn=fn, outputs=outputs, as_tuple=True)
    results[0].node.name = name
    return results


class _Step:
    """The step udf: ``fn(point, action, order_token)`` (a class so its repr names the environment)."""

    def __init__(self, env: Env, location: str) -> None:
        self.env, self.location = env, location

    def __call__(self, point: dict, action: Any, token: Any) -> tuple[np.ndarray, ...]:
        return self.env._take(point, action, self.location)

    def __repr__(self) -> str:
        return f"step({self.env.name})"


def episode_statistics(rewards: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lengths and returns of the episodes completed in a ``(T, num_envs)`` block of rewards and episode
    ends that starts with fresh episodes (one iteration: ``r[i, 0:T]``, ``terminated[i, 0:T]``)."""
    try:
        rewards, ends = np.asarray(rewards, dtype=np.float64), np.asarray(ends, dtype=bool)
    except (TypeError, ValueError) as error:
        raise ArgumentError(f"{user_location()}: rewards and ends must be numeric arrays: {error}") from None
    if rewards.ndim != 2 or ends.shape != rewards.shape:
        raise ArgumentError(f"{user_location()}: rewards and ends must be (T, num_envs) arrays of one shape, got "
                            f"{rewards.shape} and {ends.shape}")
    envs, last = np.nonzero(ends.T)  # every episode's environment and last step, environment by environment
    first = np.zeros_like(last)
    same_env = envs[1:] == envs[:-1]
    first[1:][same_env] = last[:-1][same_env] + 1  # an episode starts after the previous one of its environment
    totals = np.cumsum(rewards, axis=0)  # a return is a difference of running sums (one pass, no loop)
    before = np.where(first > 0, totals[np.maximum(first - 1, 0), envs], 0.0)
    return (last + 1 - first).astype(np.int64), totals[last, envs] - before


class RunningEpisodes:
    """Lengths and returns of the episodes completed in consecutive ``(T, num_envs)`` blocks of rewards and
    episode ends, where episodes continue from one block to the next (environments that are not reset between
    iterations): an episode spanning blocks is counted whole, in the block where it ends. Call it with each
    iteration's ``r[i, 0:T]`` and ``terminated[i, 0:T]``, in order of ``i``."""

    def __init__(self, num_envs: int) -> None:
        self.lengths = np.zeros(int_argument("num_envs", num_envs, minimum=1), dtype=np.int64)  # unfinished
        self.returns = np.zeros(num_envs, dtype=np.float64)

    def __call__(self, rewards: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lengths, returns = episode_statistics(rewards, ends)
        rewards, ends = np.asarray(rewards, dtype=np.float64), np.asarray(ends, dtype=bool)
        if rewards.shape[1] != self.lengths.size:
            raise ArgumentError(f"{user_location()}: blocks of {rewards.shape[1]} environments, expected "
                                f"{self.lengths.size}")
        envs = np.nonzero(ends.T)[0]  # episode_statistics' order: environment by environment, then time
        first = np.ones(envs.size, dtype=bool)
        first[1:] = envs[1:] != envs[:-1]
        lengths[first] += self.lengths[envs[first]]  # the first episode that ends began in earlier blocks
        returns[first] += self.returns[envs[first]]
        steps = rewards.shape[0]
        ended = ends.any(axis=0)
        last_end = np.where(ended, steps - 1 - np.argmax(ends[::-1], axis=0), -1)
        after = np.arange(steps)[:, None] > last_end[None, :]  # the steps of the episodes still running
        self.lengths = np.where(ended, 0, self.lengths) + after.sum(axis=0)
        self.returns = np.where(ended, 0.0, self.returns) + (rewards * after).sum(axis=0)
        return lengths, returns


__all__ = ["ActionError", "Env", "Episode", "RunningEpisodes", "RTEnvironment", "SIMULATORS", "episode_statistics",
           "make_env"]
