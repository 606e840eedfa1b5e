"""Moves per second of the RT game: `python -m algorithms.mmap.rt.bench` (muzero_scan_adam, 1,041 buffers,
256 games, 100 moves, jax and torch, 5 warm runs each).

Every game plays uniformly random legal moves (`uniform_legal`, drawn inside the program), so the measured
program is the whole move recurrence: policy, rules, Drop-backup. Reported: compile seconds, the first run
(on jax it includes XLA compiling each fused group; excluded from the rates), then `--repeats` warm runs of
the same executable: moves/s = games x moves / run seconds, by the wall clock and per CPU second of the
process (which a loaded, shared machine disturbs less), the best and the median run of each, and the load
average before and after (a wall-clock figure means little on a machine shared with other work).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import jax
import numpy as np

import timerl as trl
from algorithms.mmap.problem import build_problem
from algorithms.mmap.rt.program import play, uniform_legal
from algorithms.mmap.rt.tables import GameTables, game_arrays


def measure(workload: str, games: int, moves: int, backend: str, drop_backup: bool = True, repeats: int = 5,
            options: trl.CompileOptions | None = None) -> dict:
    problem = build_problem(workload)
    ctx = trl.Context(dims="m")
    (m,), (bound,) = ctx.dims, ctx.bounds
    finals = []
    # TorchInductor's layout (GameTables: int32 records and edges) where it compiles the move
    wide = backend == "torch" and options is not None and options.compile_groups
    with ctx:
        played = play(GameTables(game_arrays(problem), wide=wide), games, uniform_legal, move_dim=m,
                      drop_backup=drop_backup)
        with ctx.when(m == bound - 1):
            # read on the host: a run ends when its games' returns are there (jax dispatches asynchronously)
            played.after.total.sink(lambda point, value: finals.append(np.asarray(value)))
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    exe = ctx.compile(bounds={bound: moves}, backend=backend, **({} if options is None else {"options": options}))
    compiled = time.perf_counter()
    exe.execute()  # the first run also compiles each fused group with XLA (jax)
    first = time.perf_counter() - compiled
    wall, cpu = [], []
    for _ in range(repeats):
        began, began_cpu = time.perf_counter(), time.process_time()
        exe.execute()
        wall.append(time.perf_counter() - began)
        cpu.append(time.process_time() - began_cpu)
    total = games * moves
    return {"workload": workload, "buffers": problem.num_buffers, "backend": backend, "games": games,
            "moves": moves, "repeats": repeats, "compile_s": compiled - started, "first_execute_s": first,
            "execute_s": min(wall), "moves_per_s": total / min(wall),
            "median_moves_per_s": total / statistics.median(wall), "cpu_moves_per_s": total / min(cpu),
            "median_cpu_moves_per_s": total / statistics.median(cpu),
            "load_before": load_before, "load_after": os.getloadavg()[0],
            "runs_moves_per_s": [round(total / w) for w in wall],
            "runs_cpu_moves_per_s": [round(total / c) for c in cpu]}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="muzero_scan_adam")
    parser.add_argument("--games", type=int, default=256)
    parser.add_argument("--moves", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5, help="warm runs measured (after the first run)")
    parser.add_argument("--backend", nargs="+", default=["jax", "torch"])
    parser.add_argument("--compile-groups", action="store_true",
                        help="torch: the move's kernels compiled by TorchInductor (CompileOptions.compile_groups; "
                             "compiling takes ~2 minutes, counted in the first run)")
    args = parser.parse_args(argv)
    # the moves chain jitted calls whose results stay on the device: XLA:CPU's handover to a worker thread lets
    # Python dispatch the next move meanwhile (timerl's jax backend turns it off unless this variable is set, for
    # programs that read a result back every step; here it is faster on); the update covers a backend imported
    # before this line
    os.environ["JAX_CPU_ENABLE_ASYNC_DISPATCH"] = "true"
    jax.config.update("jax_cpu_enable_async_dispatch", True)
    for backend in args.backend:
        options = trl.CompileOptions(compile_groups=True) if args.compile_groups and backend == "torch" else None
        r = measure(args.workload, args.games, args.moves, backend, repeats=args.repeats, options=options)
        label = f"{backend} (compile_groups)" if options is not None else backend
        print(f"{r['workload']} ({r['buffers']} buffers), {label}, {r['games']} games x {r['moves']} moves: "
              f"compile {r['compile_s']:.1f} s, first run {r['first_execute_s']:.1f} s; {r['repeats']} warm runs: "
              f"wall {r['moves_per_s']:,.0f} moves/s best, {r['median_moves_per_s']:,.0f} median; "
              f"per CPU second {r['cpu_moves_per_s']:,.0f} best, {r['median_cpu_moves_per_s']:,.0f} median "
              f"(load {r['load_before']:.1f} -> {r['load_after']:.1f}); each run, wall {r['runs_moves_per_s']}, "
              f"per CPU second {r['runs_cpu_moves_per_s']}", flush=True)


if __name__ == "__main__":
    main()
