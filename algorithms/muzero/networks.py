"""MMap-MuZero's networks (paper Fig. 4) as recurrent tensors over one flat weight vector.

    representation: features -> [memory map 256 -> 32 (relu)] ++ [everything else -> 64 (relu)]
                    -> 64 (relu) -> hidden state (H)
    dynamics:       [state, one-hot action] -> 64 (relu) -> next state (H);  next state -> 32 -> reward atoms
    prediction:     state -> 32 (relu) -> 3 policy logits;  state -> 32 (relu) -> value atoms

(with `Sizes.heads` = "scalar" the reward and value heads have one output each, `support.scalar_target`'s units)

Hidden states are min-max scaled to [0, 1] per sample, as in MuZero (Appendix G). Departure from the
paper: its image branch is a ResNet over a 128 x 128 memory map; here the 16 x 16 map goes through one dense
layer (the engine has no convolution op, and the map is small enough). Widths are chosen for a 2-core
machine (about 45k weights). All weights live in one flat vector (a `trl.param` when learning, a constant or
a source when searching), so one forward function serves both, and the optimizer updates one tensor.
"""

from __future__ import annotations

import dataclasses

import numpy as np

import timerl as trl
from algorithms.muzero.features import BLOCKS, FEATURES, block_slice
from algorithms.muzero.support import ATOMS, REWARD_UNIT, VALUE_UNIT, scalar_of
from timerl.rt import functional as F

RT = trl.RecurrentTensor
ACTIONS = 3
HEADS = ("categorical", "scalar")


@dataclasses.dataclass(frozen=True)
class Sizes:
    hidden: int = 32  # the state H
    image: int = 32
    trunk: int = 64
    head: int = 32
    heads: str = "categorical"
    """The value and reward heads: "categorical" (MuZero's: logits over `support.ATOMS` atoms, cross-entropy on
    two-hot targets) or "scalar" (one output each, squared error on targets in `support`'s units)."""

    def __post_init__(self):
        if self.heads not in HEADS:
            raise ValueError(f"Sizes.heads must be one of {HEADS}, got {self.heads!r}")

    @property
    def outputs(self) -> int:
        """Outputs of the value and reward heads."""
        return ATOMS if self.heads == "categorical" else 1


def shapes(sizes: Sizes) -> dict[str, tuple[int, int]]:
    """Every dense layer, (fan in, fan out)."""
    h, outputs = sizes.hidden, sizes.outputs
    rest = FEATURES - BLOCKS["memory_map"]
    return {"repr.image": (BLOCKS["memory_map"], sizes.image), "repr.rest": (rest, sizes.trunk),
            "repr.mix": (sizes.image + sizes.trunk, sizes.trunk), "repr.out": (sizes.trunk, h),
            "dyn.mix": (h + ACTIONS, sizes.trunk), "dyn.out": (sizes.trunk, h),
            "dyn.reward_hidden": (h + ACTIONS, sizes.head), "dyn.reward": (sizes.head, outputs),
            "pred.policy_hidden": (h, sizes.head), "pred.policy": (sizes.head, ACTIONS),
            "pred.value_hidden": (h, sizes.head), "pred.value": (sizes.head, outputs)}


def init_weights(sizes: Sizes = Sizes(), seed: int = 0) -> dict[str, np.ndarray]:
    """PyTorch's uniform(-1/sqrt(fan in), 1/sqrt(fan in)); the output layers of the heads start at zero, so
    the first predictions are uniform policies and zero values and rewards (the scalar of uniform atoms)."""
    rng = np.random.default_rng(seed)
    weights = {}
    for name, (fan_in, fan_out) in shapes(sizes).items():
        limit = 1.0 / np.sqrt(fan_in)
        weights[f"{name}.w"] = rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)
        weights[f"{name}.b"] = rng.uniform(-limit, limit, (fan_out,)).astype(np.float32)
    for head in ("dyn.reward", "pred.policy", "pred.value"):
        weights[f"{head}.w"][:] = 0.0
        weights[f"{head}.b"][:] = 0.0
    return weights


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where each named weight sits in the flat vector: name -> (offset, shape)."""

    slots: dict
    size: int

    @classmethod
    def of(cls, weights: dict[str, np.ndarray]) -> "Layout":
        slots, offset = {}, 0
        for name, array in weights.items():
            slots[name] = (offset, array.shape)
            offset += array.size
        return cls(slots, offset)

    def pack(self, weights: dict[str, np.ndarray]) -> np.ndarray:
        return np.concatenate([weights[name].ravel() for name in self.slots]).astype(np.float32)

    def unpack(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        return {name: flat[offset:offset + int(np.prod(shape))].reshape(shape)
                for name, (offset, shape) in self.slots.items()}

    @property
    def scalar_heads(self) -> bool:
        """Whether the value and reward heads are scalar (`Sizes.heads`): one output each."""
        return self.slots["pred.value.w"][1][-1] == 1

    def view(self, flat: RT, name: str) -> RT:
        offset, shape = self.slots[name]
        return F.reshape(F.spatial(flat, slice(offset, offset + int(np.prod(shape)))), shape)


class Networks:
    """The three functions over a flat weight vector ``weights`` laid out by ``layout``."""

    def __init__(self, weights: RT, layout: Layout):
        self.weights, self.layout = weights, layout

    def dense(self, x: RT, name: str) -> RT:
        return F.matmul(x, self.layout.view(self.weights, f"{name}.w")) + self.layout.view(self.weights, f"{name}.b")

    def representation(self, features: RT) -> RT:
        image = features.spatial[..., block_slice("memory_map")]
        rest = F.cat([features.spatial[..., :block_slice("memory_map").start],
                      features.spatial[..., block_slice("memory_map").stop:]], dim=-1)
        mixed = F.cat([F.relu(self.dense(image, "repr.image")), F.relu(self.dense(rest, "repr.rest"))], dim=-1)
        return scale_state(self.dense(F.relu(self.dense(mixed, "repr.mix")), "repr.out"))

    def dynamics(self, state: RT, action: RT) -> tuple[RT, RT]:
        """(next state, reward logits) after ``action`` (int64, state's batch shape)."""
        joined = F.cat([state, F.one_hot(action, ACTIONS).astype("float32")], dim=-1)
        following = scale_state(self.dense(F.relu(self.dense(joined, "dyn.mix")), "dyn.out"))
        reward = self.dense(F.relu(self.dense(joined, "dyn.reward_hidden")), "dyn.reward")
        return following, reward

    def prediction(self, state: RT) -> tuple[RT, RT]:
        """(policy logits, value logits)."""
        policy = self.dense(F.relu(self.dense(state, "pred.policy_hidden")), "pred.policy")
        value = self.dense(F.relu(self.dense(state, "pred.value_hidden")), "pred.value")
        return policy, value

    def reward_of(self, reward: RT) -> RT:
        """(...,) the reward in reward units from `dynamics`' reward output (atoms' logits or one scalar)."""
        return reward.sum(dim=-1) * REWARD_UNIT if self.layout.scalar_heads else scalar_of(reward)

    def value_of(self, value: RT) -> RT:
        """(...,) the value in reward units from `prediction`'s value output."""
        return value.sum(dim=-1) * VALUE_UNIT if self.layout.scalar_heads else scalar_of(value)


def scale_state(state: RT) -> RT:
    low = state.min(dim=-1, keepdim=True)
    high = state.max(dim=-1, keepdim=True)
    return (state - low) / F.maximum(high - low, 1e-5)
