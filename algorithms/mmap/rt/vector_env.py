"""The RT game as a gymnasium vector env, registered as `timerl/MMapGameRT-v0`:
`gymnasium.make_vec("timerl/MMapGameRT-v0", num_envs=256, workload="muzero_adam", vectorization_mode=None)`
or `MMapGameRTVectorEnv(workload, num_envs=256)`.

One `step` is one move of every game: a compiled RT program without dimensions (the state comes in through
sources, the next state leaves through sinks), compiled once and executed per step. The state stays in
NumPy arrays between steps; the rules all run as RT ops.

Observations (a Dict, one row per game): `action_mask` (3,) int8 (Copy, NoCopy, Drop), `actions` (3, 4)
float32 [legal, start / T, end / T, offset / fast memory] as in the single-game env (observation.py), and
`progress` (2,) [position / buffers, return / (all-slow - all-fast latency)]. An illegal action loses that
game (return to zero), as in `timerl/MMapGame-v0`. Autoreset is gymnasium's default (next step): the step
after a game ends resets it, ignores its action and reports reward 0.
"""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

import timerl as trl
from algorithms.mmap.problem import DEFAULT_FAST_MEMORY_FRACTION, Problem, build_problem
from algorithms.mmap.rt.moves import initial_state, move, state_template
from algorithms.mmap.rt.program import flatten, unflatten
from algorithms.mmap.rt.tables import GameTables, game_arrays


class MMapGameRTVectorEnv(gymnasium.vector.VectorEnv):
    metadata = {"render_modes": [], "autoreset_mode": gymnasium.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, workload, num_envs: int = 16, drop_backup: bool = False, backend: str = "torch",
                 fast_memory_fraction: float = DEFAULT_FAST_MEMORY_FRACTION):
        self.problem = workload if isinstance(workload, Problem) else build_problem(
            workload, fast_memory_fraction=fast_memory_fraction)
        self.num_envs = num_envs
        self.drop_backup = drop_backup
        self.arrays = game_arrays(self.problem)
        self.single_action_space = spaces.Discrete(3)
        self.single_observation_space = spaces.Dict({
            "action_mask": spaces.Box(0, 1, (3,), np.int8),
            "actions": spaces.Box(-1.0, 1e6, (3, 4), np.float32),
            "progress": spaces.Box(-1e6, 1e6, (2,), np.float32)})
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self._first = self._run_initial(backend)
        self._step_program = self._compile_step(backend)
        self._state = [leaf.copy() for leaf in self._first]
        self._ended = np.zeros(num_envs, dtype=bool)

    # ---- the two RT programs ---------------------------------------------------------------------------------
    def _run_initial(self, backend: str) -> list:
        ctx = trl.Context(dims="")
        leaves: list = []
        with ctx:
            for k, leaf in enumerate(flatten(initial_state(GameTables(self.arrays), self.num_envs, self.drop_backup))):
                leaves.append(None)
                leaf.sink(_keep(leaves, k))
        ctx.compile(backend=backend).execute()
        return leaves

    def _compile_step(self, backend: str):
        ctx = trl.Context(dims="")
        self._next: list = []
        self._outputs: list = [None, None]
        with ctx:
            tables = GameTables(self.arrays)
            template = initial_state(tables, self.num_envs, self.drop_backup)
            inputs = [trl.source(_read(self, k), shape=leaf.shape, dtype=str(leaf.dtype))
                      for k, leaf in enumerate(self._first)]
            action = trl.source(lambda point: self._action, shape=(self.num_envs,), dtype="int64")
            after, result = move(tables, unflatten(template, inputs), action)
            for k, leaf in enumerate(flatten(after)):
                self._next.append(None)
                leaf.sink(_keep(self._next, k))
            result.reward.sink(_keep(self._outputs, 0))
        return ctx.compile(backend=backend)

    # ---- gymnasium -----------------------------------------------------------------------------------------
    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._state = [leaf.copy() for leaf in self._first]
        self._ended[:] = False
        return self._observation(), {}

    def step(self, actions):
        restart = self._ended.copy()
        self._action = np.where(restart, 0, np.asarray(actions, dtype=np.int64))
        self._step_program.execute()
        state = [np.asarray(leaf) for leaf in self._next]
        self._state = [np.where(_rows(restart, new), first, new) for first, new in zip(self._first, state)]
        reward = np.where(restart, 0.0, np.asarray(self._outputs[0]))
        done = self._view().done
        self._ended = done & ~restart
        return self._observation(), reward, self._ended.copy(), np.zeros(self.num_envs, bool), {}

    def _view(self):
        return unflatten(state_template(self.drop_backup), list(self._state))

    def _observation(self) -> dict:
        view, problem = self._view(), self.problem
        legal = view.plan.legal.astype(np.int8)
        times, memory = max(problem.num_instructions, 1), max(problem.fast_memory_bytes, 1)
        actions = np.zeros((self.num_envs, 3, 4), dtype=np.float32)
        actions[:, :, 0] = legal
        for row, place in ((0, view.plan.copy), (1, view.plan.no_copy)):
            shown = legal[:, row] > 0
            actions[:, row, 1] = np.where(shown, place[:, 0] / times, 0.0)
            actions[:, row, 2] = np.where(shown, place[:, 1] / times, 0.0)
            actions[:, row, 3] = np.where(shown, place[:, 2] * problem.granularity / memory, 0.0)
        scale = max(problem.latency_all_slow - problem.latency_all_fast, 1e-12)
        progress = np.stack([view.position / problem.num_buffers, view.total / scale], 1).astype(np.float32)
        return {"action_mask": legal, "actions": actions, "progress": progress}


def _rows(mask: np.ndarray, like: np.ndarray) -> np.ndarray:
    return mask.reshape((-1,) + (1,) * (like.ndim - 1))


def _keep(into: list, k: int):
    def keep(point, value):
        into[k] = np.array(np.asarray(value))

    return keep


def _read(env: MMapGameRTVectorEnv, k: int):
    return lambda point: env._state[k]
