"""A simulated three-level inference chip (after Intel NNP-I, EGRL paper §3), its "compiler" and the
compiler's own mapping heuristic (the baseline every speedup is measured against).

Constants (`spec`: the chip is a JSON file a user can edit, ``chips/nnpi.json`` by default; the paper gives
capacities and the ratios ~1 : 10 : 100 only; the absolute figures are the chip's published ones, Wechsler et
al., "Spring Hill (NNP-I 1000)", Hot Chips 31, 2019, as tabulated by WikiChip's Spring Hill page;
`docs/algorithms/egrl.md` says why they matter):
- capacities: DRAM 32 GiB, LLC 24 MiB, SRAM 4 MiB (the paper's; the chip has 4 MiB of deep SRAM per compute
  engine);
- bandwidths: DRAM 67.2 GB/s (four 32-bit channels of LPDDR4x-4200), LLC 672 GB/s and SRAM 6.72 TB/s (the
  paper's 1 : 10 : 100 from DRAM; the published ~680 GB/s and ~6.8 TB/s);
- compute: 50 Tera int8 ops/s (the NNP-I 1100's rated peak; 2 ops per multiply-accumulate), every layer at
  that peak; tensors are int8 (1 byte per element) and the batch is 1 (the paper's single-batch inference).

Latency model (a roofline per layer, the spec's ``overlap: max``): a layer's time is ``max(ops / compute, sum
over the tensors it touches of bytes / bandwidth of the level the tensor lives in)`` (``overlap: sum``: the two
added); it reads its weights (an embedding only the rows of its
tokens), reads each producer's activation from where the producer's mapping put it (the network input comes
from DRAM), and writes its own activation. The inference latency is the sum over layers (they run one after
another) times ``1 + noise * N(0, 1)``, a measurement noise of 1 % by default.

Capacity over lifetimes: weights stay resident for the whole inference; a layer's activation lives from the
step that produces it to the step of its last consumer (layers run in topological order). A mapping is valid
when, at every step, the bytes live in LLC and in SRAM fit their capacities.

Workloads count elements; the chip multiplies them by its dtype's bytes (1 for the default int8).

The compiler repairs an invalid mapping by demotion: while a level overflows at some step, the largest tensor
mapped there and live at the first overflowing step moves one level down (SRAM -> LLC -> DRAM); SRAM is
repaired before LLC, so what SRAM sheds can still be demoted again. ``epsilon`` (the paper's ε_M) is the
fraction of all mapped bytes that the repair moved.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from algorithms.egrl.spec import LEVELS, NNPI, ChipSpec  # noqa: F401  (LEVELS: re-exported for plot)

DRAM, LLC, SRAM = 0, 1, 2
CAPACITY = np.array(NNPI.capacity, dtype=np.float64)    # the default chip's, for reference
BANDWIDTH = np.array(NNPI.bandwidth, dtype=np.float64)
COMPUTE = NNPI.compute
BASELINES = ("liveness", "static", "layerwise")  # `compiler_mapping`; the first is the reward's unit


@dataclass(frozen=True)
class Workload:
    """What the chip needs of a network: per layer (in topological order) its ops and tensor bytes, and the
    producer -> consumer edges."""

    name: str
    ops: np.ndarray           # (N,) int8 ops of each layer
    weight_bytes: np.ndarray  # (N,)
    act_bytes: np.ndarray     # (N,) bytes of each layer's output activation
    input_bytes: float        # the network input, read from DRAM by the layers without a producer
    edges: np.ndarray         # (E, 2) int: (producer, consumer), producer < consumer
    weight_reads: np.ndarray | None = None  # (N,) weight bytes a layer reads per inference; None: all of them

    @property
    def size(self) -> int:
        return int(self.ops.shape[0])

    @property
    def weight_read_bytes(self) -> np.ndarray:
        """What a layer reads of its weights per inference: all of them, except an embedding table, which
        gives one row per token (`workloads`); the whole table still occupies its level."""
        return self.weight_bytes if self.weight_reads is None else self.weight_reads


@dataclass(frozen=True)
class Repair:
    weights: np.ndarray  # (N,) level per layer's weights after repair
    acts: np.ndarray     # (N,) level per layer's activation after repair
    epsilon: float       # fraction of mapped bytes the compiler moved

    @property
    def valid(self) -> bool:
        return self.epsilon == 0.0


@dataclass(frozen=True)
class Assessment:
    repair: Repair
    latency: float | None  # noise-free seconds when the repair left the mapping unchanged, else None


class Chip:
    """The simulator for one workload: everything that does not depend on the mapping is computed once."""

    def __init__(self, workload: Workload, noise: float = 0.01, seed: int = 0, bandwidth: np.ndarray | None = None,
                 spec: ChipSpec = NNPI) -> None:
        """``spec``: the chip's constants (`spec.load_spec`); ``bandwidth``: bytes per second of DRAM, LLC and
        SRAM in place of the spec's (for studying the constants; see `ceiling`)."""
        if bandwidth is not None:
            spec = spec.with_bandwidth(bandwidth)
        self.spec, self.noise = spec, noise
        self.workload = workload = _in_bytes(workload, spec.bytes_per_element)
        self.bandwidth = np.asarray(spec.bandwidth, dtype=np.float64)
        self.capacity = np.asarray(spec.capacity, dtype=np.float64)
        self.rng = np.random.default_rng(seed)
        n = workload.size
        producers, consumers = workload.edges[:, 0], workload.edges[:, 1]
        last_use = np.arange(n)
        np.maximum.at(last_use, producers, consumers)
        steps = np.arange(n)
        # live[k, s]: tensor k occupies memory at step s; weights (rows n..2n-1) are always live
        self.live = np.concatenate([(steps[:, None] <= steps[None, :]) & (steps[None, :] <= last_use[:, None]),
                                    np.ones((n, n), dtype=bool)])
        self.bytes = np.concatenate([workload.act_bytes, workload.weight_bytes]).astype(np.float64)
        self.compute_seconds = workload.ops / spec.compute
        self.has_producer = np.zeros(n, dtype=bool)
        self.has_producer[consumers] = True
        self.evaluations = 0

    # ---- validity and repair ------------------------------------------------------------------------------
    def usage(self, weights: np.ndarray, acts: np.ndarray) -> np.ndarray:
        """(3, N) bytes live in each level at each step."""
        levels = np.concatenate([acts, weights])
        placed = (levels[None, :] == np.arange(3)[:, None]) * self.bytes[None, :]
        return placed @ self.live

    def repair(self, weights: np.ndarray, acts: np.ndarray) -> Repair:
        levels = np.concatenate([np.asarray(acts), np.asarray(weights)]).astype(np.int64)
        original = levels.copy()
        usage = self.usage(levels[self.workload.size:], levels[:self.workload.size])
        for level in (SRAM, LLC):
            over = np.flatnonzero(usage[level] > self.capacity[level])
            while over.size:
                step = over[0]
                candidates = np.flatnonzero((levels == level) & self.live[:, step])
                victim = candidates[np.argmax(self.bytes[candidates])]
                levels[victim] = level - 1
                contribution = self.live[victim] * self.bytes[victim]
                usage[level] -= contribution
                usage[level - 1] += contribution
                over = np.flatnonzero(usage[level] > self.capacity[level])
        moved = self.bytes[levels != original].sum()
        n = self.workload.size
        return Repair(levels[n:], levels[:n], float(moved / self.bytes.sum()))

    # ---- latency ---------------------------------------------------------------------------------------------
    def latency(self, weights: np.ndarray, acts: np.ndarray, noisy: bool = True) -> float:
        """Seconds for one inference with a valid mapping (see the module docstring)."""
        w = self.workload
        seconds_per_byte = 1.0 / self.bandwidth
        memory = w.weight_read_bytes * seconds_per_byte[weights] + w.act_bytes * seconds_per_byte[acts]
        producers, consumers = w.edges[:, 0], w.edges[:, 1]
        np.add.at(memory, consumers, w.act_bytes[producers] * seconds_per_byte[acts[producers]])
        memory = memory + (~self.has_producer) * w.input_bytes * seconds_per_byte[DRAM]
        if self.spec.overlap == "max":
            total = float(np.maximum(self.compute_seconds, memory).sum())
        else:
            total = float((self.compute_seconds + memory).sum())
        return self._measured(total) if noisy else total

    def _measured(self, total: float) -> float:
        if self.noise:
            total *= 1.0 + self.noise * self.rng.standard_normal()
        return total

    def assess(self, weights: np.ndarray, acts: np.ndarray) -> Assessment:
        """The compiler's repair and, for a valid mapping, its noise-free latency: no random draw and no count,
        so a copy of the chip in another process gives the same answer (`workers`)."""
        repair = self.repair(weights, acts)
        return Assessment(repair, self.latency(repair.weights, repair.acts, noisy=False) if repair.valid else None)

    def measure(self, assessment: Assessment) -> tuple[Repair, float | None]:
        """One simulator evaluation of an assessed mapping: the measured (noisy) latency when it was valid (the
        paper runs no inference for an invalid one). The noise is drawn here, in the order of the calls."""
        self.evaluations += 1
        latency = assessment.latency
        return assessment.repair, (None if latency is None else self._measured(latency))

    def evaluate(self, weights: np.ndarray, acts: np.ndarray) -> tuple[Repair, float | None]:
        """One simulator evaluation: the compiler's repair, and the measured latency when the mapping was valid."""
        return self.measure(self.assess(weights, acts))


