"""Command line: `python -m algorithms.muzero bench [--workloads ...] [--seconds S]` prints a Markdown table of
MuZero next to the heuristic and ES at an equal wall-clock budget per workload, and writes the
learning curves (mean and best return per self-play round) as PNG and JSON."""

from __future__ import annotations

import argparse
import json

from algorithms import local_ray
from algorithms.mmap.bench import COPY_SETUP_SECONDS
from algorithms.muzero.agent import MuZeroConfig
from algorithms.muzero.bench import SMALL_WORKLOADS, bench_workload, markdown


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m algorithms.muzero")
    commands = parser.add_subparsers(dest="command", required=True)
    bench = commands.add_parser("bench", help="MuZero vs heuristic and ES at equal CPU time")
    bench.add_argument("--workloads", nargs="*", default=list(SMALL_WORKLOADS))
    bench.add_argument("--seconds", type=float, default=120.0, help="CPU-time budget per agent and workload (compiles outside it)")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--out", default="muzero_bench", help="prefix of the JSON and PNG files")
    bench.add_argument("--workers", type=int, default=1, help="self-play actors; more than one run on local Ray")
    local_ray.add_address_argument(bench)
    bench.add_argument("--bytes-only", action="store_true",
                       help="play the bytes-only game (default: the setup game, algorithms.mmap.bench.game_problem)")
    args = parser.parse_args(argv)
    local_ray.use_address(getattr(args, "ray_address", None))
    rows = []
    config = MuZeroConfig(workers=args.workers)
    for name in args.workloads:
        setup = 0.0 if args.bytes_only else COPY_SETUP_SECONDS
        rows.append(bench_workload(name, args.seconds, args.seed, config, setup))
        print(markdown(rows[-1:]), flush=True)
        with open(f"{args.out}.json", "w") as handle:
            json.dump(rows, handle, indent=1)
    print(markdown(rows))
    _plot(rows, f"{args.out}.png")


def _plot(rows, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    for row in rows:
        curve = row["muzero"]["curve"]
        line, = axis.plot([c["seconds"] for c in curve], [c["mean"] for c in curve], label=row["workload"])
        axis.axhline(row["es"]["reward"], color=line.get_color(), linestyle=":", linewidth=0.8)
    axis.set_xlabel("CPU seconds (compiles excluded)")
    axis.set_ylabel("mean self-play return / best saving")
    axis.set_title("MMap-MuZero learning curves (dotted: ES at the same budget)")
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
