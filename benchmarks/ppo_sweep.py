"""The TimeRL paper's Fig. 9 at CPU scale: PPO's seconds per iteration and peak memory as one parameter
moves away from a default (64 environments, 100 steps, a 2 x 64 MLP, CartPole's 4 observations, one epoch
of one minibatch), for timerl on torch, timerl on jax and eager PyTorch (`benchmarks/eager_ppo.py`), all
measured in one run.

    python benchmarks/ppo_sweep.py --out docs/ppo_sweep          # or: timerl bench ppo
    python benchmarks/ppo_sweep.py --quick                       # two values per sweep, fewer iterations

Writes ``sweep.csv``, ``sweep.md`` (the table) and one PNG per swept parameter under ``--out``. Times per
iteration leave out the first iteration for every implementation (eager's warm-up, jax's XLA compiles);
timerl's compilation is reported apart. Memory is given twice: each implementation's own count (timerl's
``peak_device_bytes``, eager's state + buffers + saved activations) and, for the two torch implementations,
one count for both: the peak of live torch tensor bytes the PyTorch profiler sees.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import math
import pathlib
import sys
from typing import Any

DEFAULT = {"num_envs": 64, "steps": 100, "hidden": 64, "obs_padding": 0}
SWEEPS = {
    "num_envs": [16, 32, 64, 128, 256],
    "steps": [50, 100, 200, 400],
    "hidden": [32, 64, 128, 256],
    "obs_padding": [0, 28, 124, 508],  # observation sizes 4, 32, 128, 512
}
QUICK = {"num_envs": [16, 64], "steps": [50, 100], "hidden": [64, 128], "obs_padding": [0, 124]}
IMPLEMENTATIONS = ("timerl torch", "timerl jax", "eager PyTorch")


def _eager_module():
    path = pathlib.Path(__file__).resolve().parent / "eager_ppo.py"
    spec = importlib.util.spec_from_file_location("eager_ppo", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(implementation: str, config: dict[str, int], iterations: int) -> dict[str, float]:
    """Seconds per iteration (after the first, which eager treats as warm-up and jax spends compiling) and
    peak bytes of one implementation at one configuration. ``peak_bytes`` is each implementation's own
    count (timerl's memory pool; eager's state, buffers and saved activations); ``allocator_peak_bytes``
    counts both torch implementations the same way (`allocator_peak`)."""
    if implementation == "eager PyTorch":
        train_eager = _eager_module().train_eager
        result = train_eager(iterations=iterations, **config)
        allocated = allocator_peak(lambda: train_eager(iterations=2, warmup=0, **config))
        return {"seconds_per_iteration": result["seconds_per_iteration"], "peak_bytes": result["peak_bytes"],
                "allocator_peak_bytes": allocated, "compile_seconds": 0.0}
    from algorithms.ppo import train

    backend = implementation.split()[1]
    stats: dict[str, Any] = {}
    curve = train("CartPole-v1", iterations=iterations, epochs=1, minibatches=1, backend=backend, stats=stats,
                  **config)
    steady = [row["iteration_seconds"] for row in curve[1:]] or [curve[0]["iteration_seconds"]]
    allocated = float("nan")
    if backend == "torch":
        # two iterations: timerl computes no update after the last one (nothing reads its parameters)
        allocated = allocator_peak(lambda: train("CartPole-v1", iterations=2, epochs=1, minibatches=1,
                                                 backend=backend, **config))
    return {"seconds_per_iteration": sum(steady) / len(steady), "peak_bytes": stats["peak_device_bytes"],
            "allocator_peak_bytes": allocated, "compile_seconds": stats["compile_seconds"]}


def allocator_peak(run) -> float:
    """The most bytes of torch tensors alive at once while ``run()`` runs, from the allocation and free
    events the PyTorch profiler records (every tensor, whoever made it: the same count for timerl on torch
    and for eager PyTorch; NumPy arrays, e.g. the environments' observations, are not counted in either)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        run()
    events = sorted((e.start_ns(), e.nbytes()) for e in profiler.profiler.kineto_results.events()
                    if e.name() == "[memory]")
    live = peak = 0
    for _time, change in events:
        live += change
        peak = max(peak, live)
    return float(peak)


def sweep(sweeps: dict[str, list[int]], iterations: int, implementations=IMPLEMENTATIONS) -> list[dict[str, Any]]:
    """Every value of every sweep for every implementation; the default configuration, which every sweep
    passes through, is measured once per implementation and its row repeated."""
    rows = []
    measured: dict[tuple, dict[str, float]] = {}
    for parameter, values in sweeps.items():
        for value in values:
            config = dict(DEFAULT, **{parameter: value})
            for implementation in implementations:
                key = (implementation, tuple(sorted(config.items())))
                if key not in measured:
                    measured[key] = measure(implementation, config, iterations)
                result = measured[key]
                rows.append({"sweep": parameter, "value": value, "implementation": implementation, **result})
                print(f"{parameter}={value:<4} {implementation:14s} {result['seconds_per_iteration']:.3f} s/it  "
                      f"{result['peak_bytes'] / 2 ** 20:.1f} MiB (own count)  "
                      f"{result['allocator_peak_bytes'] / 2 ** 20:.1f} MiB (torch allocator)", file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: one line per (sweep, value), s/iteration and MiB per implementation, timerl torch vs eager."""
    implementations = list(dict.fromkeys(r["implementation"] for r in rows))
    header = ("| sweep | value | " + " | ".join(f"{i} s/it" for i in implementations) + " | torch / eager | "
              + " | ".join(f"{i} MiB" for i in implementations) + " | torch / eager allocator MiB |")
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    keys = list(dict.fromkeys((r["sweep"], r["value"]) for r in rows))
    for key in keys:
        found = {r["implementation"]: r for r in rows if (r["sweep"], r["value"]) == key}
        times = [f"{found[i]['seconds_per_iteration']:.3f}" if i in found else "-" for i in implementations]
        memory = [f"{found[i]['peak_bytes'] / 2 ** 20:.1f}" if i in found else "-" for i in implementations]
        ratio, allocated = "-", "-"
        if "timerl torch" in found and "eager PyTorch" in found:
            torch_row, eager_row = found["timerl torch"], found["eager PyTorch"]
            ratio = f"{torch_row['seconds_per_iteration'] / eager_row['seconds_per_iteration']:.2f}x"
            allocated = (f"{torch_row['allocator_peak_bytes'] / 2 ** 20:.1f} / "
                         f"{eager_row['allocator_peak_bytes'] / 2 ** 20:.1f}")
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(times) + f" | {ratio} | " + " | ".join(memory)
                     + f" | {allocated} |")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], out: pathlib.Path) -> list[pathlib.Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for parameter in dict.fromkeys(r["sweep"] for r in rows):
        figure, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(9, 3.2))
        for implementation in dict.fromkeys(r["implementation"] for r in rows):
            points = [r for r in rows if r["sweep"] == parameter and r["implementation"] == implementation]
            values = [r["value"] for r in points]
            time_axis.plot(values, [r["seconds_per_iteration"] for r in points], marker="o", label=implementation)
            line = memory_axis.plot(values, [r["peak_bytes"] / 2 ** 20 for r in points], marker="o",
                                    label=f"{implementation}, own count")[0]
            allocated = [r["allocator_peak_bytes"] / 2 ** 20 for r in points]
            if not any(math.isnan(a) for a in allocated):
                memory_axis.plot(values, allocated, marker="x", linestyle="--", color=line.get_color(),
                                 label=f"{implementation}, torch allocator")
        time_axis.set(xlabel=parameter, ylabel="seconds / iteration")
        memory_axis.set(xlabel=parameter, ylabel="peak memory (MiB)")
        time_axis.legend(fontsize=8)
        memory_axis.legend(fontsize=7)
        figure.suptitle(f"PPO, sweeping {parameter} (others at {DEFAULT})", fontsize=9)
        figure.tight_layout()
        path = out / f"ppo_sweep_{parameter}.png"
        figure.savefig(path, dpi=100)
        plt.close(figure)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="ppo_sweep", help="folder for sweep.csv, sweep.md and the PNGs")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="two values per sweep")
    parser.add_argument("--only", choices=tuple(SWEEPS), nargs="*", help="sweep only these parameters")
    parser.add_argument("--implementations", choices=IMPLEMENTATIONS, nargs="*", default=list(IMPLEMENTATIONS))
    args = parser.parse_args(argv)
    chosen = QUICK if args.quick else SWEEPS
    chosen = {k: v for k, v in chosen.items() if not args.only or k in args.only}
    rows = sweep(chosen, args.iterations, args.implementations)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "sweep.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    markdown = table(rows)
    (out / "sweep.md").write_text(markdown + "\n")
    plot(rows, out)
    print(markdown)
    return rows


if __name__ == "__main__":
    main()