def _in_bytes(workload: Workload, bytes_per_element: int) -> Workload:
    if bytes_per_element == 1:
        return workload
    scale = float(bytes_per_element)
    return replace(workload, weight_bytes=workload.weight_bytes * scale, act_bytes=workload.act_bytes * scale,
                   input_bytes=workload.input_bytes * scale,
                   weight_reads=None if workload.weight_reads is None else workload.weight_reads * scale)


def compiler_mapping(chip: Chip, baseline: str = "liveness") -> tuple[np.ndarray, np.ndarray]:
    """A compiler's own map, one of the declared family (`BASELINES`). Each places tensors one at a time, first
    come first served, into the fastest level where the tensor fits given what was placed before; SRAM is
    reserved for activations (weights go to LLC or DRAM). They differ in what a placed tensor holds and in the
    order:

    - ``liveness``: first every activation, then every weight, in topological order; a tensor holds its level
      only over its lifetime (an activation from its producer to its last consumer), so later activations reuse
      the space of dead ones;
    - ``static``: the same order, but every tensor holds its level for the whole inference (no reuse);
    - ``layerwise``: layer after layer in topological order, its weights then its activation, each held for the
      whole inference (the compiler fills fast memory with whatever comes first in the network).
    """
    if baseline not in BASELINES:
        raise ValueError(f"unknown baseline {baseline!r}; choose one of {', '.join(BASELINES)}")
    n = chip.workload.size
    usage = np.zeros((3, n))
    levels = np.zeros(2 * n, dtype=np.int64)
    if baseline == "layerwise":
        order = np.stack([np.arange(n) + n, np.arange(n)], axis=1).ravel()
    else:
        order = np.arange(2 * n)
    for tensor in order:
        live = chip.live[tensor] if baseline == "liveness" else np.ones(n, dtype=bool)
        need = live * chip.bytes[tensor]
        for level in ((SRAM, LLC, DRAM) if tensor < n else (LLC, DRAM)):
            if np.all(usage[level] + need <= chip.capacity[level]):
                levels[tensor] = level
                usage[level] += need
                break
    return levels[n:], levels[:n]
