"""Categorical supports for values and rewards (MuZero, Appendix F): a scalar x is squashed by
h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x (eps = 0.001) and written as a two-hot distribution over the
integer atoms -SUPPORT .. SUPPORT; the networks predict logits over the atoms, and a prediction's scalar is
h^-1 of the expected atom. NumPy for the targets (built on the host), recurrent tensors for the predictions.

Rewards are the game's (microseconds of latency saved) times REWARD_SCALE / (largest possible saving), so a
whole game's return lies in about [0, REWARD_SCALE] on every workload: h(100) = 9.15 fits SUPPORT = 10.

The other head (`networks.Sizes.heads` = "scalar"): one output per head, read as output x unit (VALUE_UNIT for
values, REWARD_UNIT for rewards) and learned by squared error on target / unit (`scalar_target`). A step's reward
is a fraction of one atom of the categorical support (h(0.5) = 0.22: a decision's reward is 0.25-0.7 on the small
suite), so its cross-entropy separates two actions' rewards slowly; the units put a step's reward and a
position's value near 1.
"""

from __future__ import annotations

import numpy as np

from timerl.rt import functional as F

SUPPORT = 10
ATOMS = 2 * SUPPORT + 1
EPSILON = 0.001
REWARD_SCALE = 100.0
VALUE_UNIT = 10.0
"""A scalar value head's unit: a position's remaining return is 0-60 of REWARD_SCALE on the small suite."""
REWARD_UNIT = 1.0
"""A scalar reward head's unit: a decision's reward averages 0.25-0.7 (up to 5.6; rewinds down to -18)."""


def squash(x):
    return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + EPSILON * x


def unsquash(y):
    root = (np.sqrt(1.0 + 4.0 * EPSILON * (np.abs(y) + 1.0 + EPSILON)) - 1.0) / (2.0 * EPSILON)
    return np.sign(y) * (root ** 2 - 1.0)


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


def scalar_target(x: np.ndarray, unit: float) -> np.ndarray:
    """A scalar head's targets: ``x`` (reward units) / ``unit``, float32."""
    return (np.asarray(x, dtype=np.float64) / unit).astype(np.float32)
