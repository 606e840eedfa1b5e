"""The game every baseline plays, and what every baseline returns."""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.mmap.game import MMapGame
from algorithms.mmap.mapping import game_latency, mapping_records


@dataclass(frozen=True)
class Result:
    agent: str
    reward: float
    """Return of the best game found (microseconds of latency saved, by the game's benefits)."""
    latency: float
    """Program latency of that game's mapping, from the cost model (microseconds)."""
    mapping: list
    actions: tuple
    """The moves of the best game, in play order (including moves undone by Drop-backup)."""
    moves_used: int
    """Game moves spent searching: the budget unit."""


def new_game(problem) -> MMapGame:
    """Drop-backup on, so every game ends feasible; rewinding to the offending group's opening (see game.py),
    which is exact for the deterministic agents and spares every agent replaying most of a game per rewind."""
    return MMapGame(problem, drop_backup=True, backup_point="group")


def result_of(agent: str, game: MMapGame, actions, moves_used: int) -> Result:
    return Result(agent, game.total_reward, game_latency(game), mapping_records(game), tuple(actions), moves_used)
