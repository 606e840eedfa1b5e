"""MuZero self-play throughput on 1, 2 and 4 Ray actors (`algorithms.muzero.actors`): environment moves per second
of one self-play round on a synthetic MMapGame workload, and whether the actors' games equal the same actors'
games played one after another in this process (they must: each actor's seed is its own).

    python -m benchmarks.ray_selfplay --workers 1 2 4 --games 8 --rounds 3

With ``RAY_ADDRESS`` set (or ``--ray-address``) the actors run on that cluster; otherwise a local Ray starts with as
many CPUs as the largest worker count (on a machine with fewer cores they share them)."""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import ray

from algorithms import local_ray
from algorithms.mmap.problem import build_problem
from algorithms.mmap.synthetic import synthetic_instance
from algorithms.muzero.actors import Actors
from algorithms.muzero.mcts import SearchConfig
from algorithms.muzero.networks import Layout, Sizes, init_weights
from benchmarks import report

SIZES = Sizes(hidden=16, image=4, trunk=16, head=16)


def _games(trajectories) -> list:
    return [(t.actions, t.total_reward) for t in trajectories]


def measure(workers: int, games: int, rounds: int, simulations: int, instructions: int) -> dict:
    """Moves per second of ``rounds`` self-play rounds (after one warm-up round) on ``workers`` Ray actors."""
    problem = build_problem(synthetic_instance(seed=1, num_instructions=instructions))
    weights = init_weights(SIZES, 0)
    layout = Layout.of(weights)
    packed = layout.pack(weights)
    config = SearchConfig(num_simulations=simulations, max_depth=4)
    remote = Actors(problem, layout, games, config, seed=5, workers=workers, use_ray=True)
    local = Actors(problem, layout, games, config, seed=5, workers=workers)
    try:
        same = _games(remote.play(packed, 1.0)) == _games(local.play(packed, 1.0))  # also the warm-up round
        seconds, moves = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            played = remote.play(packed, 1.0)
            seconds.append(time.perf_counter() - started)
            moves.append(sum(len(t.actions) for t in played))
    finally:
        for actor in remote.actors:
            ray.kill(actor)
    return {"workers": workers, "moves": int(np.mean(moves)), "round_seconds": statistics.median(seconds),
            "moves_per_second": float(np.sum(moves) / np.sum(seconds)), "same": same}


def table(rows: list[dict]) -> str:
    base = rows[0]["moves_per_second"]
    lines = ["| Ray actors | moves / round | s / round (median) | moves / s | vs 1 actor | games equal serial |",
             "|---:|---:|---:|---:|---:|:---:|"]
    lines += [f"| {r['workers']} | {r['moves']} | {r['round_seconds']:.2f} | {r['moves_per_second']:.0f} | "
              f"{r['moves_per_second'] / base:.2f}x | {'yes' if r['same'] else 'NO'} |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ray_selfplay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--games", type=int, default=8, help="games per round, shared among the actors")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per worker count")
    parser.add_argument("--simulations", type=int, default=8)
    parser.add_argument("--instructions", type=int, default=16, help="size of the synthetic workload")
    parser.add_argument("--no-write", dest="write", action="store_false", help="print only")
    local_ray.add_address_argument(parser)
    args = parser.parse_args(argv)
    if any(w < 1 or w > args.games for w in args.workers):
        parser.error(f"--workers: each count must be between 1 and --games ({args.games})")
    local_ray.use_address(args.ray_address)
    local_ray.start(max(args.workers))
    rows = [measure(w, args.games, args.rounds, args.simulations, args.instructions) for w in args.workers]
    text = table(rows)
    print(text)
    if args.write:
        command = ("python -m benchmarks.ray_selfplay --workers " + " ".join(map(str, args.workers)) +
                   f" --games {args.games} --rounds {args.rounds}")
        nodes = len([node for node in ray.nodes() if node["Alive"]])
        cpus = int(ray.cluster_resources().get("CPU", 0))
        report.write_section("ray-selfplay", "MuZero self-play on Ray actors",
                             f"Ray: {nodes} node(s), {cpus} CPUs.\n\n{text}", command)


if __name__ == "__main__":
    main()
