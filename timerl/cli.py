"""`timerl bench` (and `make bench`): timerl against baselines measured in the same run, plus peak memory."""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import time

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_program50() -> None:
    program50 = _load("program50")
    print("| backend | ops | compile s | execute s | peak device bytes |")
    print("|---|---|---|---|---|")
    for backend in ("reference", "torch", "jax"):
        ctx = program50.build({})
        started = time.perf_counter()
        exe = ctx.compile({"B": 2, "I": 3, "T": 12}, backend=backend)
        compiled = time.perf_counter() - started
        exe.execute()
        print(f"| {backend} | {len(ctx.nodes)} | {compiled:.2f} | {exe.stats['execute_seconds']:.3f} | "
              f"{exe.stats['peak_device_bytes']} |")


def bench_reinforce(iterations: int, steps: int) -> None:
    from algorithms.reinforce import train
    from timerl.rt.context import Context

    eager = _load("eager_reinforce").train_eager(iterations=iterations, steps=steps)
    captured = {}
    original = Context.compile

    def compile_and_keep(self, *args, **kwargs):
        captured["exe"] = exe = original(self, *args, **kwargs)
        return exe

    Context.compile = compile_and_keep
    try:
        rows = []
        for backend in ("torch", "jax"):
            train("CartPole-v1", iterations=iterations, num_envs=16, steps=steps, backend=backend)
            stats = captured["exe"].stats
            rows.append((backend, stats["compile_seconds"], stats["execute_seconds"] / iterations,
                         stats["peak_device_bytes"]))
    finally:
        Context.compile = original
    print(f"REINFORCE Monte Carlo, CartPole-v1, 16 envs x {steps} steps, {iterations} iterations")
    print("| implementation | compile s | s / iteration | vs eager PyTorch | peak device bytes |")
    print("|---|---|---|---|---|")
    print(f"| eager PyTorch | - | {eager:.3f} | 1.00x | - |")
    for backend, compile_seconds, per_iteration, peak in rows:
        print(f"| timerl {backend} | {compile_seconds:.2f} | {per_iteration:.3f} | {per_iteration / eager:.2f}x | "
              f"{peak} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="timerl")
    commands = parser.add_subparsers(dest="command", required=True)
    bench = commands.add_parser("bench", help="benchmarks against baselines measured in the same run")
    bench.add_argument("--iterations", type=int, default=5)
    bench.add_argument("--steps", type=int, default=200)
    args = parser.parse_args(argv)
    if args.command == "bench":
        print("## Scheduler: a 48-op program over (b, i, t)")
        bench_program50()
        print()
        print("## REINFORCE")
        bench_reinforce(args.iterations, args.steps)
        print()
        print("The MMapGame baselines have their own benchmark: python -m algorithms.mmap bench")


if __name__ == "__main__":
    main()
