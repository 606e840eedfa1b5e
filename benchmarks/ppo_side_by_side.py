"""timerl torch against eager PyTorch PPO, side by side in one process, in CPU seconds: the timerl program is
compiled once and executed again between eager runs, in alternating rounds, so both see the same load.

    python -m benchmarks.ppo_side_by_side --iterations 12 --rounds 6

Prints each round's seconds per iteration (``time.process_time``, the process's CPU time, which a loaded
machine inflates less than wall time, and wall time beside it) and the ratio of the medians. Eager's time is
its iterations' own (``cpu_seconds_per_iteration``), without making its 64 environments and its networks
(about 10 ms a run); timerl's is its whole ``execute()``. timerl's last iteration computes no update (nothing
reads the parameters after it): one update in ``iterations`` is dead code, so the default is 12 iterations
(that update's statements take about 4-5 ms, under 0.5 ms an iteration at 12; at 4 it was 1-1.7 ms in timerl's
favour). The default configuration of the sweep (`benchmarks/ppo_sweep.py`): 64 environments x 100 steps, one
epoch of one minibatch.
"""

from __future__ import annotations

import argparse
import statistics
import time

from algorithms.ppo import train
from benchmarks.ppo_sweep import DEFAULT, _eager_module


def side_by_side(iterations: int = 12, rounds: int = 6) -> tuple[list[float], ...]:
    """CPU seconds per iteration of timerl torch, of eager PyTorch (its iterations) and of eager's whole call, then
    wall seconds per iteration of timerl and of eager's iterations; one entry per round each."""
    config = dict(DEFAULT)
    config.pop("obs_padding")
    stats: dict = {}
    train(iterations=iterations, epochs=1, minibatches=1, backend="torch", stats=stats, **config)
    executable = stats["executable"]
    train_eager = _eager_module().train_eager
    train_eager(iterations=1, **config)
    timerl, eager, eager_whole, timerl_wall, eager_wall = [], [], [], [], []
    for _ in range(rounds):
        started = time.process_time()
        result = train_eager(iterations=iterations, warmup=0, **config)
        eager_whole.append((time.process_time() - started) / iterations)
        eager.append(result["cpu_seconds_per_iteration"])
        eager_wall.append(result["seconds_per_iteration"])
        started, started_wall = time.process_time(), time.perf_counter()
        executable.execute()
        timerl.append((time.process_time() - started) / iterations)
        timerl_wall.append((time.perf_counter() - started_wall) / iterations)
    return timerl, eager, eager_whole, timerl_wall, eager_wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    timerl, eager, eager_whole, timerl_wall, eager_wall = side_by_side(args.iterations, args.rounds)
    print("timerl torch  ", " ".join(f"{x:.3f}" for x in timerl))
    print("eager PyTorch ", " ".join(f"{x:.3f}" for x in eager))
    ratio = statistics.median(timerl) / statistics.median(eager)
    print(f"median {statistics.median(timerl):.3f} s against {statistics.median(eager):.3f} s: {ratio:.2f}x")
    whole = statistics.median(eager_whole)
    print(f"(eager with making its environments and networks counted, as before: {whole:.3f} s, "
          f"{statistics.median(timerl) / whole:.2f}x)")
    wall = statistics.median(timerl_wall) / statistics.median(eager_wall)
    print(f"wall: {statistics.median(timerl_wall):.3f} s against {statistics.median(eager_wall):.3f} s: {wall:.2f}x")


if __name__ == "__main__":
    main()
