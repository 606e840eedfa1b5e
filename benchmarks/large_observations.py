"""Large observations (TimeRL paper §8.3, Fig. 10, and §8.4, Fig. 11, at CPU scale): REINFORCE on
`algorithms.pixel_cartpole` (3 x H x W frames, H from 32 to 256) under a fixed simulated device budget.

For each frame size and both returns (Monte Carlo and 8-step):
- eager PyTorch (`benchmarks.eager_reinforce`, a convolution with kernel = stride = H / 8 first): its peak
  device bytes counted the same way as timerl's pool, bytes of live tensors (`benchmarks.eager_memory`);
  eager keeps every frame of the iteration for the backward pass, so past some H it exceeds the budget
  (on a GPU: out of memory);
- timerl with ``device_memory`` = the budget and ``swap=True``: the scheduler places offloads and fetches
  and chooses them at compile time against the budget (`timerl.runtime.dryrun.choose_swaps`); its device
  and host peaks, seconds of CPU time per iteration, scheduled and reactive swaps;
- timerl with a budget that fits without swapping (the same memory-aware schedule, no swaps), timed in the
  same process right after, for the cost of swapping;
- with ``--recompute``, timerl with the budget, swapping and ``recompute=True`` too.

    python -m benchmarks.large_observations [--sizes 32 64 128 256] [--budget-mb 10] [--plot PATH]

Prints a Markdown table; ``--plot`` also draws peak device memory against the frame size (PNG).
Sized for two shared cores: 2 environments x 128 steps, 4 iterations (timed: the middle two; the first
compiles, the last only acts); the issue's 512 MB budget at 256 environments x 1,000 steps scales down to about 10 MB here.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from algorithms.reinforce import train
from benchmarks.eager_memory import LiveTensorBytes
from benchmarks.eager_reinforce import train_eager

ENV = "algorithms.pixel_cartpole:PixelCartPole-v0"
RETURNS = ((None, "Monte Carlo"), (8, "8-step"))


def eager_peak(size: int, n_step: int | None, args: argparse.Namespace) -> int:
    with LiveTensorBytes() as meter:
        train_eager(iterations=2, num_envs=args.num_envs, steps=args.steps, n_step=n_step, env_name=ENV,
                    env_options=dict(size=size))
    return meter.peak


def eager_seconds(size: int, n_step: int | None, args: argparse.Namespace) -> float:
    """CPU seconds per iteration (environment creation included, one iteration's worth at most)."""
    started = time.process_time()
    train_eager(iterations=args.iterations, num_envs=args.num_envs, steps=args.steps, n_step=n_step, env_name=ENV,
                env_options=dict(size=size))
    return (time.process_time() - started) / args.iterations


def timerl_run(size: int, n_step: int | None, args: argparse.Namespace, options: dict) -> dict[str, Any]:
    stats: dict = {}
    curve = train(ENV, iterations=args.iterations, num_envs=args.num_envs, steps=args.steps, n_step=n_step,
                  backend="torch", env_options=dict(size=size), stats=stats, compile_options=options)
    later = [row["iteration_cpu_seconds"] for row in curve[1:-1]]  # not the first (compiles) nor the last
    # (it only acts: nothing reads its gradient, so it does not learn)
    return {"peak": stats["peak_device_bytes"], "host": stats["peak_host_bytes"],
            "seconds": statistics.mean(later), "scheduled": stats["scheduled_offloads"],
            "reactive": stats["reactive_offloads"] + stats["reactive_fetches"],
            "returns": [row["mean_return"] for row in curve]}


def megabytes(size: int) -> str:
    return f"{size / 1e6:.1f}"


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[32, 64, 128, 256])
    parser.add_argument("--budget-mb", type=float, default=10.0, help="simulated device memory, MB (10^6 bytes)")
    parser.add_argument("--num-envs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=128)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--recompute", action="store_true", help="also run with recompute=True")
    parser.add_argument("--plot", default=None, help="write a PNG of peak device memory against H")
    args = parser.parse_args(argv)
    budget = int(args.budget_mb * 1e6)
    swapped = dict(device_memory=budget, swap=True)
    unbounded = dict(device_memory=1 << 40, swap=True)  # the same schedule; fits without a swap
    print(f"budget {megabytes(budget)} MB; {args.num_envs} envs x {args.steps} steps, torch; MB = 10^6 bytes; "
          "s = CPU seconds per iteration")
    print()
    columns = ["frame", "returns", "eager peak MB", "eager s", "timerl peak MB", "host MB", "timerl s",
               "scheduled offloads", "reactive swaps", "no-swap peak MB", "no-swap s", "swap / no-swap"]
    if args.recompute:
        columns += ["recompute peak MB", "recompute s"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    rows = []
    for size in args.sizes:
        for n_step, returns in RETURNS:
            peak = eager_peak(size, n_step, args)
            fits = peak <= budget
            seconds = f"{eager_seconds(size, n_step, args):.2f}" if fits else "exceeds"
            plain = timerl_run(size, n_step, args, unbounded)
            run = timerl_run(size, n_step, args, swapped)
            row = {"size": size, "returns": returns, "eager_peak": peak, "eager_fits": fits, "timerl": run,
                   "no_swap": plain}
            cells = [f"3x{size}x{size}", returns, megabytes(peak), seconds, megabytes(run["peak"]),
                     megabytes(run["host"]), f"{run['seconds']:.2f}", str(run["scheduled"]), str(run["reactive"]),
                     megabytes(plain["peak"]), f"{plain['seconds']:.2f}", f"{run['seconds'] / plain['seconds']:.2f}"]
            if args.recompute:
                again = timerl_run(size, n_step, args, dict(swapped, recompute=True))
                row["recompute"] = again
                cells += [megabytes(again["peak"]), f"{again['seconds']:.2f}"]
            rows.append(row)
            print("| " + " | ".join(cells) + " |", flush=True)
    if args.plot:
        plot(rows, budget, args.plot)
    return rows


def plot(rows: list[dict[str, Any]], budget: int, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (memory, seconds) = plt.subplots(1, 2, figsize=(12, 4.5))
    for returns, style in (("Monte Carlo", "-"), ("8-step", "--")):
        chosen = [r for r in rows if r["returns"] == returns]
        sizes = [r["size"] for r in chosen]
        memory.plot(sizes, [r["eager_peak"] / 1e6 for r in chosen], style, marker="o", color="tab:red",
                    label=f"eager PyTorch, {returns}")
        memory.plot(sizes, [r["timerl"]["peak"] / 1e6 for r in chosen], style, marker="o", color="tab:blue",
                    label=f"timerl device, {returns}")
        memory.plot(sizes, [r["timerl"]["host"] / 1e6 or float("nan") for r in chosen], style, marker="s",
                    color="tab:orange", label=f"timerl host (swapped), {returns}")  # none: no point
        seconds.plot(sizes, [r["timerl"]["seconds"] for r in chosen], style, marker="o", color="tab:blue",
                     label=f"with the budget (swapping), {returns}")
        seconds.plot(sizes, [r["no_swap"]["seconds"] for r in chosen], style, marker="o", color="tab:green",
                     label=f"no budget (no swapping), {returns}")
    memory.axhline(budget / 1e6, color="black", linestyle=":", label="device budget")
    for axis in (memory, seconds):
        axis.set_xscale("log", base=2)
        axis.set_xticks([r["size"] for r in rows[::2]], [f"3x{r['size']}x{r['size']}" for r in rows[::2]])
        axis.set_xlabel("observation")
    memory.set_yscale("log")
    memory.set_ylabel("peak MB")
    memory.set_title("peak memory (eager exceeds the budget; timerl swaps)")
    seconds.set_ylabel("CPU seconds per iteration")
    seconds.set_title("timerl: iteration time with and without swapping")
    memory.legend(fontsize=7)
    seconds.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
