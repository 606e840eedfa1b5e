"""How much any mapping can gain over a compiler on the simulated chip: the exact optimum, a mixed-integer
program solved by HiGHS (scipy's `milp`), and the cheaper bound of its linear relaxation
(``python -m algorithms.egrl ceiling [--exact] [--chip FILE] [workloads]``).

Variables: ``x[t, level]`` (tensor t, an activation or the weights of a layer, lives in that level; binary in the
exact program, in [0, 1] in the relaxation, summing to 1 per tensor) and ``s_l`` (layer l's time). A layer's time
is at least its compute time and at least the bytes it touches over the bandwidths of the levels they sit in
(with the spec's ``overlap: sum``, at least their sum); at every step the bytes live in LLC and in SRAM fit
their capacities; the objective is ``sum_l s_l``, `Chip.latency` without noise. So the program's optimum is the
fastest valid map, and the relaxation's a lower bound on it.

Units: the program is built in microseconds and MiB, not seconds and bytes. In seconds a layer's time is
~1e-6 and HiGHS's feasibility tolerance (1e-7) lets a solution undercut the compute time; in microseconds the
tolerance is 1e-7 us of a latency of hundreds. The exact optimum returns the map itself, whose latency the chip
recomputes.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linprog, milp
from scipy.sparse import coo_matrix, vstack

from algorithms.egrl.chip import BASELINES, DRAM, LLC, SRAM, Chip, compiler_mapping
from algorithms.egrl.plot import plot_ceilings
from algorithms.egrl.spec import DEFAULT_PATH, load_spec
from algorithms.egrl.workloads import WORKLOADS, load

MICROSECONDS, MIB = 1e6, 2.0**20


@dataclass(frozen=True)
class _Program:
    cost: np.ndarray
    a_ub: object
    b_ub: np.ndarray
    a_eq: object
    lower: np.ndarray
    x_count: int


def _program(chip: Chip) -> _Program:
    w, n = chip.workload, chip.workload.size
    tensors = 2 * n  # 0..n-1 activations, n..2n-1 weights, as in `Chip.live`
    x_count = tensors * 3
    micros_per_byte = MICROSECONDS / chip.bandwidth
    compute = chip.compute_seconds * MICROSECONDS
    # layer l touches its weights, its activation and each producer's activation
    touched = [np.arange(n) + n, np.arange(n), w.edges[:, 0]]
    layer_of = [np.arange(n), np.arange(n), w.edges[:, 1]]
    read = [w.weight_read_bytes, w.act_bytes, w.act_bytes[w.edges[:, 0]]]  # bytes the layer moves of each
    rows, cols, values = [], [], []
    for tensor, layer, moved in zip(touched, layer_of, read):
        for level in range(3):
            rows.append(layer)
            cols.append(tensor * 3 + level)
            values.append(moved * micros_per_byte[level])
    rows.append(np.arange(n))
    cols.append(x_count + np.arange(n))
    values.append(-np.ones(n))
    memory_rhs = -(~chip.has_producer).astype(np.float64) * w.input_bytes * micros_per_byte[DRAM]
    if chip.spec.overlap == "sum":
        memory_rhs = memory_rhs - compute
    rhs = [memory_rhs]
    tensor, step = np.nonzero(chip.live)
    for k, level in enumerate((LLC, SRAM)):  # capacity rows: n per level, in MiB
        rows.append(n + k * n + step)
        cols.append(tensor * 3 + level)
        values.append(chip.bytes[tensor] / MIB)
        rhs.append(np.full(n, chip.capacity[level] / MIB))
    a_ub = coo_matrix((np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(3 * n, x_count + n)).tocsr()
    a_eq = coo_matrix((np.ones(x_count), (np.repeat(np.arange(tensors), 3), np.arange(x_count))),
                      shape=(tensors, x_count + n)).tocsr()
    cost = np.concatenate([np.zeros(x_count), np.ones(n)])
    lower = np.concatenate([np.zeros(x_count), compute if chip.spec.overlap == "max" else np.zeros(n)])
    return _Program(cost, a_ub, np.concatenate(rhs), a_eq, lower, x_count)


def latency_bound(chip: Chip) -> float:
    """Seconds: the linear relaxation's optimum, below every valid mapping's noise-free latency."""
    p = _program(chip)
    bounds = np.stack([p.lower, np.concatenate([np.ones(p.x_count), np.full(len(p.lower) - p.x_count, np.inf)])], 1)
    result = linprog(p.cost, A_ub=p.a_ub, b_ub=p.b_ub, A_eq=p.a_eq, b_eq=np.ones(p.a_eq.shape[0]),
                     bounds=bounds, method="highs")
    if not result.success:
        raise RuntimeError(f"the placement LP failed: {result.message}")
    return float(result.fun) / MICROSECONDS


@dataclass(frozen=True)
class Optimum:
    latency: float        # seconds, noise-free, of `mapping` as the chip computes it
    mapping: np.ndarray   # (N, 2): column 0 the weights' level, column 1 the activation's
    gap: float            # the solver's relative optimality gap (0 when proven optimal)
    lower: float          # seconds: no valid map is faster (the solver's dual bound)


def exact_optimum(chip: Chip, time_limit: float = 600.0, gap: float = 1e-4) -> Optimum:
    """The fastest valid map of ``chip``'s workload, by HiGHS's branch and cut: proven optimal within the relative
    ``gap`` (`Optimum.gap` says how close it got when ``time_limit`` seconds ran out first)."""
    p = _program(chip)
    n = chip.workload.size
    upper = np.concatenate([np.ones(p.x_count), np.full(n, np.inf)])
    integrality = np.concatenate([np.ones(p.x_count), np.zeros(n)])
    constraints = LinearConstraint(vstack([p.a_ub, p.a_eq]).tocsr(),
                                   np.concatenate([np.full(p.a_ub.shape[0], -np.inf), np.ones(p.a_eq.shape[0])]),
                                   np.concatenate([p.b_ub, np.ones(p.a_eq.shape[0])]))
    result = milp(p.cost, constraints=constraints, integrality=integrality, bounds=Bounds(p.lower, upper),
                  options={"time_limit": time_limit, "mip_rel_gap": gap})
    if result.x is None:
        raise RuntimeError(f"the placement MILP found no map: {result.message}")
    levels = np.argmax(result.x[:p.x_count].reshape(2 * n, 3), axis=1)
    weights, acts = levels[n:], levels[:n]
    if not chip.repair(weights, acts).valid:
        raise RuntimeError("the placement MILP returned a map the chip repairs (a tolerance problem)")
    solver_gap = float(getattr(result, "mip_gap", 0.0) or 0.0)
    lower = float(getattr(result, "mip_dual_bound", result.fun)) / MICROSECONDS
    latency = chip.latency(weights, acts, noisy=False)
    return Optimum(latency, np.stack([weights, acts], axis=1), solver_gap, min(lower, latency))


def speedup_ceiling(chip: Chip, baseline: str = "liveness") -> tuple[float, float, float]:
    """(the compiler's latency, the LP bound, the largest speedup over that compiler the bound allows)."""
    compiler = chip.latency(*compiler_mapping(chip, baseline), noisy=False)
    bound = latency_bound(chip)
    return compiler, bound, compiler / bound


def gain_fraction(baseline: float, method: float, optimum: float) -> float:
    """The fraction of the optimum's gain a method's latency reaches: ``(baseline - method) / (baseline -
    optimum)``; 1 at the optimum, 0 at the baseline, negative below it (nan when the baseline is optimal)."""
    return (baseline - method) / (baseline - optimum) if baseline > optimum else float("nan")


def ceilings(chip: Chip, exact: bool, time_limit: float = 600.0) -> dict:
    """Every declared baseline's latency, the LP bound and (``exact``) the optimum, in seconds, with the
    speedup each bound allows over each baseline."""
    bound = latency_bound(chip)
    row = {"bound": bound, "baselines": {}}
    optimum = exact_optimum(chip, time_limit) if exact else None
    if optimum is not None:
        row["optimum"], row["optimum_gap"], row["optimum_lower"] = optimum.latency, optimum.gap, optimum.lower
        row["optimum_mapping"] = optimum.mapping.tolist()
    for name in BASELINES:
        latency = chip.latency(*compiler_mapping(chip, name), noisy=False)
        row["baselines"][name] = {"latency": latency, "lp_ceiling": latency / bound,
                                  **({"exact_ceiling": latency / optimum.latency} if optimum else {})}
    return row


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m algorithms.egrl ceiling", description=__doc__.split("\n\n")[0])
    parser.add_argument("workloads", nargs="*", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--exact", action="store_true", help="solve the mixed-integer program too (the optimum)")
    parser.add_argument("--chip", default=DEFAULT_PATH, help="the chip's JSON file (default: the NNP-I's)")
    parser.add_argument("--time-limit", type=float, default=600.0, help="seconds for HiGHS per workload")
    parser.add_argument("--dram-bandwidth", type=float, nargs="+",
                        help="bytes/s of DRAM (several: a sweep of the LP ceiling over the liveness compiler); LLC "
                             "and SRAM keep their ratios to DRAM")
    parser.add_argument("--plot", help="with --dram-bandwidth: a PNG of the ceiling against the DRAM bandwidth")
    parser.add_argument("--json", help="write the numbers to this file")
    args = parser.parse_args(argv)
    spec = load_spec(args.chip)
    results: dict = {}
    if args.dram_bandwidth:
        sweep: dict[str, list[float]] = {}
        ratios = np.asarray(spec.bandwidth) / spec.bandwidth[DRAM]
        for name in args.workloads:
            for dram in args.dram_bandwidth:
                chip = Chip(load(name).workload, noise=0.0, spec=spec.with_bandwidth(dram * ratios))
                compiler, bound, ceiling = speedup_ceiling(chip)
                sweep.setdefault(name, []).append(ceiling)
                print(f"{name:10s} DRAM {dram / 1e9:5.0f} GB/s: compiler {compiler * 1e6:8.1f} us, "
                      f"bound {bound * 1e6:8.1f} us, LP ceiling {ceiling:.2f}", flush=True)
        if args.plot:
            plot_ceilings(np.array(args.dram_bandwidth), sweep, float(spec.bandwidth[DRAM]), args.plot)
        return sweep
    print(f"chip {spec.name}: latencies in us; ceiling = baseline / optimum (exact) or / LP bound")
    for name in args.workloads:
        row = ceilings(Chip(load(name).workload, noise=0.0, spec=spec), args.exact, args.time_limit)
        results[name] = row
        optimum = (f", optimum {row['optimum'] * 1e6:.1f} (gap {row['optimum_gap']:.1e})" if args.exact else "")
        print(f"{name}: LP bound {row['bound'] * 1e6:.1f}{optimum}", flush=True)
        for baseline, cell in row["baselines"].items():
            exact = f", exact ceiling {cell['exact_ceiling']:.3f}" if args.exact else ""
            print(f"  {baseline:10s} {cell['latency'] * 1e6:9.1f}  LP ceiling {cell['lp_ceiling']:.3f}{exact}",
                  flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"chip": spec.to_json(), "workloads": results}, handle, indent=1)
    return results


if __name__ == "__main__":
    main()
