"""How much any mapping can gain over the compiler on the simulated chip: a lower bound on latency from the
linear-programming relaxation of the placement (``python -m algorithms.egrl.ceiling [workloads]``).

Each tensor (activation or weights of a layer) takes fractions ``x[t, level]`` summing to 1; a layer's time
``s_l`` is at least its compute time and at least the bytes it touches over the bandwidths of the levels they
sit in (linear in ``x``); at every step the bytes live in LLC and in SRAM fit their capacities. Every valid
integer mapping is a feasible point with the same objective ``sum_l s_l`` as `Chip.latency`, so the LP optimum
bounds every mapping's noise-free latency from below, and ``compiler latency / bound`` bounds every method's
speedup from above. It told us why nothing beat the compiler on ResNet-101 (see the module's README).
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from algorithms.egrl.chip import BANDWIDTH, CAPACITY, DRAM, LLC, SRAM, Chip, compiler_mapping


def latency_bound(chip: Chip) -> float:
    """Seconds: no mapping of ``chip``'s workload that the compiler leaves as it is runs faster (noise-free)."""
    w, n = chip.workload, chip.workload.size
    tensors = 2 * n  # 0..n-1 activations, n..2n-1 weights, as in `Chip.live`
    x_count = tensors * 3
    seconds_per_byte = 1.0 / chip.bandwidth
    # layer l touches its weights, its activation and each producer's activation
    touched = [np.arange(n) + n, np.arange(n), w.edges[:, 0]]
    layer_of = [np.arange(n), np.arange(n), w.edges[:, 1]]
    read = [w.weight_read_bytes, w.act_bytes, w.act_bytes[w.edges[:, 0]]]  # bytes the layer moves of each
    rows, cols, values = [], [], []
    for tensor, layer, moved in zip(touched, layer_of, read):
        for level in range(3):
            rows.append(layer)
            cols.append(tensor * 3 + level)
            values.append(moved * seconds_per_byte[level])
    rows.append(np.arange(n))
    cols.append(x_count + np.arange(n))
    values.append(-np.ones(n))
    bound_rhs = [-(~chip.has_producer).astype(np.float64) * w.input_bytes * seconds_per_byte[DRAM]]
    for k, level in enumerate((LLC, SRAM)):  # capacity rows: n per level
        tensor, step = np.nonzero(chip.live)
        rows.append(n + k * n + step)
        cols.append(tensor * 3 + level)
        values.append(chip.bytes[tensor])
        bound_rhs.append(np.full(n, CAPACITY[level]))
    a_ub = coo_matrix((np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(3 * n, x_count + n)).tocsr()
    a_eq = coo_matrix((np.ones(x_count), (np.repeat(np.arange(tensors), 3), np.arange(x_count))),
                      shape=(tensors, x_count + n)).tocsr()
    cost = np.concatenate([np.zeros(x_count), np.ones(n)])
    bounds = [(0, 1)] * x_count + [(c, None) for c in chip.compute_seconds]
    result = linprog(cost, A_ub=a_ub, b_ub=np.concatenate(bound_rhs), A_eq=a_eq, b_eq=np.ones(tensors),
                     bounds=bounds, method="highs")
    if not result.success:
        raise RuntimeError(f"the placement LP failed: {result.message}")
    return float(result.fun)


def speedup_ceiling(chip: Chip) -> tuple[float, float, float]:
    """(compiler latency, latency bound, the largest speedup over the compiler any mapping can reach)."""
    baseline = chip.latency(*compiler_mapping(chip), noisy=False)
    bound = latency_bound(chip)
    return baseline, bound, baseline / bound


def main(argv: list[str] | None = None) -> None:
    from algorithms.egrl.workloads import load

    parser = argparse.ArgumentParser(prog="python -m algorithms.egrl.ceiling", description=__doc__.split("\n\n")[0])
    parser.add_argument("workloads", nargs="*", default=["resnet50", "resnet101", "bert"])
    parser.add_argument("--dram-bandwidth", type=float, nargs="+", default=[float(BANDWIDTH[DRAM])],
                        help="bytes/s of DRAM (several: a sweep); LLC and SRAM keep the ratios 10 and 100")
    parser.add_argument("--plot", help="a PNG of the ceiling against the DRAM bandwidth")
    args = parser.parse_args(argv)
    ceilings: dict[str, list[float]] = {}
    for name in args.workloads:
        workload = load(name).workload
        for dram in args.dram_bandwidth:
            bandwidth = dram * np.array([1.0, 10.0, 100.0])
            baseline, bound, ceiling = speedup_ceiling(Chip(workload, noise=0.0, bandwidth=bandwidth))
            ceilings.setdefault(name, []).append(ceiling)
            print(f"{name:10s} DRAM {dram / 1e9:5.0f} GB/s: compiler {baseline * 1e6:8.1f} us, "
                  f"bound {bound * 1e6:8.1f} us, speedup ceiling {ceiling:.2f}", flush=True)
    if args.plot:
        from algorithms.egrl.plot import plot_ceilings

        plot_ceilings(np.array(args.dram_bandwidth), ceilings, float(BANDWIDTH[DRAM]), args.plot)


if __name__ == "__main__":
    main()
