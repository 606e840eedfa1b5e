"""Moves per second of the RT game: `python -m algorithms.mmap.rt.bench --workload muzero_adam --games 256`.

Every game plays uniformly random legal moves (`uniform_legal`, drawn inside the program), so the measured
program is the whole move recurrence: policy, rules, Drop-backup. Reported: compile seconds, the first run
(on jax it includes XLA compiling each fused group), and a second, warm run: moves/s = games x moves / warm
run seconds, by the wall clock and by the process's CPU time (which a loaded, shared machine disturbs less).
"""

from __future__ import annotations

import argparse
import time

import timerl as trl
from algorithms.mmap.problem import build_problem
from algorithms.mmap.rt.program import play, uniform_legal
from algorithms.mmap.rt.tables import GameTables, game_arrays


def measure(workload: str, games: int, moves: int, backend: str, drop_backup: bool = True) -> dict:
    problem = build_problem(workload)
    ctx = trl.Context(dims="m")
    (m,), (bound,) = ctx.dims, ctx.bounds
    finals = []
    with ctx:
        played = play(GameTables(game_arrays(problem)), games, uniform_legal, move_dim=m, drop_backup=drop_backup)
        with ctx.when(m == bound - 1):
            played.after.total.sink(lambda point, value: finals.append(value))
    started = time.perf_counter()
    exe = ctx.compile(bounds={bound: moves}, backend=backend)
    compiled = time.perf_counter()
    exe.execute()  # the first run also compiles each fused group with XLA (jax)
    warmed, cpu = time.perf_counter(), time.process_time()
    exe.execute()
    executed, cpu = time.perf_counter(), time.process_time() - cpu
    return {"workload": workload, "buffers": problem.num_buffers, "backend": backend, "games": games,
            "moves": moves, "compile_s": compiled - started, "first_execute_s": warmed - compiled,
            "execute_s": executed - warmed, "moves_per_s": games * moves / (executed - warmed), "cpu_moves_per_s": games * moves / cpu}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="muzero_adam")
    parser.add_argument("--games", type=int, default=256)
    parser.add_argument("--moves", type=int, default=50)
    parser.add_argument("--backend", nargs="+", default=["torch", "jax"])
    args = parser.parse_args(argv)
    for backend in args.backend:
        result = measure(args.workload, args.games, args.moves, backend)
        print(f"{result['workload']} ({result['buffers']} buffers), {backend}, {result['games']} games x "
              f"{result['moves']} moves: compile {result['compile_s']:.1f} s, first run {result['first_execute_s']:.1f} s, "
              f"warm run {result['execute_s']:.2f} s, "
              f"{result['moves_per_s']:,.0f} moves/s ({result['cpu_moves_per_s']:,.0f} per CPU second)")


if __name__ == "__main__":
    main()
