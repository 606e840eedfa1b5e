"""Replay buffer, K-step unroll targets with n-step values, and Reanalyse (MuZero; MuZero Reanalyse).

Targets for a position t and unroll step k = 0..K (position u = t + k of a game of T decisions):
- policy: the search's policy at u (its visit distribution; Gumbel MuZero's improved policy), masked out past the
  end of the game, learned over u's legal actions (`legal`; all past the end);
- value:  z_u = sum_{j < n, u + j < T} discount^j r_{u + j} + discount^n v_{u + n} (v: the root search value,
  0 past the end: the game is over), two-hot over the support; 0 past the end;
- reward: r_{t + k} for k < K (0 past the end), two-hot; actions past the end are drawn uniformly.
With ``scalar_heads`` (`networks.Sizes.heads` = "scalar") value and reward targets are numbers in `support`'s units.
Reanalyse re-runs the search with the latest weights on stored positions and replaces their policy and
value targets (the paper's fraction 0.5: `reanalyse_count` positions are re-searched for every new one).
The buffer keeps the latest `capacity` games.

Self-imitation (`set_elite`): the best game found so far is kept apart from the buffer and `sample` may draw a
share of its batch from it, with the game's own moves as policy targets (one-hot) and its exact discounted
returns as value targets (the game is deterministic: the return of a finished game is the value of its
positions under its moves, with no bootstrap from the search's values).
"""

from __future__ import annotations

import numpy as np

from algorithms.muzero.features import FEATURES
from algorithms.muzero.networks import ACTIONS
from algorithms.muzero.support import REWARD_UNIT, VALUE_UNIT, scalar_target, two_hot


