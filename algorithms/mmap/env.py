"""Gymnasium wrapper of MMapGame, registered as `timerl/MMapGame-v0`.

Actions: Discrete(3) = Copy, NoCopy, Drop. `info["action_mask"]` (int8, 3) at reset and after every step.
At the end of an episode `info` also holds `mapping` (records of `mapping.mapping_records`),
`fast_memory_bytes`, `latency` (microseconds) and `feasible`.

Choices where the paper is vague: an illegal action loses the game (§4.2: "the game terminates if the
player chooses an invalid action"), with the same reward as an infeasible state: the return drops to zero.
The wrapper adds no randomness; `reset(seed=...)` only seeds `np_random` for agents that want it.
"""

from __future__ import annotations

import gymnasium as gym
from gymnasium import spaces

from algorithms.mmap.costmodel import HardwareSpec
from algorithms.mmap.game import MMapGame
from algorithms.mmap.mapping import game_latency, mapping_records
from algorithms.mmap.observation import ObservationEncoder, observation_space
from algorithms.mmap.problem import DEFAULT_FAST_MEMORY_FRACTION, DEFAULT_MAX_COLUMNS, Problem, build_problem


class MMapGameEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, workload, drop_backup: bool = False, backup_point: str = "clean",
                 hardware: HardwareSpec = HardwareSpec(), fast_memory_fraction: float = DEFAULT_FAST_MEMORY_FRACTION,
                 fast_memory_bytes: int | None = None, max_columns: int = DEFAULT_MAX_COLUMNS):
        """`workload`: a workload name, a workload object, a schema dict, or an already built Problem.
        `drop_backup` and `backup_point` are MMapGame's; the other arguments are `build_problem`'s."""
        self.problem = workload if isinstance(workload, Problem) else build_problem(
            workload, hardware, fast_memory_fraction, fast_memory_bytes, max_columns)
        self.drop_backup = drop_backup
        self.backup_point = backup_point
        self.encoder = ObservationEncoder(self.problem)
        self.observation_space = observation_space()
        self.action_space = spaces.Discrete(3)
        self.game = MMapGame(self.problem, drop_backup, backup_point)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.game = MMapGame(self.problem, self.drop_backup, self.backup_point)
        return self.encoder.encode(self.game), self._info()

    def step(self, action):
        game = self.game
        action = int(action)
        reward = game.play(action) if game.done or game.legal_actions()[action] else game.forfeit()
        return self.encoder.encode(game), reward, game.done, False, self._info()

    def _info(self) -> dict:
        info = {"action_mask": self.game.action_mask()}
        if self.game.done:
            info.update(mapping=mapping_records(self.game), fast_memory_bytes=self.problem.fast_memory_bytes,
                        latency=game_latency(self.game), feasible=self.game.feasible)
        return info
