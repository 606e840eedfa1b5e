"""The PG learner of EGRL as recurrent tensors: SAC-discrete (Appendix D) on the Graph U-Net, one gradient
step per iteration ``i``, fed by a user-defined function that runs the population and the policy's own
rollouts on the chip and samples the shared replay buffer.

    logits[i]            = actor[i](features)                         (N, 2, 3)
    actions, rewards [i] = experience(logits[i], actor[i])            udf: rollouts, evolution, replay sample
    Q_k(s, a)            = mean over nodes and tensors of q_k[i](features)[node, tensor, a]
    critic loss          = sum_k mean over the batch of (Q_k(s, a) - scale * reward)^2
    actor loss           = mean over nodes of sum_a pi(a) (alpha log pi(a) - min_k q_k(a))   (exact entropy)

Episodes are one step long (the paper's "steps per episode: 1"), so the Bellman target is the reward itself:
γ and the target critics (τ) drop out. The critic is factored per node and tensor, a Q-value per level, so the
actor's expectation over each node's three levels is exact, with clipped double Q (the minimum of two
critics). Actor and critics share one Adam at the paper's 1e-3 (both of its learning rates); α = 0.05,
batch 24, reward scale 5 (Table 2). The udf's output depends on the actor at ``i``, and the actor at ``i + 1``
on the udf's output, so the executor runs rollouts and updates in their natural order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

import timerl as trl
from algorithms.egrl.policy import Architecture, GraphUNet, Hierarchy, dram_bias, init_weights
from timerl.pdg.graph import TensorType
from timerl.rt import functional as F


@dataclass(frozen=True)
class SACConfig:
    lr: float = 1e-3
    alpha: float = 0.05
    batch: int = 24
    reward_scale: float = 5.0


CRITIC_BIAS = np.zeros(6, np.float32)  # critics start unbiased (a DRAM lean would pin the actor to DRAM)
# experience(iteration, logits (N, 2, 3), actor weights by name) -> (actions (B, N, 2) int64, rewards (B,))
Experience = Callable[[int, np.ndarray, dict[str, np.ndarray]], tuple[np.ndarray, np.ndarray]]


class _ExperienceUDF:
    """Adapts the current run's `Experience` to the udf calling convention ``fn(point, *inputs)``."""

    def __init__(self, learner: "Learner") -> None:
        self.learner = learner

    def __call__(self, point: dict, logits, *weights) -> tuple[np.ndarray, np.ndarray]:
        values = {name: np.asarray(value) for name, value in zip(self.learner.names, weights)}
        actions, rewards = self.learner.experience(point["i"], np.asarray(logits), values)
        return np.asarray(actions, dtype=np.int64), np.asarray(rewards, dtype=np.float32)

    def __repr__(self) -> str:
        return "egrl.experience"


class _InitialUDF:
    """The current run's initial weights of the actor and the two critics, in `Learner.order`."""

    def __init__(self, learner: "Learner") -> None:
        self.learner = learner

    def __call__(self, point: dict, unused) -> tuple[np.ndarray, ...]:
        return tuple(self.learner.initial)

    def __repr__(self) -> str:
        return "egrl.initial"


