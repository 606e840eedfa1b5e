"""Where self-play's roots start from: the seed distribution mixed into each root's prior (`SelfPlay.play`), from
the greedy one-step policy's move or the best game found so far (`BestSeed`), the one-step policies' games
(`greedy_game`, `seed_game`: the better of two, the first round's seed at the paper's sizes) and the game that
staggered rows open with."""

from __future__ import annotations

import dataclasses

import numpy as np

from algorithms.mmap.baselines.policies import greedy_action, keep_groups_action
from algorithms.mmap.game import MMapGame
from algorithms.mmap.problem import Problem
from algorithms.muzero.networks import ACTIONS


SEED_POLICIES = (greedy_action, keep_groups_action)
"""The one-step policies whose better game seeds the first round (`seed_game`), the greedy one first (it wins ties)."""


def policy_game(problem: Problem, policy) -> tuple[list[int], float]:
    """(the moves in play order, rewinds included; the return) of a one-step ``policy``'s game (game -> action,
    e.g. `policies.greedy_action`), with Drop-backup as self-play plays."""
    game = MMapGame(problem, drop_backup=True, backup_point="group")
    played = []
    while not game.done:
        action = policy(game)
        played.append(action)
        game.play(action)
    return played, game.total_reward


def greedy_game(problem: Problem) -> list[int]:
    """The moves (in play order, rewinds included) of the greedy one-step policy's game (`greedy_seed`'s policy,
    with Drop-backup), the reference game of staggered starts unless the round's `BestSeed` carries another."""
    return policy_game(problem, greedy_action)[0]


def seed_game(problem: Problem, policies=SEED_POLICIES) -> list[int]:
    """The moves (in play order) of the game of higher return among the one-step ``policies``' games (the first on
    a tie): the first round's seed where `MuZeroConfig.seed_first_round` holds (`BestSeed` of its `final_moves`,
    its prefixes the staggered rows' openings). On lstm_lm_adam (the bench's game) the greedy game returns 0.323
    of the best saving and `policies.keep_groups_action`'s 0.405."""
    games = [policy_game(problem, policy) for policy in policies]
    return max(games, key=lambda game: game[1])[0]


def greedy_seed(game: MMapGame) -> np.ndarray:
    """One-hot on the greedy one-step policy's move (`policies.greedy_action`: a positive benefit placed with the
    least space x time, else Drop), the root's seed distribution in self-play."""
    return np.eye(ACTIONS, dtype=np.float32)[greedy_action(game)]


def seed_of(game: MMapGame, moves: dict | None) -> np.ndarray:
    """The root's seed distribution: one-hot on ``moves[position]`` (e.g. the best game's move at this buffer,
    `final_moves`) where it is legal, else `greedy_seed`."""
    action = -1 if moves is None else moves.get(game.position, -1)
    if action >= 0 and game.legal_actions()[action]:
        return np.eye(ACTIONS, dtype=np.float32)[action]
    return greedy_seed(game)


@dataclasses.dataclass(frozen=True)
class BestSeed:
    """Roots seeded from the best game so far (`SelfPlay.play`): a ``share`` of a round's games (its first ones, the
    greedy game among them) search with the seed `seed_of(game, moves)` at seed weight ``weight``; the others with
    the greedy policy's seed at `SelfPlay.seed_weight`."""

    moves: dict  # position -> action (`final_moves` of the best game)
    share: float
    weight: float
    mutants: tuple = ()
    """Mutated copies of ``moves`` (`agent.mutant`): the last seeded games' seeds, one each."""
    played: tuple = ()
    """The play-order moves of the game ``moves`` come from, where staggered rows (`SelfPlay.play`'s ``stagger``)
    open with its prefixes (the first round's `seed_game`); empty: they open with `greedy_game`'s."""

    def games(self, count: int) -> int:
        """How many of a round's ``count`` games are seeded from ``moves``: at least one while ``share`` > 0."""
        return 0 if self.share <= 0 else max(1, round(self.share * count))

    def moves_of(self, index: int, count: int) -> dict | None:
        """The seed moves of a round's game ``index`` (of ``count``): None past the seeded games, a mutant for
        the last `len(mutants)` of them, else ``moves``."""
        seeded = self.games(count)
        mutant = index - (seeded - len(self.mutants))
        return None if index >= seeded else self.mutants[mutant] if mutant >= 0 else self.moves


def final_moves(problem: Problem, played) -> dict[int, int]:
    """Position -> the last action played there, replaying ``played`` (a game's moves in play order, rewinds
    included) from the start: where a game ended up at every buffer."""
    game = MMapGame(problem, drop_backup=True, backup_point="group")
    moves = {}
    for action in played:
        moves[game.position] = int(action)
        game.play(int(action))
    return moves
