"""Synthetic computation graphs for REGAL (paper §4.1 and A.1.4, scaled to a 2-core machine).

Topologies come from three classical random-graph models, made acyclic by orienting every edge from the
lower to the higher node index (a node index is a topological position):
- Erdős–Rényi G(n, p), with p chosen for a mean in-degree of 1.5;
- Barabási–Albert preferential attachment: node v reads m in {1, 2} earlier nodes, chosen with
  probability proportional to their degree + 1;
- Watts–Strogatz small world: each node reads its k = 2 predecessors on a line, each read rewired with
  probability 0.3 to a uniformly random earlier node.
Every op makes one output tensor. Op runtimes and tensor sizes are Gaussian (mean 10, std 3, clipped at
1), and each topology has a few variants with multiplicative noise (x N(1, 0.1)) on both, as the paper
augments its data. Splits are by topology: no topology is in two of train / valid / test.

Graph sizes default to 12-28 ops: BRKGA-5K then takes about a second per graph on this machine. ``ops``
sets another range for every split, and ``splits(test_ops=...)`` draws the test topologies from their own
range (a size-transfer test: train on small graphs, test on larger ones; the policy's GNN takes any size).
Decoding cost grows about linearly with ops (BRKGA-1K: 0.06 s at 20 ops, 0.17 s at 50, 0.45 s at 100,
one core, quiet machine).
The runtime objective's memory limit is the median peak memory of 64 uniformly random solutions of
that graph: about half of the search space violates it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from algorithms.regal.graph import CompGraph, from_edges
from algorithms.regal.perfmodel import chromosome_length, evaluate

MODELS = ("erdos_renyi", "barabasi_albert", "watts_strogatz")


@dataclasses.dataclass(frozen=True)
class Splits:
    train: list[CompGraph]
    valid: list[CompGraph]
    test: list[CompGraph]


def topology(model: str, ops: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Edges ``(u, v)`` with ``u < v`` of one random DAG on ``ops`` nodes."""
    if model == "erdos_renyi":
        p = min(1.0, 3.0 / max(ops - 1, 1))
        return [(u, v) for v in range(ops) for u in range(v) if rng.random() < p]
    if model == "barabasi_albert":
        degree = np.zeros(ops)
        edges = []
        for v in range(1, ops):
            reads = rng.choice(v, size=min(v, int(rng.integers(1, 3))), replace=False,
                               p=(degree[:v] + 1) / (degree[:v] + 1).sum())
            for u in reads:
                edges.append((int(u), v))
                degree[u] += 1
                degree[v] += 1
        return edges
    if model == "watts_strogatz":
        edges = set()
        for v in range(1, ops):
            for lag in (1, 2):
                if v - lag >= 0:
                    u = int(rng.integers(0, v)) if rng.random() < 0.3 else v - lag
                    edges.add((u, v))
        return sorted(edges)
    raise ValueError(f"unknown random-graph model {model!r}; choose one of {MODELS}")


def variant(edges: list[tuple[int, int]], ops: int, base_runtimes: np.ndarray, base_sizes: np.ndarray,
            rng: np.random.Generator, name: str, topology_id: str) -> CompGraph:
    runtimes = np.clip(base_runtimes * rng.normal(1.0, 0.1, ops), 1.0, None)
    sizes = np.clip(base_sizes * rng.normal(1.0, 0.1, ops), 1.0, None)
    graph = from_edges(runtimes, edges, sizes, name, topology_id)
    return with_memory_limit(graph, rng)


def with_memory_limit(graph: CompGraph, rng: np.random.Generator, samples: int = 64) -> CompGraph:
    _, peak = evaluate(graph, rng.random((samples, chromosome_length(graph))))
    return dataclasses.replace(graph, memory_limit=float(np.median(peak)))


