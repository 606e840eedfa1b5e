"""What every baseline returns, and the helpers they share to play a game to its end."""

from __future__ import annotations

from dataclasses import dataclass

from algorithms.mmap.game import DROP, NO_COPY, COPY, MMapGame
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


def result_of(agent: str, game: MMapGame, actions, moves_used: int) -> Result:
    return Result(agent, game.total_reward, game_latency(game), mapping_records(game), tuple(actions), moves_used)


def legal_list(game: MMapGame) -> list[int]:
    copy, no_copy, drop = game.legal_actions()
    return [action for action, legal in ((COPY, copy), (NO_COPY, no_copy), (DROP, drop)) if legal]


def first_legal(game: MMapGame, preferences) -> int:
    """The first legal action of `preferences`, else any legal action (there is one while the game runs)."""
    legal = game.legal_actions()
    for action in preferences:
        if legal[action]:
            return action
    return legal_list(game)[0]


def greedy_action(game: MMapGame) -> int:
    """Myopic policy: take the benefit now if it is positive (NoCopy first, it costs no supply), else Drop."""
    if game.current_benefit() > 0:
        return first_legal(game, (NO_COPY, COPY, DROP))
    return first_legal(game, (DROP, NO_COPY, COPY))
