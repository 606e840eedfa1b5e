"""What the REGAL networks see of a graph, and what their actions mean for BRKGA.

Node attributes (12): runtime and output size (each over the graph's mean), log(1 + in-degree),
log(1 + out-degree), the longest path (in ops) from any source and to any sink, each over the longest
path of the graph, and output size over the memory limit (0 without one), so the network knows how tight
memory is. Then three from a list schedule of the graph (`list_schedule`: critical-path order, each op on
the device where it finishes first): the op's device there (0 or 1), its start over the schedule's
makespan, and its upward rank over the largest; and whether that schedule fits the graph's memory limit
(1 or 0, the same for every op: `list_schedule_fits`, one decoding of the schedule by the performance
model). Without the list schedule's features nothing in a node's attributes tells two devices apart, so
two structurally alike ops (the branches of a fork) get the same proposal and the policy can only learn a
placement preference shared by all ops; the list schedule breaks that symmetry with a deterministic
function of the graph, which the policy may follow, soften or ignore. The list schedule
ignores memory: on the validation graphs it breaks the runtime objective's memory limit on 60% of them,
where a proposal centred on it loses badly; the fits feature says which. Last, whether the graph is wide
(1 or 0, the same for every op: `is_wide`, some level of ops at equal depth holds 4 or more), which is
where the peak-memory heuristic is used (`imitation_target`). Last, the op's depth level
(`depth_level`: the rank of its depth among the graph's distinct depths, over the largest rank, cut into
the 5 equal bins of the peak-memory heuristic's priorities, as 0, 1/4, ..., 1). With depth over the
longest path alone (the 5th feature) the bins' boundaries move with the graph's longest path, and with
the unbinned rank they fall on the rank's own values (a graph of 6 depths has ranks 0, 0.2, ..., 1): the
policies trained on either missed priority bins by one on wide graphs. Last, whether the
op lies on a critical path (`critical_path`: a longest path by runtime, 1 or 0), and whether it lies on
the longest path through the other ops (`second_path`, 1 or 0): the ops the runtime policy's affinities
anchor to one device and to the other (`anchored_actions`).
Edge attributes (2) of edge u -> v (v reads tensor k of u): the size of k over the mean size, and
1 / (number of readers of k).

Graphs are batched as edge lists, padded to ``nodes`` ops and ``edge_slots`` edges: edge e of graph b runs
``source[b, e] -> target[b, e]`` (one per tensor and reader: a multigraph) with attributes ``edges[b, e]``;
``edge_mask[b, e]`` marks real edges (padding edges join op 0 to itself and carry nothing), ``mask[b, v]``
real ops.

Actions: for each op, d + 2 = 4 independent Beta distributions (affinity for device 0, for device 1, the
op's priority, and the transfer priority of its output tensors), each chosen among 16 quantized (mean,
variance) choices: the 15 pairs of means {0.1, 0.3, 0.5, 0.7, 0.9} and concentrations alpha + beta in
{4, 10, 30} (variance ``mean (1 - mean) / (concentration + 1)``, so a larger concentration is a smaller
variance), and, as action 15, the uniform Beta(1, 1) of standard BRKGA.

The transfer action is one Beta per op, shared by the d transfer keys (k, j) of each of its output
tensors k, not one per destination device: with d = 2 a tensor is only ever copied to the device its
producer is not on, so for any placement one key per tensor is read and a shared Beta sets exactly that
key (d + 2 heads instead of 2d + 1, the same expressiveness at d = 2).
A proposal centred on a BRKGA-50K solution reaches BRKGA-50K only when it sets the transfer keys too.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from algorithms.regal.brkga import Proposal
from algorithms.regal.graph import CompGraph
from algorithms.regal.perfmodel import DEVICES, chromosome_length, evaluate, schedule_positions, split

NODE_FEATURES = 15
EDGE_FEATURES = 2
MEANS = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
CONCENTRATIONS = np.array([4.0, 10.0, 30.0])
UNIFORM = MEANS.size * CONCENTRATIONS.size  # the last action: Beta(1, 1)
CHOICES = UNIFORM + 1  # 16 actions per Beta distribution
PRIORITY = DEVICES  # the head of the op's priority
TRANSFER = DEVICES + 1  # the head of its output tensors' transfer priority (all destination devices)
HEADS = DEVICES + 2  # Beta distributions per op


@dataclasses.dataclass(frozen=True)
class Batch:
    nodes: np.ndarray  # (B, N, NODE_FEATURES)
    edges: np.ndarray  # (B, E, EDGE_FEATURES)
    source: np.ndarray  # (B, E) int64
    target: np.ndarray  # (B, E) int64
    edge_mask: np.ndarray  # (B, E)
    mask: np.ndarray  # (B, N)


def path_lengths(graph: CompGraph) -> tuple[np.ndarray, np.ndarray]:
    """Longest path, in ops, from any source to each op (depth) and from each op to any sink (height)."""
    reads = graph.op_adjacency() > 0  # [u, v]: v reads u
    depth = np.zeros(graph.num_ops)
    height = np.zeros(graph.num_ops)
    for v in graph.order:
        parents = np.flatnonzero(reads[:, v])
        depth[v] = 1 + (depth[parents].max() if parents.size else 0)
    for u in graph.order[::-1]:
        children = np.flatnonzero(reads[u])
        height[u] = 1 + (height[children].max() if children.size else 0)
    return depth, height


@dataclasses.dataclass(frozen=True)
class ListSchedule:
    device: np.ndarray  # (ops,) int
    start: np.ndarray  # (ops,)
    makespan: float
    upward_rank: np.ndarray  # (ops,): the op's runtime plus the longest runtime path after it


def list_schedule(graph: CompGraph) -> ListSchedule:
    """HEFT for d homogeneous devices and free transfers: ops by decreasing upward rank (a topological
    order when runtimes are positive; ties keep the graph's order), each on the device where it can
    finish first (earliest start after its producers and the device's previous op). Memory is ignored."""
    reads = graph.op_adjacency() > 0
    rank = np.zeros(graph.num_ops)
    for u in graph.order[::-1]:
        children = np.flatnonzero(reads[u])
        rank[u] = graph.runtimes[u] + (rank[children].max() if children.size else 0.0)
    position = np.empty(graph.num_ops, np.int64)
    position[graph.order] = np.arange(graph.num_ops)
    free, finish = np.zeros(DEVICES), np.zeros(graph.num_ops)
    device, start = np.zeros(graph.num_ops, np.int64), np.zeros(graph.num_ops)
    for v in np.lexsort((position, -rank)):
        parents = np.flatnonzero(reads[:, v])
        earliest = np.maximum(free, finish[parents].max() if parents.size else 0.0)
        device[v] = int(np.argmin(earliest))
        start[v] = earliest[device[v]]
        finish[v] = free[device[v]] = start[v] + graph.runtimes[v]
    return ListSchedule(device, start, float(finish.max()), rank)


def critical_path(graph: CompGraph, schedule: ListSchedule | None = None) -> np.ndarray:
    """(ops,) bool: the ops on a longest path by runtime (their runtime plus the longest runtime path before
    and after them equals the longest path of the graph; ties mark every such path). ``schedule``: the
    graph's list schedule if already computed (its upward ranks are the paths after each op)."""
    reads = graph.op_adjacency() > 0
    after = (list_schedule(graph) if schedule is None else schedule).upward_rank  # runtime + longest path after
    before = np.zeros(graph.num_ops)
    for v in graph.order:
        parents = np.flatnonzero(reads[:, v])
        before[v] = (before[parents] + graph.runtimes[parents]).max() if parents.size else 0.0
    return np.isclose(before + after, after.max(), rtol=1e-9, atol=0.0)


def second_path(graph: CompGraph, on_critical: np.ndarray | None = None) -> np.ndarray:
    """(ops,) bool: a longest path by runtime through the ops off the critical path (``on_critical``, by
    default `critical_path`), empty when every op is on it. Ties go to the op first in the graph's order,
    at the start and at every step."""
    on_critical = critical_path(graph) if on_critical is None else on_critical
    off = ~on_critical
    reads = graph.op_adjacency() > 0
    longest, after = np.where(off, graph.runtimes, -np.inf), np.full(graph.num_ops, -1)
    for u in graph.order[::-1]:
        children = np.flatnonzero(reads[u] & off)
        if off[u] and children.size:
            after[u] = children[np.argmax(longest[children])]
            longest[u] += longest[after[u]]
    path = np.zeros(graph.num_ops, bool)
    op = int(np.argmax(longest)) if off.any() else -1
    while op >= 0:
        path[op], op = True, after[op]
    return path


def anchored_actions(graph: CompGraph, actions: np.ndarray, affinity: float = 0.9,
                     concentration: float = 4.0) -> np.ndarray:
    """``actions`` with the affinities anchored on the graph's two longest paths: the critical path's ops'
    affinity for device 0 mean ``affinity`` and for device 1 ``1 - affinity`` (``concentration``), the
    `second_path`'s the other way round, every other op's uniform. Devices are interchangeable, so this
    only says that each path's ops share a device and that the two paths run side by side, which the search
    is nudged towards and free to leave: a transfer is synchronous and stalls both devices, so one on the
    longest path delays the makespan. The runtime policy's affinity targets (on 200
    small-graph validation cases at BRKGA-5K: the critical path alone at mean 0.7 +1.78%, both paths at
    0.9 +2.19%, uniform affinities +1.41%)."""
    actions = np.array(actions)
    high = int(np.abs(MEANS - affinity).argmin())
    near, far = (grid_actions(np.full(graph.num_ops, mean), concentration) for mean in (high, MEANS.size - 1 - high))
    first = critical_path(graph)
    second = second_path(graph, first)
    actions[:, 0] = np.where(first, near, np.where(second, far, UNIFORM))
    actions[:, 1] = np.where(first, far, np.where(second, near, UNIFORM))
    return actions


def list_schedule_fits(graph: CompGraph, schedule: ListSchedule | None = None) -> bool:
    """Whether the list schedule, decoded by the performance model (its devices, ops by start time, and
    transfers all first, all in the middle or all last), stays within the memory limit on some device
    order of transfers: three evaluations of the cost model, no search."""
    schedule = list_schedule(graph) if schedule is None else schedule
    affinity = np.where(schedule.device[:, None] == np.arange(DEVICES), 0.9, 0.1).ravel()
    order = np.empty(graph.num_ops)
    order[np.argsort(schedule.start, kind="stable")] = np.arange(graph.num_ops)
    priority = 1.0 - (order + 0.5) / graph.num_ops  # the earliest start gets the highest priority
    chromosomes = np.stack([np.concatenate([affinity, priority, np.full(graph.num_tensors * DEVICES, key)])
                            for key in (0.0, 0.5, 1.0)])
    # strict, unlike `perfmodel.objective` (LIMIT_TOLERANCE): the feature the shipped policies were trained on.
    # On 4 of the 372 graphs of every split the list schedule peaks at the limit to the last bits, where the
    # two disagree; aligning them changes those graphs' features and needs the policies retrained
    return bool((evaluate(graph, chromosomes)[1] <= graph.memory_limit).any())


def node_features(graph: CompGraph) -> np.ndarray:
    adjacency = graph.op_adjacency()
    depth, height = path_lengths(graph)
    longest = depth.max()
    output = graph.produces.astype(float) @ graph.sizes
    tightness = output / graph.memory_limit if np.isfinite(graph.memory_limit) else np.zeros(graph.num_ops)
    heuristic = list_schedule(graph)
    fits = np.full(graph.num_ops, float(list_schedule_fits(graph, heuristic)))
    wide = np.full(graph.num_ops, float(is_wide(graph, depth)))
    critical = critical_path(graph, heuristic)
    return np.stack([graph.runtimes / graph.runtimes.mean(), output / graph.sizes.mean(),
                     np.log1p(adjacency.sum(axis=0)), np.log1p(adjacency.sum(axis=1)), depth / longest,
                     height / longest, tightness, heuristic.device.astype(float),
                     heuristic.start / max(heuristic.makespan, 1e-12),
                     heuristic.upward_rank / max(heuristic.upward_rank.max(), 1e-12), fits, wide,
                     depth_level(depth) / (MEANS.size - 1), critical.astype(float),
                     second_path(graph, critical).astype(float)], axis=1)


def edge_features(graph: CompGraph) -> np.ndarray:
    """(edges, EDGE_FEATURES), one row per edge of `CompGraph.edges`."""
    edges = graph.edges()
    readers = graph.uses.sum(axis=0)
    tensor = edges[:, 2]
    return np.stack([graph.sizes[tensor] / graph.sizes.mean(), 1.0 / readers[tensor]], axis=1)


def edge_count(graph: CompGraph) -> int:
    return int(graph.uses.sum())


def batch(graphs: list[CompGraph], nodes: int, edge_slots: int | None = None) -> Batch:
    count = len(graphs)
    edge_slots = max([1] + [edge_count(graph) for graph in graphs]) if edge_slots is None else edge_slots
    result = Batch(np.zeros((count, nodes, NODE_FEATURES), np.float32),
                   np.zeros((count, edge_slots, EDGE_FEATURES), np.float32), np.zeros((count, edge_slots), np.int64),
                   np.zeros((count, edge_slots), np.int64), np.zeros((count, edge_slots), np.float32),
                   np.zeros((count, nodes), np.float32))
    for b, graph in enumerate(graphs):
        ops, edges = graph.num_ops, graph.edges()
        if ops > nodes or len(edges) > edge_slots:
            raise ValueError(f"graph {graph.name!r} has {ops} ops and {len(edges)} edges; the batch is padded to "
                             f"{nodes} and {edge_slots}")
        result.nodes[b, :ops] = node_features(graph)
        result.edges[b, :len(edges)] = edge_features(graph)
        result.source[b, :len(edges)] = edges[:, 0]
        result.target[b, :len(edges)] = edges[:, 1]
        result.edge_mask[b, :len(edges)] = 1.0
        result.mask[b, :ops] = 1.0
    return result


def beta_parameters(actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(alpha, beta)`` of integer actions in [0, CHOICES): action = mean index * 3 + concentration index,
    or UNIFORM."""
    actions = np.asarray(actions)
    grid = np.minimum(actions, UNIFORM - 1)
    mean = MEANS[grid // CONCENTRATIONS.size]
    concentration = CONCENTRATIONS[grid % CONCENTRATIONS.size]
    uniform = actions == UNIFORM
    return np.where(uniform, 1.0, mean * concentration), np.where(uniform, 1.0, (1.0 - mean) * concentration)


def proposal(graph: CompGraph, actions: np.ndarray, uniform_share: float = 0.0) -> Proposal:
    """BRKGA's mutant distribution from ``actions`` (ops, HEADS): affinities and op priorities per op, and
    each tensor's d transfer keys from its producer's transfer head; ``uniform_share`` of the sampled
    chromosomes drawn uniform instead (`Proposal`)."""
    ops = graph.num_ops
    alpha, beta = np.ones(chromosome_length(graph)), np.ones(chromosome_length(graph))
    node_alpha, node_beta = beta_parameters(np.asarray(actions)[:ops])
    priorities = ops * (DEVICES + 1)
    for genes, node in ((alpha, node_alpha), (beta, node_beta)):
        genes[:ops * DEVICES] = node[:, :DEVICES].ravel()
        genes[ops * DEVICES:priorities] = node[:, PRIORITY]
        genes[priorities:] = np.repeat(node[graph.producer, TRANSFER], DEVICES)  # (tensors, d), row-major
    return Proposal(alpha, beta, uniform_share)


def solution_actions(graph: CompGraph, keys: np.ndarray, concentration: float = 10.0,
                     affinity: float = 0.9, canonical: bool = False, placement: bool = True) -> np.ndarray:
    """(ops, HEADS) actions centred on one chromosome ``keys`` (a BRKGA solution): the distillation target
    of `train.imitate` and the diagnostic's quantized oracle.

    - Placement: the op's device (argmax of its affinities) gets mean ``affinity`` (one of the `MEANS`),
      the other devices ``1 - affinity``. Only the argmax of the affinities is decoded, so the raw keys
      carry nothing else; rounding them to the nearest mean could tie two devices.
    - Devices are renamed (a permutation of d = 2 labels, which leaves the decoded solution's cost
      unchanged) to agree with the list schedule's devices (a node feature) on most ops: of two
      equally good mirror images, the one a policy can tell apart from its features.
    - Op priority: the key rounded to the nearest of the `MEANS`.
    - Transfer: the mean, over the op's output tensors, of the key the solution has for copying the tensor
      to the device its producer is not on (the only transfer key of that tensor it can read), rounded to
      the nearest mean; mean 0.5 for an op without outputs.
    Every head gets ``concentration``. With ``canonical``, the priorities are first respaced by the decoded
    order (`canonical_keys`); without ``placement``, the affinity heads are uniform Beta(1, 1) (the
    placement is left to the search)."""
    ops, tensors = graph.num_ops, graph.num_tensors
    keys = np.asarray(keys, np.float64)
    if canonical:
        keys = canonical_keys(graph, keys)
    affinity_keys, priority, transfer = split(graph, keys[None])
    place = affinity_keys[0].argmax(axis=1)
    other = (place[graph.producer] + 1) % DEVICES  # (tensors,): the device each tensor is copied to (d = 2)
    read = transfer[0, np.arange(tensors), other]
    if DEVICES == 2 and np.mean(place == list_schedule(graph).device) < 0.5:
        place = 1 - place
    means = np.full((ops, HEADS), 1.0 - affinity)
    means[np.arange(ops), place] = affinity
    means[:, PRIORITY] = priority[0]
    outputs = graph.produces.sum(axis=1)
    means[:, TRANSFER] = np.where(outputs > 0, graph.produces @ read / np.maximum(outputs, 1), 0.5)
    actions = grid_actions(np.abs(means[..., None] - MEANS).argmin(axis=-1), concentration)
    if not placement:
        actions[:, :DEVICES] = UNIFORM
    return actions


def canonical_keys(graph: CompGraph, keys: np.ndarray) -> np.ndarray:
    """The chromosome ``keys`` with its priorities replaced by ``1 - (position + 0.5) / scheduled``, the
    node's position in the decoded order (`perfmodel.schedule_positions`): the same schedule, keys spread
    evenly by when each node runs rather than by the search's arbitrary values (of which only the
    comparisons between nodes ready together matter). Transfers the placement does not need keep their key."""
    keys = np.array(keys, np.float64)
    position = schedule_positions(graph, keys)[0]
    canonical = 1.0 - (position + 0.5) / max(int((position >= 0).sum()), 1)
    first = graph.num_ops * DEVICES
    priorities = keys[first:]  # op priorities, then transfers in the decoder's node order (device-major)
    ops, tensors = graph.num_ops, graph.num_tensors
    node_keys = np.concatenate([priorities[:ops], priorities[ops:].reshape(tensors, DEVICES).T.ravel()])
    node_keys = np.where(position >= 0, canonical, node_keys)
    keys[first:first + ops] = node_keys[:ops]
    keys[first + ops:] = node_keys[ops:].reshape(DEVICES, tensors).T.ravel()
    return keys


def grid_actions(mean_index: np.ndarray, concentration: float) -> np.ndarray:
    """The actions of Betas with means ``MEANS[mean_index]`` and one of the ``CONCENTRATIONS``."""
    column = int(np.flatnonzero(CONCENTRATIONS == concentration)[0])
    return np.asarray(mean_index) * CONCENTRATIONS.size + column


def depth_level(score: np.ndarray) -> np.ndarray:
    """Each entry's rank among the distinct values of ``score`` (ties share a rank), in ``MEANS.size`` equal
    bins from 0 (the smallest values) to ``MEANS.size - 1`` (the largest)."""
    rank = np.unique(score, return_inverse=True)[1].ravel()
    return np.minimum((rank / max(rank.max(), 1) * MEANS.size).astype(int), MEANS.size - 1)


def rank_actions(graph: CompGraph, score: np.ndarray, concentration: float = 4.0) -> np.ndarray:
    """Uniform affinities; the priority's mean is the op's rank by ``score`` (ties share a rank), in
    5 equal bins from the lowest mean to the highest."""
    level = depth_level(score)
    actions = np.full((graph.num_ops, HEADS), UNIFORM)
    actions[:, PRIORITY] = grid_actions(level, concentration)
    return actions


def list_schedule_actions(graph: CompGraph, concentration: float = 4.0) -> np.ndarray:
    """Betas centred on the list schedule: affinity mean 0.9 for its device and 0.1 for the other, priority
    rising with how early the op starts there (5 equal bins of the start rank)."""
    heuristic = list_schedule(graph)
    actions = rank_actions(graph, -heuristic.start, concentration)
    for device in range(DEVICES):
        actions[:, device] = grid_actions(np.where(heuristic.device == device, MEANS.size - 1, 0), concentration)
    return actions


WIDE_LEVEL = 4  # ops at one depth that make a graph "wide" (chosen on the training graphs)


def is_wide(graph: CompGraph, depth: np.ndarray | None = None) -> bool:
    """Whether some depth level (ops with equal longest path from a source) holds ``WIDE_LEVEL`` ops or more."""
    depth = path_lengths(graph)[0] if depth is None else depth
    return bool(np.bincount(depth.astype(np.int64)).max() >= WIDE_LEVEL)


# the depth order's concentration: 10 at the paper's budgets (on 200 validation cases at BRKGA-5K, where wide,
# +0.72% against concentration 30's +0.40% and 4's -0.09%, worst case -5.51% against -12.85%; at BRKGA-500
# 30 gains +1.00% against 10's +0.60%; two small-graph test splits measured 10 against 30 at +0.05 and -0.17
# points: no difference there)
DEPTH_CONCENTRATION = 10.0


def depth_order_actions(graph: CompGraph, concentration: float = DEPTH_CONCENTRATION) -> np.ndarray:
    """Uniform affinities; op priorities rising with depth (5 equal bins of the depth rank, the shallowest op
    the lowest mean, concentration `DEPTH_CONCENTRATION`): of the ready ops the deepest runs first, so a
    branch under way is carried on before new ones start and their outputs are freed sooner (a depth-first
    order); the placement and the transfers are left to the search."""
    return rank_actions(graph, path_lengths(graph)[0], concentration)


def level_order_actions(graph: CompGraph, concentration: float = 4.0) -> np.ndarray:
    """Uniform affinities; op priorities falling with depth (5 equal bins of the depth rank, the shallowest
    ops the highest mean): of the ready ops the shallowest runs first, a breadth-first (level) order that
    keeps both devices fed; the placement and the transfers are left to the search. The warm start of the
    REINFORCE-trained runtime policy at 100-300 ops (`paper.RECIPES`)."""
    return rank_actions(graph, -path_lengths(graph)[0], concentration)


def imitation_target(graph: CompGraph, kind: str) -> np.ndarray:
    """(ops, HEADS) actions of the heuristic proposal the policy is pretrained to imitate (behaviour cloning
    before REINFORCE). Where the heuristic does not apply the target is uniform Beta(1, 1), standard BRKGA.

    Runtime: the list schedule where it fits the memory limit: on the validation graphs this matches or
    beats BRKGA-500 on 96.7% of (graph, seed) cases, +1.52% on average, where the list schedule everywhere
    reaches 63.3%, -4.04%.

    Peak memory: the depth order (`depth_order_actions`) on wide graphs (`is_wide`). Everywhere it measured
    80.2% / +0.80% on the training graphs (2 seeds) and 80.0% / +1.00% on the validation graphs (3 seeds);
    it loses most on chain-like graphs (levels of 1-3 ops), where it fixes nearly the whole order; on wide
    graphs only (the threshold 4 chosen on the training graphs): training 89.1% / +0.83%, validation 85.0% /
    +0.83% (these at BRKGA-500 and concentration 30; the concentration is 10 at the paper's
    budgets)."""
    uniform = np.full((graph.num_ops, HEADS), UNIFORM)
    if kind == "runtime":
        return list_schedule_actions(graph) if list_schedule_fits(graph) else uniform
    if kind == "peak_memory":
        return depth_order_actions(graph) if is_wide(graph) else uniform
    raise ValueError(f"unknown objective {kind!r}")
