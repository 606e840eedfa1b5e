"""`Replay.sample` and `Replay.value_targets` gather and sum over whole batches and games; the oracle is the plain
per-sample and per-position loops (written out below): the same batches, bit for
bit, from the same generator, over many seeds and settings (unroll, n-step, discount, elite rows, games shorter
than the unroll and than n, scalar and categorical heads), and the same n-step targets."""

from __future__ import annotations

import numpy as np
import pytest

from algorithms.muzero.features import FEATURES
from algorithms.muzero.networks import ACTIONS
from algorithms.muzero.replay import Replay
from algorithms.muzero.selfplay import Trajectory
from algorithms.muzero.support import REWARD_UNIT, VALUE_UNIT


class LoopReplay(Replay):
    """The replay as it was: one sample and one position at a time."""

    def value_targets(self, game: dict) -> np.ndarray:
        rewards, values, length = game["rewards"], game["values"], len(game["actions"])
        targets = np.zeros(length)
        for u in range(length):
            steps = min(self.n_step, length - u)
            targets[u] = np.dot(self.discount ** np.arange(steps), rewards[u:u + steps])
            if u + self.n_step < length:
                targets[u] += self.discount ** self.n_step * values[u + self.n_step]
        return targets

    def sample(self, batch: int, rng: np.random.Generator, elite: int = 0) -> dict[str, np.ndarray]:
        K = self.unroll
        lengths = np.array([len(game["actions"]) for game in self.games])
        elite = min(elite, batch) if self.elite is not None else 0
        picks = [self.games[g] for g in rng.choice(len(self.games), size=batch - elite, p=lengths / lengths.sum())]
        out = {"features": [], "actions": [], "policy": [], "policy_mask": [], "legal": [], "value": [],
               "reward": []}
        for game in [self.elite] * elite + picks:
            length = len(game["actions"])
            t = int(rng.integers(length))
            if "z" not in game:
                game["z"] = self.value_targets(game)
            z = game["z"]
            positions = np.arange(t, t + K + 1)
            inside = positions < length
            clipped = np.minimum(positions, length - 1)
            out["features"].append(game["features"][t])
            out["actions"].append(np.where(inside[:K], game["actions"][clipped[:K]], rng.integers(ACTIONS, size=K)))
            out["policy"].append(np.where(inside[:, None], game["policies"][clipped], 1.0 / ACTIONS))
            out["policy_mask"].append(inside.astype(np.float32))
            out["legal"].append(np.where(inside[:, None], game["legal"][clipped], True))
            out["value"].append(self._target(np.where(inside, z[clipped], 0.0), VALUE_UNIT))
            out["reward"].append(self._target(np.where(inside[:K], game["rewards"][clipped[:K]], 0.0), REWARD_UNIT))
        return {name: np.stack(arrays).astype(np.int64 if name == "actions" else np.float32)
                for name, arrays in out.items()}


def random_trajectory(rng: np.random.Generator, length: int) -> Trajectory:
    """A game of ``length`` decisions with random features, legal masks (one legal action at least), actions,
    rewards (a few large and negative ones, as rewinds give), policies and values."""
    trajectory = Trajectory()
    for _ in range(length):
        legal = rng.random(ACTIONS) < 0.7
        legal[rng.integers(ACTIONS)] = True
        trajectory.features.append(rng.normal(size=FEATURES).astype(np.float32))
        trajectory.legal.append(legal)
        trajectory.actions.append(int(rng.choice(np.flatnonzero(legal))))
        trajectory.rewards.append(float(rng.choice([rng.normal(0.5, 0.3), rng.normal(-5.0, 5.0)], p=[0.9, 0.1])))
        trajectory.policies.append(rng.dirichlet(np.ones(ACTIONS)))
        trajectory.values.append(float(rng.normal(20.0, 15.0)))
        trajectory.seeds.append(rng.dirichlet(np.ones(ACTIONS)))
    return trajectory


def filled(replay_class, seed: int, unroll: int, n_step: int, discount: float, scalar: bool, lengths, elite: bool):
    rng = np.random.default_rng(seed)
    replay = replay_class(capacity=len(lengths), unroll=unroll, n_step=n_step, discount=discount,
                          scalar_heads=scalar)
    for length in lengths:
        replay.add(random_trajectory(rng, length))
    if elite:
        replay.set_elite(random_trajectory(rng, int(lengths[0])))
    return replay


SETTINGS = [  # unroll, n_step, discount, scalar heads, game lengths, elite rows
    (5, 10, 0.9999, False, [1, 2, 7, 40, 130], 0),
    (5, 10, 0.9999, True, [3, 9, 10, 11, 60], 4),
    (2, 3, 0.5, False, [1, 1, 2, 3, 4], 16),
    (1, 1, 0.9, False, [5, 6], 3),
    (7, 25, 0.99, True, [2, 24, 25, 26, 300], 8),
    (3, 1, 1.0, False, [4, 8, 15, 16, 23, 42], 0),
]


@pytest.mark.parametrize("unroll, n_step, discount, scalar, lengths, elite_rows", SETTINGS)
def test_value_targets_match_the_loop(unroll, n_step, discount, scalar, lengths, elite_rows):
    for seed in range(5):
        new = filled(Replay, seed, unroll, n_step, discount, scalar, lengths, False)
        old = filled(LoopReplay, seed, unroll, n_step, discount, scalar, lengths, False)
        for game, reference in zip(new.games, old.games):
            np.testing.assert_allclose(new.value_targets(game), old.value_targets(reference), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("unroll, n_step, discount, scalar, lengths, elite_rows", SETTINGS)
def test_sample_matches_the_loop(unroll, n_step, discount, scalar, lengths, elite_rows):
    """Same batches, bit for bit, and the generator left in the same state; after a Reanalyse-like change of a
    game's values (its cached targets dropped) too."""
    for seed in range(8):
        new = filled(Replay, seed, unroll, n_step, discount, scalar, lengths, elite_rows > 0)
        old = filled(LoopReplay, seed, unroll, n_step, discount, scalar, lengths, elite_rows > 0)
        new_rng, old_rng = np.random.default_rng(100 + seed), np.random.default_rng(100 + seed)
        for batch in (16, 1, 33):
            got, expected = new.sample(batch, new_rng, elite_rows), old.sample(batch, old_rng, elite_rows)
            assert got.keys() == expected.keys()
            for name, array in expected.items():
                assert got[name].dtype == array.dtype and got[name].shape == array.shape, name
                np.testing.assert_array_equal(got[name], array, err_msg=name)
            for game in (new.games[-1], old.games[-1]):
                game["values"] += 1.0
                game.pop("z", None)
        assert new_rng.integers(1 << 30) == old_rng.integers(1 << 30)