class Replay:
    def __init__(self, capacity: int = 200, unroll: int = 5, n_step: int = 10, discount: float = 0.9999,
                 scalar_heads: bool = False):
        self.capacity, self.unroll, self.n_step, self.discount = capacity, unroll, n_step, discount
        self.scalar_heads = scalar_heads
        self.games: list[dict] = []
        self.elite: dict | None = None

    def add(self, trajectory) -> None:
        if not trajectory.actions:
            return
        self.games.append(self._stored(trajectory))
        del self.games[:-self.capacity]

    def set_elite(self, trajectory) -> None:
        """Keep ``trajectory`` (the best game so far) for self-imitation (module docstring); replaces the last."""
        if not trajectory.actions:
            return
        game = self._stored(trajectory)
        game["policies"] = np.eye(ACTIONS, dtype=np.float32)[game["actions"]]
        game["z"] = self.returns(game["rewards"])
        self.elite = game

    def returns(self, rewards: np.ndarray) -> np.ndarray:
        """Each position's discounted return to the end of its game: sum_{j >= 0} discount^j r_{u + j}."""
        out = np.zeros(len(rewards))
        following = 0.0
        for u in range(len(rewards) - 1, -1, -1):
            following = rewards[u] + self.discount * following
            out[u] = following
        return out

    @staticmethod
    def _stored(trajectory) -> dict:
        return {"features": np.stack(trajectory.features), "legal": np.stack(trajectory.legal),
                "actions": np.array(trajectory.actions, dtype=np.int64),
                "rewards": np.array(trajectory.rewards, dtype=np.float64),
                "policies": np.stack(trajectory.policies).astype(np.float32),
                "values": np.array(trajectory.values, dtype=np.float64),
                "seeds": np.stack(trajectory.seeds).astype(np.float32) if trajectory.seeds else None}

    def positions(self) -> int:
        return sum(len(game["actions"]) for game in self.games)

    def value_targets(self, game: dict) -> np.ndarray:
        """z_u for every u of one game (module docstring): the n-step window's rewards summed term by term over
        all positions at once (j = 0 .. n - 1, zeros past the end), then the bootstrap where u + n < T."""
        rewards, values, length = game["rewards"], game["values"], len(game["actions"])
        padded = np.concatenate([rewards, np.zeros(self.n_step)])
        targets = np.zeros(length)
        for j in range(self.n_step):
            targets += self.discount ** j * padded[j:j + length]
        if self.n_step < length:
            targets[:length - self.n_step] += self.discount ** self.n_step * values[self.n_step:]
        return targets

    def sample(self, batch: int, rng: np.random.Generator, elite: int = 0) -> dict[str, np.ndarray]:
        """A batch of ``batch`` positions with their unroll targets (module docstring), uniform over the stored
        positions; with ``elite`` > 0 (and `set_elite` called) its first ``elite`` rows are positions of the elite
        game. The generator is drawn per row (its start, then K actions for past the end), the rows' positions
        gathered game by game, and the masks and targets built for the whole batch at once."""
        K = self.unroll
        lengths = np.array([len(game["actions"]) for game in self.games])
        elite = min(elite, batch) if self.elite is not None else 0
        picks = [self.games[g] for g in rng.choice(len(self.games), size=batch - elite, p=lengths / lengths.sum())]
        chosen = [self.elite] * elite + picks
        starts, fill = np.empty(batch, np.int64), np.empty((batch, K), np.int64)
        for row, game in enumerate(chosen):
            starts[row] = rng.integers(len(game["actions"]))
            fill[row] = rng.integers(ACTIONS, size=K)
        row_lengths = np.array([len(game["actions"]) for game in chosen], dtype=np.int64)
        positions = starts[:, None] + np.arange(K + 1)
        inside = positions < row_lengths[:, None]
        clipped = np.minimum(positions, row_lengths[:, None] - 1)
        features = np.empty((batch, FEATURES), np.float32)
        actions, rewards = np.empty((batch, K), np.int64), np.empty((batch, K))
        policy, legal = np.empty((batch, K + 1, ACTIONS), np.float32), np.empty((batch, K + 1, ACTIONS), bool)
        z = np.empty((batch, K + 1))
        for row, game in enumerate(chosen):
            if "z" not in game:  # cached until Reanalyse replaces the game's values
                game["z"] = self.value_targets(game)
            at = clipped[row]
            features[row] = game["features"][starts[row]]
            actions[row], rewards[row] = game["actions"][at[:K]], game["rewards"][at[:K]]
            policy[row], legal[row], z[row] = game["policies"][at], game["legal"][at], game["z"][at]
        return {"features": features,
                "actions": np.where(inside[:, :K], actions, fill),
                "policy": np.where(inside[:, :, None], policy, np.float32(1.0 / ACTIONS)),
                "policy_mask": inside.astype(np.float32),
                "legal": np.where(inside[:, :, None], legal, True).astype(np.float32),
                "value": self._target(np.where(inside, z, 0.0), VALUE_UNIT).astype(np.float32),
                "reward": self._target(np.where(inside[:, :K], rewards, 0.0), REWARD_UNIT).astype(np.float32)}

    def _target(self, x: np.ndarray, unit: float) -> np.ndarray:
        """Value or reward targets (reward units) as the heads learn them: two-hot, or / ``unit`` (scalar)."""
        return scalar_target(x, unit) if self.scalar_heads else two_hot(x)

    def reanalyse_game(self, program, weights: np.ndarray, index: int, seed_weight: float = 0.0) -> None:
        """Re-search every position of stored game ``index`` with ``weights`` (without noise) and replace its
        policy and value targets: a demonstration enters the buffer this way (the paper's Reanalyse of
        demonstrations: the search, not the demonstrator's move, gives the policy target). The search's root
        is seeded as in self-play (the game's stored seeds, ``seed_weight``)."""
        game = self.games[index]
        length = len(game["actions"])
        for start in range(0, length, program.batch):
            rows = np.minimum(np.arange(start, start + program.batch), length - 1)
            seeds = None if game["seeds"] is None else game["seeds"][rows]
            searched = program.search(weights, game["features"][rows], game["legal"][rows], None, seed=seeds,
                                      seed_weight=seed_weight)
            kept = rows[:length - start]
            game["policies"][kept] = searched.policy[:len(kept)]
            game["values"][kept] = searched.value[:len(kept)]
        game.pop("z", None)

    def reanalyse(self, program, weights: np.ndarray, count: int, rng: np.random.Generator,
                  seed_weight: float = 0.0) -> int:
        """Re-search `count` random stored positions (in batches of the program's size) with `weights`,
        without noise (the roots seeded as in self-play: stored seeds, ``seed_weight``); replace their policy and
        value targets. Returns the positions re-searched."""
        done = 0
        lengths = np.array([len(game["actions"]) for game in self.games])
        while done < count and self.games:
            picks = [(int(g), int(rng.integers(lengths[g]))) for g in
                     rng.choice(len(self.games), size=program.batch, p=lengths / lengths.sum())]
            features = np.stack([self.games[g]["features"][u] for g, u in picks])
            legal = np.stack([self.games[g]["legal"][u] for g, u in picks])
            seeded = seed_weight > 0 and all(self.games[g]["seeds"] is not None for g, _ in picks)
            seeds = np.stack([self.games[g]["seeds"][u] for g, u in picks]) if seeded else None
            searched = program.search(weights, features, legal, None, seed=seeds, seed_weight=seed_weight)
            for k, (g, u) in enumerate(picks):
                self.games[g]["policies"][u] = searched.policy[k]
                self.games[g]["values"][u] = searched.value[k]
                self.games[g].pop("z", None)
            done += program.batch
        return done
