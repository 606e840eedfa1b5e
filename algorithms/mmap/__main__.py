"""Command line: `python -m algorithms.mmap bench ...`, `... plot WORKLOAD ...` and `... workloads` (the table)."""

from __future__ import annotations

import argparse
import dataclasses
import json

from algorithms.mmap.baselines import AGENTS
from algorithms.muzero.bench import MUZERO_AGENTS

EVERY_AGENT = {**AGENTS, **MUZERO_AGENTS}  # the CLI is the top layer: MuZero (built on this package) joins here


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m algorithms.mmap")
    commands = parser.add_subparsers(dest="command", required=True)

    bench = commands.add_parser("bench", help="run every baseline on every workload, print Markdown tables")
    bench.add_argument("--workloads", nargs="*", help="workload names (default: all parsed workloads)")
    bench.add_argument("--suite", choices=("small", "large"), default=None,
                       help="bench.WORKLOADS (8 of 131-256 buffers) or bench.LARGE_WORKLOADS (8 of 301-5,597)")
    bench.add_argument("--bytes-only", action="store_true",
                       help="every agent plays the bytes-only game (default: the setup game, a DMA setup time in "
                            "every copy's demand; bench.game_problem)")
    bench.add_argument("--scale-seconds", action="store_true",
                       help="the budget grows with the workload: seconds x buffers / 300, at least seconds")
    bench.add_argument("--budget", type=int, default=None, help="episodes' worth of game moves per agent")
    bench.add_argument("--agents", nargs="*", default=list(AGENTS), choices=list(EVERY_AGENT),
                       help="default: the baselines; add muzero, muzero_nosearch, muzero_nolearn, muzero_puct, "
                            "muzero_gumbel_t")
    bench.add_argument("--seconds", type=float, default=None,
                       help="budget as CPU time per agent and workload (random play's moves in S CPU seconds)")
    bench.add_argument("--curves", default=None, help="PNG of the learning agents' curves")
    bench.add_argument("--json", default=None, help="write the reports as JSON")
    bench.add_argument("--seed", type=int, default=0)
    bench.add_argument("--jobs", type=int, default=2, help="workloads benchmarked in parallel")
    bench.add_argument("--reference", default="msa", choices=list(EVERY_AGENT),
                       help="the compiler baseline speedups are measured against")

    plot = commands.add_parser("plot", help="draw the mapping one agent finds")
    plot.add_argument("workload")
    plot.add_argument("--agent", default="heuristic", choices=list(AGENTS))
    plot.add_argument("--budget", type=int, default=None, help="episodes' worth of game moves")
    plot.add_argument("--seed", type=int, default=0)
    plot.add_argument("--out", default="mapping.png")

    commands.add_parser("workloads", help="the workload table: buffers, instructions, alias groups, peak bytes")

    args = parser.parse_args(argv)
    if args.command == "workloads":
        print(workload_table())
    elif args.command == "bench":
        from algorithms.mmap.bench import COPY_SETUP_SECONDS, DEFAULT_BUDGET, SUITES, markdown, run_bench

        names = (args.workloads or []) + list(SUITES[args.suite] if args.suite else ())
        reports = run_bench(names or None, args.budget or DEFAULT_BUDGET, args.seed, args.agents, args.jobs,
                            EVERY_AGENT, args.seconds, 0.0 if args.bytes_only else COPY_SETUP_SECONDS,
                            args.scale_seconds)
        if args.json:
            with open(args.json, "w") as handle:
                json.dump([dataclasses.asdict(report) for report in reports], handle, indent=1)
        print(markdown(reports, args.agents, args.reference))
        if args.curves:
            from algorithms.mmap.plot import plot_curves

            plot_curves(reports, args.curves)
    else:
        from algorithms.mmap.bench import DEFAULT_BUDGET
        from algorithms.mmap.plot import plot_mapping
        from algorithms.mmap.problem import build_problem

        problem = build_problem(args.workload)
        budget = (args.budget or DEFAULT_BUDGET) * problem.num_buffers
        result = AGENTS[args.agent](problem, seed=args.seed, budget=budget)
        plot_mapping(problem, result.mapping, f"{problem.name} ({args.agent})", args.out)
        print(f"{args.out}: reward {result.reward:.2f} us, latency {result.latency:.2f} us")


def workload_table() -> str:
    from algorithms.mmap.instance import as_instance
    from algorithms.mmap.problem import peak_live_bytes
    from algorithms.mmap.workloads import list_workloads, load_workload

    lines = ["| workload | buffers | instructions | alias groups | peak bytes | program |", "|---|---|---|---|---|---|"]
    for name in sorted(list_workloads(), key=lambda n: load_workload(n).num_buffers):
        workload = load_workload(name)
        groups = len(set(workload.alias_id[workload.alias_id >= 0].tolist()))
        lines.append(f"| {name} | {workload.num_buffers:,} | {workload.num_instructions:,} | {groups} | "
                     f"{peak_live_bytes(as_instance(workload)):,} | {workload.description} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
