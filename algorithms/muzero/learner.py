"""MuZero's learning step as one recurrent-tensor program over training iterations ``i``.

At every iteration a batch is sourced from the host (`feed(point)`, which may play games and reanalyse
first) and the loss of the K-step unroll is

    s_0 = representation(o_t);  for k = 0..K:  p_k, v_k = prediction(s_k)
        loss += scale_k * [ CE(p_k over legal_{t+k}, pi_{t+k}) * mask_k + 0.25 * CE(v_k, z_{t+k}) ]
        (k < K):  s_{k+1}, r_k = dynamics(s_k, a_{t+k});  loss += scale_{k+1} * CE(r_k, u_{t+k});
                  the gradient into s_{k+1} is halved (MuZero's scale_gradient)

with scale_0 = 1 and scale_k = 1 / K for the unrolled steps, averaged over the batch (with scalar heads,
`networks.Sizes.heads`, the value and reward terms are squared errors (v_k - z_{t+k})^2 and (r_k - u_{t+k})^2 on
targets in `support`'s units), plus weight decay as
PyTorch's Adam applies it (weight_decay * w added to the gradient, i.e. 0.5 * weight_decay * |w|^2 in the
loss). Value loss weight 0.25 as in MuZero Reanalyse. Adam lr 2e-4, weight decay 1e-4 (paper Table 6).
A sink publishes the weights after every step, so self-play in the next `feed` acts with them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

import timerl as trl
from algorithms.muzero.features import FEATURES
from algorithms.muzero.networks import ACTIONS, Layout, Networks
from algorithms.muzero.support import ATOMS
from timerl.rt import functional as F

VALUE_LOSS_WEIGHT = 0.25
ILLEGAL_LOGIT = -1e4
"""The policy loss is over the position's legal actions (a softmax with the illegal logits at -1e4, whose target is
0), as the search masks the root in play. Unmasked, the policy learned the marginal of near-uniform visit targets,
where Drop (legal at 97% of positions, NoCopy at 70%) is the most frequent: on cnn_sgd the visit targets of the
initial search average (0.31, 0.30, 0.39) and the greedy game went to all-Drop (0.454 -> 0.000) in 20 steps."""


@dataclasses.dataclass(frozen=True)
class LearnerConfig:
    batch: int = 16
    unroll: int = 5
    lr: float = 2e-4
    weight_decay: float = 1e-4
    final_lr: float | None = None
    """Cosine decay of the learning rate from ``lr`` at the first step to ``final_lr`` at the last (`learning_rate`);
    None: constant ``lr``."""
    decay_steps: int | None = None
    """The cosine's length in steps, ``final_lr`` after it; None: the run's steps."""


def learning_rate(config: LearnerConfig, step: int, steps: int) -> float:
    """Step ``step``'s (of ``steps``) learning rate: ``lr``, or with ``final_lr`` the cosine schedule
    final + (lr - final) (1 + cos(pi min(step, n - 1) / (n - 1))) / 2 over n = ``steps`` (``decay_steps`` where
    fewer)."""
    length = steps if config.decay_steps is None else min(steps, config.decay_steps)
    if config.final_lr is None or length <= 1:
        return config.lr
    cosine = 0.5 * (1.0 + np.cos(np.pi * min(step, length - 1) / (length - 1)))
    return float(config.final_lr + (config.lr - config.final_lr) * cosine)


def cross_entropy(logits, target):
    return -(target * F.log_softmax(logits, dim=-1)).sum(dim=-1)


def squared_error(prediction, target):
    """A scalar head's loss: (prediction's one output - target)^2."""
    error = prediction.sum(dim=-1) - target
    return error * error


def unroll_loss(nets: Networks, batch: dict, unroll: int):
    """The (B,) per-sample loss of the K-step unroll (module docstring); ``batch`` holds recurrent tensors."""
    head_loss = squared_error if nets.layout.scalar_heads else cross_entropy
    state = nets.representation(batch["features"])
    total = None
    for k in range(unroll + 1):
        scale = 1.0 if k == 0 else 1.0 / unroll
        policy, value = nets.prediction(state)
        legal_logits = F.where(batch["legal"].spatial[:, k] > 0.5, policy, ILLEGAL_LOGIT)
        term = (cross_entropy(legal_logits, batch["policy"].spatial[:, k]) * batch["policy_mask"].spatial[:, k]
                + VALUE_LOSS_WEIGHT * head_loss(value, batch["value"].spatial[:, k])) * scale
        total = term if total is None else total + term
        if k < unroll:
            state, reward = nets.dynamics(state, batch["actions"].spatial[:, k])
            total = total + head_loss(reward, batch["reward"].spatial[:, k]) / unroll
            state = state * 0.5 + F.detach(state) * 0.5
    return total


def batch_shapes(config: LearnerConfig, scalar_heads: bool = False) -> dict[str, tuple[tuple[int, ...], str]]:
    """Each batch field's (shape, dtype); value and reward targets are two-hot over the atoms, or one number each
    with ``scalar_heads``."""
    B, K = config.batch, config.unroll
    atoms = () if scalar_heads else (ATOMS,)
    return {"features": ((B, FEATURES), "float32"), "actions": ((B, K), "int64"),
            "policy": ((B, K + 1, ACTIONS), "float32"), "policy_mask": ((B, K + 1), "float32"),
            "legal": ((B, K + 1, ACTIONS), "float32"),
            "value": ((B, K + 1) + atoms, "float32"), "reward": ((B, K) + atoms, "float32")}


def train(initial: np.ndarray, layout: Layout, config: LearnerConfig, iterations: int,
          feed: Callable[[int], dict], publish: Callable[[int, np.ndarray, float], None],
          backend: str = "torch", seed: int = 0) -> dict:
    """Run ``iterations`` learning steps. ``feed(i)`` returns the batch of iteration i (NumPy arrays shaped as
    `batch_shapes`); ``publish(i, weights, loss)`` gets the weights after step i and step i's loss.
    Returns the executable's stats."""
    current: dict = {}
    losses: dict[int, float] = {}

    def field(name):
        def read(point):
            i = point["i"]
            if current.get("i") != i:
                current.clear()
                current.update(feed(i), i=i)
            return current[name]
        return read

    ctx = trl.Context("i")
    (i,), (I,) = ctx.dims, ctx.bounds
    with ctx:
        weights = trl.param(initial.astype(np.float32), domain=(i,))
        batch = {name: trl.source(field(name), shape, dtype, (i,))
                 for name, (shape, dtype) in batch_shapes(config, layout.scalar_heads).items()}
        loss = unroll_loss(Networks(weights, layout), batch, config.unroll).mean()
        objective = loss + 0.5 * config.weight_decay * (weights * weights).sum()
        objective.backward()
        lr = config.lr if config.final_lr is None else trl.source(
            lambda point: np.float32(learning_rate(config, point["i"], iterations)), (), "float32", (i,))
        trl.optim.Adam([weights], lr=lr).step()
        loss.sink(lambda point, value: losses.__setitem__(point["i"], float(value)))
        with ctx.when(i >= 1):
            weights.sink(lambda point, value: publish(point["i"] - 1, np.asarray(value).copy(),
                                                      losses.get(point["i"] - 1, float("nan"))))
    executable = ctx.compile(bounds={I: iterations + 1}, backend=backend, seed=seed)
    executable.execute()
    return dict(executable.stats)