class Learner:
    """The learner compiled once for a workload and run any number of times: the initial weights (actor
    ``init_weights(arch, seed, dram_bias(nodes))``, critics ``seed + 1`` and ``seed + 2`` with unbiased
    outputs) and the experience come from udfs that read the run given to `run`, so seeds and methods share one
    compile (the torch backend's scheduler takes minutes on this program; running a compiled one takes a
    fraction of a second per step). ``run`` executes ``iterations`` gradient steps and returns ``[critic loss,
    actor loss, mean policy entropy]`` of each."""

    def __init__(self, features: np.ndarray, hierarchy: Hierarchy, iterations: int,
                 config: SACConfig = SACConfig(), arch: Architecture = Architecture(), backend: str = "torch",
                 optimize: bool = True) -> None:
        self.arch, self.iterations, self.nodes = arch, iterations, features.shape[0]
        self.names = list(init_weights(arch, 0))
        self.experience: Experience | None = None
        self.initial: list[np.ndarray] = []
        self.log: list[np.ndarray] = []
        started = time.perf_counter()
        self.executable = self._compile(features, hierarchy, config, backend, optimize)
        self.compile_seconds = time.perf_counter() - started

    def run(self, experience: Experience, seed: int) -> list[np.ndarray]:
        self.experience, self.log = experience, []
        biases = (dram_bias(self.nodes), CRITIC_BIAS, CRITIC_BIAS)
        self.initial = [value for k in range(3) for value in init_weights(self.arch, seed + k, biases[k]).values()]
        self.executable.execute()
        return self.log

    def _compile(self, features: np.ndarray, hierarchy: Hierarchy, config: SACConfig, backend: str,
                 optimize: bool):
        arch, nodes = self.arch, features.shape[0]
        ctx = trl.Context("i")
        (i,) = ctx.dims
        (I,) = ctx.bounds
        with ctx:
            x = trl.tensor(features)
            shapes = [TensorType(value.shape, "float32") for _ in range(3) for value in init_weights(arch, 0).values()]
            initial = F.apply("udf", trl.tensor(np.zeros(1, np.float32)), fn=_InitialUDF(self), outputs=tuple(shapes),
                              as_tuple=True)
            per_net = len(self.names)
            actor, *critics = [GraphUNet(hierarchy, arch, domain=(i,), initial=dict(
                zip(self.names, initial[k * per_net:(k + 1) * per_net]))) for k in range(3)]

            logits = actor(x).reshape((nodes, 2, 3))
            outputs = (TensorType((config.batch, nodes, 2), "int64"), TensorType((config.batch,), "float32"))
            actions, rewards = F.apply("udf", logits.detach(), *(w.detach() for w in actor.parameters()),
                                       fn=_ExperienceUDF(self), outputs=outputs, as_tuple=True)
            chosen = trl.one_hot(actions, 3).astype("float32")  # (B, N, 2, 3)
            target = rewards * config.reward_scale
            q_values = [critic(x).reshape((nodes, 2, 3)) for critic in critics]
            critic_loss = sum((((chosen * q).sum(-1).reshape((config.batch, 2 * nodes)).mean(-1) - target) ** 2)
                              .mean() for q in q_values)
            log_pi = logits.log_softmax(-1)
            q_min = F.minimum(q_values[0], q_values[1]).detach()
            actor_loss = (log_pi.exp() * (log_pi * config.alpha - q_min)).sum(-1).mean()
            entropy = -(log_pi.exp() * log_pi).sum(-1).mean()
            # the losses are the program's output: a sink keeps the learner alive through dead-code elimination
            trl.stack([critic_loss, actor_loss, entropy]).sink(
                lambda point, value: self.log.append(np.asarray(value).copy()))
            (critic_loss + actor_loss).backward()
            params = actor.parameters() + [p for critic in critics for p in critic.parameters()]
            trl.optim.Adam(params, lr=config.lr).step()
        return ctx.compile(bounds={I: self.iterations}, backend=backend, seed=0, optimize=optimize)


class _Run:
    def __init__(self, learner: Learner, experience: Experience, seed: int, log: list) -> None:
        self.learner, self.experience, self.seed, self.log = learner, experience, seed, log

    def execute(self) -> None:
        self.log.extend(self.learner.run(self.experience, self.seed))


def build(features: np.ndarray, hierarchy: Hierarchy, experience: Experience, iterations: int,
          config: SACConfig = SACConfig(), arch: Architecture = Architecture(), seed: int = 0,
          backend: str = "torch", log: list | None = None, optimize: bool = True) -> _Run:
    """Compile the learner for one run; ``.execute()`` runs ``iterations`` gradient steps and appends
    ``[critic loss, actor loss, mean policy entropy]`` of each to ``log``."""
    learner = Learner(features, hierarchy, iterations, config, arch, backend, optimize)
    return _Run(learner, experience, seed, [] if log is None else log)