def generate(topologies: int, variants: int = 2, ops: tuple[int, int] = (12, 28), seed: int = 0,
             first: int = 0) -> list[CompGraph]:
    """``topologies * variants`` graphs of ``ops[0]``-``ops[1]`` ops; graph ``name`` is
    ``model-topology-variant``, topologies numbered from ``first``."""
    if not 2 <= ops[0] <= ops[1]:
        raise ValueError(f"graph sizes {ops}: need 2 <= smallest <= largest")
    rng = np.random.default_rng(seed)
    graphs = []
    for number in range(first, first + topologies):
        model = MODELS[number % len(MODELS)]
        size = int(rng.integers(ops[0], ops[1] + 1))
        edges = topology(model, size, rng)
        runtimes = np.clip(rng.normal(10.0, 3.0, size), 1.0, None)
        sizes = np.clip(rng.normal(10.0, 3.0, size), 1.0, None)
        topology_id = f"{model}-{number}"
        graphs += [variant(edges, size, runtimes, sizes, rng, f"{topology_id}-{k}", topology_id)
                   for k in range(variants)]
    return graphs


MORE_VALID_FIRST = 1000  # the more_valid topologies are numbered from here, after every other split's
FRESH_TEST_FIRST = 2000  # and the fresh_test topologies from here


def splits(train: int = 48, valid: int = 8, test: int = 20, variants: int = 2, ops: tuple[int, int] = (12, 28),
           seed: int = 0, test_ops: tuple[int, int] | None = None, more_train: int = 0,
           more_train_ops: tuple[int, int] | None = None, more_valid: int = 0, fresh_test: int = 0) -> Splits:
    """Topology counts per split; every split's graphs come from its own topologies. With ``test_ops``, the
    test topologies are drawn separately, of that many ops (numbered after the others, from another seed),
    and train / valid are the same as without ``test_ops`` (so weights trained on them carry over). With
    ``more_train``, that many more training topologies (of ``more_train_ops`` ops, by default ``ops``) are
    drawn separately too, from a third seed and numbered after all others, and appended to train; valid
    and test stay the same graphs. With ``more_valid``, that many more validation topologies (of ``ops`` ops)
    are drawn the same way, from a fourth seed, numbered from `MORE_VALID_FIRST`, and appended to valid: a
    larger validation split with train and test unchanged. With ``fresh_test``,
    the test split is replaced by that many test topologies of ``test_ops`` (default ``ops``) ops drawn
    separately, from a fifth seed, numbered from `FRESH_TEST_FIRST`: a second, larger held-out split, train
    and valid unchanged."""
    train_graphs, valid_graphs, test_graphs = _by_topology(train, valid, test, variants, ops, seed)
    # each separately drawn part has its own seed and topology numbers, so adding one leaves the others as
    # they were: every split measured before an option existed is still drawn byte for byte
    if test_ops is not None and not fresh_test:
        test_graphs = generate(test, variants, test_ops, seed + 1_000_003, first=train + valid + test)
    if more_train > 0:
        train_graphs = train_graphs + generate(more_train, variants, more_train_ops or ops, seed + 2_000_003,
                                               first=train + 2 * (valid + test))
    if more_valid > 0:
        valid_graphs = valid_graphs + generate(more_valid, variants, ops, seed + 3_000_007, first=MORE_VALID_FIRST)
    if fresh_test > 0:
        test_graphs = generate(fresh_test, variants, test_ops or ops, seed + 4_000_037, first=FRESH_TEST_FIRST)
    return Splits(train_graphs, valid_graphs, test_graphs)


def _by_topology(train: int, valid: int, test: int, variants: int, ops: tuple[int, int],
                 seed: int) -> tuple[list[CompGraph], list[CompGraph], list[CompGraph]]:
    """The three splits drawn together: ``train + valid + test`` topologies, shuffled into the splits."""
    graphs = generate(train + valid + test, variants, ops, seed)
    by_topology: dict[str, list[CompGraph]] = {}
    for graph in graphs:
        by_topology.setdefault(graph.topology, []).append(graph)
    names = list(by_topology)
    order = np.random.default_rng(seed + 1).permutation(len(names))
    chosen = [names[k] for k in order]

    def pick(start: int, count: int) -> list[CompGraph]:
        return [graph for name in chosen[start:start + count] for graph in by_topology[name]]

    return pick(0, train), pick(train, valid), pick(train + valid, test)
