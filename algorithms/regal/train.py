"""REGAL training (paper §3.1): a contextual bandit trained with REINFORCE and a learned baseline, written
as one recurrent-tensor program over the training iteration ``i``.

At each iteration a batch of training graphs is drawn; the policy samples, per op, d + 2 quantized Beta
distributions; BRKGA runs with them as its mutant distribution (a host ``udf`` node, like the
environments of `timerl.rl`), and the reward is ``-cost(REGAL) / cost(uniform BRKGA)`` on the same graph
with the same budget and the same BRKGA seeds, fresh for every graph of every iteration and shared by that
graph's samples, averaged over ``seeds`` runs. Both runs draw the same random numbers (`brkga.Proposal`
samples by inversion), so the ratio measures the proposal more than the luck of the search (a policy that
proposes Beta(1, 1) everywhere gets exactly -1); the luck left is still 2-7% per run once a proposal
changes many genes, hence the averaging. The loss is the REINFORCE
term with the baseline GNN's prediction subtracted, plus the baseline's squared error. With ``samples`` >
1, each graph of a batch gets several sampled actions and the advantage subtracts the mean reward of that
graph's samples instead (a Monte Carlo estimate of the same scalar baseline b(G), with far less variance
than the network's at the few hundred iterations this machine affords; the baseline GNN is still trained).

``train_budget`` (200 by default, for tests) is BRKGA's budget inside the reward, as is the bench's
`--train-budget` (200 by default too: REINFORCE at the paper's 5,000 evaluations per reward is beyond this
machine); the distilled default runtime policy needs no reward at all (`distillation_data`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

import timerl as trl
from algorithms.regal import features
from algorithms.regal.parallel import best_solutions, run_jobs
from algorithms.regal.graph import CompGraph
from algorithms.regal.policy import GraphInputs, Layout, Sizes, baseline, init_weights, policy_logits
from timerl.errors import FileFormatError, TimeRLError
from timerl.files import read_npy
from timerl.pdg.graph import TensorType
from timerl.rt import functional as F


@dataclasses.dataclass(frozen=True)
class Config:
    kind: str = "runtime"
    iterations: int = 60
    batch: int = 8
    train_budget: int = 200
    lr: float = 3e-3
    sizes: Sizes = Sizes()
    seed: int = 0
    backend: str = "torch"
    workers: int = 1  # Ray workers running BRKGA inside the reward (1: serial, in this process)
    samples: int = 1  # actions sampled per graph in a batch (batch / samples distinct graphs)
    seeds: int = 1  # BRKGA runs (seeds) per episode; the reward is their mean ratio


@dataclasses.dataclass(frozen=True)
class Trained:
    weights: np.ndarray  # flat, laid out by `layout`
    layout: Layout
    sizes: Sizes
    nodes: int  # ops every batch is padded to
    curve: list[dict[str, float]]  # per iteration: mean reward, mean baseline
    seconds: dict[str, float]  # compile, execute


class WeightsError(TimeRLError):
    """Saved weights that do not fit the policy (another version's features or sizes)."""


def load(path: str | os.PathLike, sizes: Sizes, nodes: int) -> Trained:
    """Weights saved by the bench (``np.save`` of `Trained.weights`) as a policy of ``sizes``; a file whose
    size is not the layout's (e.g. saved before the 12th node feature, or before the transfer head) is a
    `WeightsError` naming it."""
    layout = Layout.of(init_weights(sizes))
    try:
        weights = read_npy(path, "saved REGAL weights", (layout.size,))
    except FileFormatError as error:
        raise WeightsError(f"{error}; a policy of {features.NODE_FEATURES} node features, {features.HEADS} Beta "
                           f"heads per op and {sizes} has {layout.size} weights (saved by another version? train "
                           "again, no --reuse)") from error
    return Trained(weights.astype(np.float32), layout, sizes, nodes, [], {})


def single_threaded() -> None:
    """The GNN's tensors are tiny: torch's intra-op threads only contend with BRKGA and each other (on a
    loaded 2-core machine a (3, 14, 14, 16) @ (16, 32) matmul took 8 ms with 2 threads, 12 us with 1)."""
    torch.set_num_threads(1)


class _Reward:
    """The reward udf: ``fn(point, actions)`` -> (B,) rewards for the batch of iteration ``point["i"]``."""

    def __init__(self, graphs: list[CompGraph], batches: np.ndarray, config: Config) -> None:
        self.graphs, self.batches, self.config = graphs, batches, config

    def __call__(self, point: dict, actions: Any) -> tuple[np.ndarray]:
        iteration, config = point["i"], self.config
        actions = np.asarray(actions)
        graphs = self.batches[iteration]
        jobs = []
        for b, g in enumerate(graphs):
            # every sample of one graph gets the same seeds (b // samples), so the per-graph baseline
            # compares the samples' actions, not their luck; uniform BRKGA runs once per graph and seed
            first = b % config.samples == 0
            for seed in self.seeds(iteration, b // config.samples):
                jobs += [(self.graphs[g], config.kind, config.train_budget, proposal, seed)
                         for proposal in ((actions[b], None) if first else (actions[b],))]
        costs = iter(run_jobs(jobs, config.workers))
        rewards = np.zeros(len(graphs))
        uniform = np.zeros(config.seeds)
        for b in range(len(graphs)):
            regal = np.zeros(config.seeds)
            for k in range(config.seeds):
                regal[k] = next(costs)
                if b % config.samples == 0:
                    uniform[k] = next(costs)
            rewards[b] = -np.mean(regal / uniform)
        return rewards.astype(np.float32),

    def seeds(self, iteration: int, slot: int) -> list[int]:
        config = self.config
        first = ((config.seed * 100_003 + iteration) * config.batch + slot) * config.seeds
        return list(range(first, first + config.seeds))

    def __repr__(self) -> str:
        return f"brkga_reward({self.config.kind}, budget={self.config.train_budget})"


def imitate(graphs: list[CompGraph], targets: list[np.ndarray], config: Config = Config(),
            progress: bool = False) -> Trained:
    """Behaviour cloning, a warm start for REINFORCE: ``config.iterations`` Adam steps on the cross-entropy of the
    policy's choices against ``targets[g]``, the (ops, HEADS) actions of a heuristic proposal for graph g
    (`features.imitation_target`) or of a proposal centred on a search's solution (`distillation_data`;
    ``graphs`` may then repeat a graph, one entry per solution), on batches of ``config.batch`` graphs. No
    BRKGA runs; the baseline GNN's weights stay as initialized. The curve's "reward" is the mean log-likelihood
    of a target action per op and head (0 when the policy reproduces the targets with certainty)."""
    single_threaded()
    rng = np.random.default_rng(config.seed)
    nodes = max(graph.num_ops for graph in graphs)
    batches = np.stack([rng.choice(len(graphs), config.batch, replace=len(graphs) < config.batch)
                        for _ in range(config.iterations)])
    inputs = _BatchInputs(graphs, batches, nodes)
    initial = init_weights(config.sizes, config.seed, head_scale=1.0)  # see init_weights: 0.01 stalls here
    layout = Layout.of(initial)
    padded = np.zeros((len(graphs), nodes, features.HEADS), np.int64)
    for g, (graph, target) in enumerate(zip(graphs, targets)):
        padded[g, :graph.num_ops] = target
    curve: list[dict[str, float]] = []

    ctx = trl.Context("i")
    (i,), (I,) = ctx.dims, ctx.bounds
    with ctx:
        weights = trl.param(layout.pack(initial), domain=(i,))
        graph = inputs.sources(config.batch, (i,))
        mask = graph.mask
        target = trl.source(lambda point: padded[batches[point["i"]]], (config.batch, nodes, features.HEADS),
                            "int64", (i,))
        policy = trl.distributions.Categorical(logits=policy_logits(weights, layout, graph, config.sizes))
        per_op = (policy.log_prob(target) * mask.unsqueeze(-1)).sum() / (mask.sum() * features.HEADS)
        (-per_op).backward()
        trl.optim.Adam([weights], lr=config.lr).step()

        def log(point: dict, value: np.ndarray) -> None:
            curve.append({"iteration": point["i"], "reward": float(np.asarray(value)), "baseline": 0.0})
            if progress and point["i"] % 20 == 0:
                print(f"imitation {point['i']:4d}  mean log-likelihood {curve[-1]['reward']:+.4f}", flush=True)

        per_op.sink(log)
        final = _keep_last(ctx, weights, i == I - 1)

    return _run(ctx, I, config, final, layout, nodes, curve)


DISTIL_SEED = 2_000_003  # BRKGA seeds of the distilled solutions: DISTIL_SEED + 1000 s + g (seed s, graph g)


def distillation_data(graphs: list[CompGraph], kind: str, budget: int, seeds: int = 1, concentration: float = 4.0,
                      workers: int = 1, canonical: bool = True, placement: bool = False,
                      anchor: bool = False) -> tuple[list[CompGraph], list[np.ndarray]]:
    """Learning from search: ``seeds`` runs of uniform BRKGA with ``budget`` evaluations on every graph, each
    run's best chromosome turned into the (ops, HEADS) actions of a proposal centred on it
    (`features.solution_actions` with ``concentration``, ``canonical`` and ``placement``). Returns one
    (graph, target) example per run, for `imitate`: with several seeds the policy learns the distribution
    of the searches' solutions per op, and its most likely action is their mode.

    The defaults were chosen on the validation split: priorities respaced by
    the decoded order (the raw keys of a solution are arbitrary wherever no two nodes compete, and a
    policy learns them badly), and the placement left to the search (imitated placements follow the list
    schedule's devices, break the memory limit and lose). With ``anchor`` (and without ``placement``) the
    affinities are anchored on the graph's two longest paths instead of uniform (`features.anchored_actions`;
    the bench's runtime default)."""
    examples = [graph for _ in range(seeds) for graph in graphs]
    jobs = [(graph, kind, budget, None, DISTIL_SEED + 1000 * s + g) for s in range(seeds)
            for g, graph in enumerate(graphs)]
    solutions = best_solutions(jobs, workers)
    targets = [features.solution_actions(graph, keys, concentration, canonical=canonical, placement=placement)
               for graph, keys in zip(examples, solutions)]
    if anchor and not placement:
        targets = [features.anchored_actions(graph, target) for graph, target in zip(examples, targets)]
    return examples, targets


def train(graphs: list[CompGraph], config: Config = Config(), progress: bool = False,
          reward_fn: Callable[[dict, Any], tuple[np.ndarray]] | None = None,
          start: np.ndarray | None = None) -> Trained:
    """REINFORCE on ``graphs``, from ``start`` (flat weights, e.g. `imitate`'s) or a fresh initialization.
    ``reward_fn(point, actions)`` replaces the BRKGA reward (for tests): it gets the (B, N, HEADS) actions
    of iteration ``point["i"]`` and returns a 1-tuple of (B,) float32 rewards."""
    single_threaded()
    rng = np.random.default_rng(config.seed)
    nodes = max(graph.num_ops for graph in graphs)
    distinct = config.batch // config.samples
    if distinct * config.samples != config.batch:
        raise ValueError(f"batch {config.batch} is not a multiple of samples {config.samples}")
    batches = np.stack([np.repeat(rng.choice(len(graphs), distinct, replace=len(graphs) < distinct), config.samples)
                        for _ in range(config.iterations)])
    inputs = _BatchInputs(graphs, batches, nodes)
    initial = init_weights(config.sizes, config.seed)
    layout = Layout.of(initial)
    packed = layout.pack(initial) if start is None else np.asarray(start, np.float32)
    curve: list[dict[str, float]] = []

    ctx = trl.Context("i")
    (i,), (I,) = ctx.dims, ctx.bounds
    with ctx:
        weights = trl.param(packed, domain=(i,))
        graph = inputs.sources(config.batch, (i,))
        mask = graph.mask
        policy = trl.distributions.Categorical(logits=policy_logits(weights, layout, graph, config.sizes))
        action = policy.sample()  # (B, N, HEADS)
        (reward,) = F.apply("udf", action, fn=reward_fn or _Reward(graphs, batches, config),
                            outputs=(TensorType((config.batch,), "float32"),), as_tuple=True)
        value = baseline(weights, layout, graph, config.sizes)
        if config.samples > 1:  # the other samples of the same graph are a lower-variance baseline
            per_graph = reward.reshape((distinct, config.samples))
            advantage = (per_graph - per_graph.mean(dim=1, keepdim=True)).reshape((config.batch,)).detach()
        else:
            advantage = (reward - value).detach()
        log_prob = (policy.log_prob(action).sum(dim=-1) * mask).sum(dim=-1)  # (B,): the whole action
        loss = -(log_prob * advantage).mean() + ((reward - value) * (reward - value)).mean()
        loss.backward()
        trl.optim.Adam([weights], lr=config.lr).step()

        def log(point: dict, rewards_and_values: np.ndarray) -> None:
            rewards_and_values = np.asarray(rewards_and_values)
            curve.append({"iteration": point["i"], "reward": float(rewards_and_values[0].mean()),
                          "baseline": float(rewards_and_values[1].mean())})
            if progress:
                print(f"iteration {point['i']:4d}  mean reward {curve[-1]['reward']:+.4f}  "
                      f"baseline {curve[-1]['baseline']:+.4f}", flush=True)

        trl.stack([reward, value]).sink(log)
        final = _keep_last(ctx, weights, i == I - 1)

    return _run(ctx, I, config, final, layout, nodes, curve)


def _keep_last(ctx: trl.Context, weights: Any, last: Any) -> list:
    """A list that receives ``weights``' value at the program's last iteration (``last``)."""
    final: list = []
    with ctx.when(last):
        weights.sink(lambda point, value: final.append(np.asarray(value).copy()))
    return final


def _run(ctx: trl.Context, I: Any, config: Config, final: list, layout: Any, nodes: Any, curve: list) -> Trained:
    """Compile and execute a training program of ``config.iterations`` iterations; what it trained."""
    executable = ctx.compile(bounds={I: config.iterations}, backend=config.backend, seed=config.seed)
    executable.execute()
    seconds = {"compile": executable.stats["compile_seconds"], "execute": executable.stats["execute_seconds"]}
    return Trained(final[-1], layout, config.sizes, nodes, curve, seconds)


class _BatchInputs:
    """Padded features of each iteration's batch, built once per iteration and shared by the six sources:
    ``nodes`` ops and as many edge slots as the largest graph has edges."""

    def __init__(self, graphs: list[CompGraph], batches: np.ndarray, nodes: int) -> None:
        self.graphs, self.batches, self.nodes = graphs, batches, nodes
        self.edge_slots = max([1] + [features.edge_count(graph) for graph in graphs])
        self._cache: dict[int, features.Batch] = {}
        self._rows: dict[int, features.Batch] = {}

    def sources(self, batch: int, domain: tuple) -> GraphInputs:
        n, e = self.nodes, self.edge_slots
        shapes = {"nodes": ((batch, n, features.NODE_FEATURES), "float32"),
                  "edges": ((batch, e, features.EDGE_FEATURES), "float32"), "source": ((batch, e), "int64"),
                  "target": ((batch, e), "int64"), "edge_mask": ((batch, e), "float32"),
                  "mask": ((batch, n), "float32")}
        return GraphInputs(**{name: trl.source(self.field(name), shape, dtype, domain)
                              for name, (shape, dtype) in shapes.items()})

    def field(self, name: str):
        def read(point: dict) -> np.ndarray:
            iteration = point["i"]
            if iteration not in self._cache:
                rows = [self._graph(g) for g in self.batches[iteration]]
                self._cache = {iteration: features.Batch(*(np.concatenate([getattr(row, field.name) for row in rows])
                                                           for field in dataclasses.fields(features.Batch)))}
            return getattr(self._cache[iteration], name)
        return read

    def _graph(self, g: int) -> features.Batch:
        """Graph g's padded features (computed once: the list schedule costs more than the GNN)."""
        if g not in self._rows:
            self._rows[g] = features.batch([self.graphs[g]], self.nodes, self.edge_slots)
        return self._rows[g]


def propose(trained: Trained, graphs: list[CompGraph], batch: int = 8, backend: str = "torch",
            greedy: bool = True, seed: int = 0) -> list[np.ndarray]:
    """The trained policy's most likely action per op (or, with ``greedy`` False, one sampled action),
    (ops, HEADS) for each graph, computed by an RT program over batches ``i`` of graphs with the trained
    weights as constants."""
    single_threaded()
    nodes = max([trained.nodes] + [graph.num_ops for graph in graphs])
    count = -(-len(graphs) // batch)
    batches = np.arange(count * batch).reshape(count, batch) % len(graphs)
    inputs = _BatchInputs(graphs, batches, nodes)
    chosen: dict[int, np.ndarray] = {}
    ctx = trl.Context("i")  # i: a batch of graphs
    (I,) = ctx.bounds
    with ctx:
        weights = trl.tensor(trained.weights)
        logits = policy_logits(weights, trained.layout, inputs.sources(batch, ctx.dims), trained.sizes)
        action = logits.argmax(dim=-1) if greedy else trl.distributions.Categorical(logits=logits).sample()
        action.sink(lambda point, value: chosen.__setitem__(point["i"], np.asarray(value).copy()))
    ctx.compile(bounds={I: count}, backend=backend, seed=seed).execute()
    return [chosen[k // batch][k % batch, :graph.num_ops] for k, graph in enumerate(graphs)]
