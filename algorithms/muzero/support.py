"""Categorical supports for values and rewards (MuZero, Appendix F): a scalar x is squashed by
h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x (eps = 0.001) and written as a two-hot distribution over the
integer atoms -SUPPORT .. SUPPORT; the networks predict logits over the atoms, and a prediction's scalar is
h^-1 of the expected atom. NumPy for the targets (built on the host), recurrent tensors for the predictions.

Rewards are the game's (microseconds of latency saved) times REWARD_SCALE / (largest possible saving), so a
whole game's return lies in about [0, REWARD_SCALE] on every workload: h(100) = 9.15 fits SUPPORT = 10.
"""

from __future__ import annotations

import numpy as np

from timerl.rt import functional as F

SUPPORT = 10
ATOMS = 2 * SUPPORT + 1
EPSILON = 0.001
REWARD_SCALE = 100.0


def squash(x):
    return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + EPSILON * x


def unsquash(y):
    return np.sign(y) * (((np.sqrt(1.0 + 4.0 * EPSILON * (np.abs(y) + 1.0 + EPSILON)) - 1.0) / (2.0 * EPSILON)) ** 2 - 1.0)


def two_hot(x: np.ndarray) -> np.ndarray:
    """(...,) scalars -> (..., ATOMS) distributions whose expected atom is squash(x)."""
    y = np.clip(squash(np.asarray(x, dtype=np.float64)), -SUPPORT, SUPPORT) + SUPPORT
    low = np.floor(y).astype(np.int64)
    high = np.minimum(low + 1, ATOMS - 1)
    upper = y - low
    eye = np.eye(ATOMS)
    out = eye[low] * (1.0 - upper)[..., None] + eye[high] * upper[..., None]
    return out.astype(np.float32)


def scalar_of(logits):
    """(..., ATOMS) logits (a recurrent tensor) -> (...,) h^-1 of the expected atom."""
    atoms = F.tensor(np.arange(-SUPPORT, SUPPORT + 1, dtype=np.float32))
    y = (F.softmax(logits, dim=-1) * atoms).sum(dim=-1)
    inner = F.sqrt(1.0 + 4.0 * EPSILON * (F.abs(y) + 1.0 + EPSILON)) - 1.0
    return F.sign(y) * ((inner / (2.0 * EPSILON)) * (inner / (2.0 * EPSILON)) - 1.0)
