"""`python -m benchmarks bench` (`make bench`, and `timerl bench` through the engine's command registry): timerl
against baselines measured in the same run, plus peak memory; `plot-memory` draws REINFORCE's memory timeline."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import pathlib
import statistics
import sys
import time

from timerl.options import CompileOptions


def _load(name: str):
    """``benchmarks.NAME``, imported when its benchmark runs (each pulls in what it measures)."""
    return importlib.import_module(f"benchmarks.{name}")


def bench_program50() -> None:
    _load("program50").table()


def bench_long_recurrence(steps: int = 100_000) -> None:
    """The reference interpreter on a running sum over 100,000 steps (benchmarks/long_recurrence.py; its value is
    checked there and in tests/test_language.py, which asserts no time)."""
    compiled, executed = _load("long_recurrence").measure(steps, "reference")
    print("| backend | steps | compile s | execute s | microseconds / step |")
    print("|---|---|---|---|---|")
    print(f"| reference | {steps} | {compiled:.2f} | {executed:.2f} | {executed / steps * 1e6:.1f} |")


# Iterations excluded from the median, shown together as the "first iterations" column: they pay jax's XLA compiles
# (one per group and shape) and torch's first calls. Two, because REINFORCE's first iteration reads the initial
# weights where later ones read the previous update: on jax its second iteration compiles the steady state.
WARM_UP = 2


def _warm_up_and_rest(curve: list[dict]) -> tuple[float, float]:
    """(seconds of the warm-up iterations, median seconds of the iterations after them). Medians, not means: one
    slow iteration (another process's burst) moves a short mean far; the eager side is a median too."""
    seconds = [row["iteration_seconds"] for row in curve]
    return sum(seconds[:WARM_UP]), statistics.median(seconds[WARM_UP:])


ROUNDS = 3  # REINFORCE's rounds: in each, eager and every timerl variant run in turn (`bench_reinforce`)


def _after_first(rows: list[dict], iterations: int) -> tuple[list[float], list[float]]:
    """The wall and CPU seconds of the last run's iterations but its first, from ``rows`` (a learning curve to which
    each run appended ``iterations`` rows, or eager's iterations as rows): a run's first iteration also counts what
    happened since the previous row (the other implementations' runs in between), or builds eager's optimizer
    state."""
    last = rows[len(rows) - iterations + 1:]
    return [row["iteration_seconds"] for row in last], [row["iteration_cpu_seconds"] for row in last]


def bench_reinforce(iterations: int, configurations: list[tuple[int, int]], n_steps: tuple,
                    rounds: int = ROUNDS) -> None:
    """timerl torch and jax against the eager PyTorch REINFORCE, measured side by side in this run. Each timerl
    variant is compiled and run once (``iterations`` iterations: the warm-up, which pays jax's XLA compiles),
    then ``rounds`` rounds follow, each one eager run and one `execute()` of every variant's executable, in turn,
    ``iterations`` iterations each, so every row sees the load of the same seconds. A row's seconds per iteration is the median over
    its rounds of the iterations after each round's first (eager's first builds its networks' optimizer state; a
    re-executed program's first row also counts the time since its previous run), wall time and CPU time
    (`time.process_time`, which a loaded machine inflates less). Torch runs single-threaded on both sides: with
    small tensors, intra-op threads only add synchronisation (and spin when the cores are shared)."""
    import torch

    from algorithms.reinforce import train

    torch.set_num_threads(1)
    eager_reinforce = _load("eager_reinforce")
    cases = [(n_step, num_envs, steps) for n_step in n_steps for num_envs, steps in configurations]
    # each pass's effect in a row: all on, vectorized loops off, running gradient sums on (off by default
    # without a memory budget: it trades batching for memory that follows n, not T)
    variants = (("timerl torch", "torch", {}), ("timerl torch (no vectorize)", "torch", {"vectorize": False}),
                ("timerl torch (running sums)", "torch", {"incrementalize": True}), ("timerl jax", "jax", {}))
    rows: dict = {}
    for case in cases:
        n_step, num_envs, steps = case
        samples: dict = {name: ([], []) for name in ("eager PyTorch",) + tuple(name for name, _, _ in variants)}
        compiled: dict = {}
        for name, backend, options in variants:
            stats: dict = {}
            curve = train("CartPole-v1", iterations=iterations, num_envs=num_envs, steps=steps, n_step=n_step,
                          backend=backend, compile_options=options, stats=stats)
            first = sum(row["iteration_seconds"] for row in curve[:WARM_UP])
            compiled[name] = (curve, stats["executable"])
            rows[case, name] = (stats["compile_seconds"], first, stats["peak_device_bytes"])
        eager_reinforce.train_eager(iterations=1, num_envs=num_envs, steps=steps, n_step=n_step)  # warm-up
        for _ in range(rounds):
            seconds, cpu_seconds = [], []
            eager_reinforce.train_eager(iterations=iterations, num_envs=num_envs, steps=steps, n_step=n_step,
                                        seconds=seconds, cpu_seconds=cpu_seconds)
            eager_rows = [{"iteration_seconds": w, "iteration_cpu_seconds": c} for w, c in zip(seconds, cpu_seconds)]
            runs = [("eager PyTorch", eager_rows)]
            for name, _, _ in variants:
                curve, executable = compiled[name]
                executable.execute()  # the sink appends this run's rows to the same curve
                runs.append((name, curve))
            for name, run_rows in runs:
                wall, cpu = _after_first(run_rows, iterations)
                samples[name][0].extend(wall)
                samples[name][1].extend(cpu)
        medians = {name: (statistics.median(wall), statistics.median(cpu)) for name, (wall, cpu) in samples.items()}
        rows[case] = medians
    print(f"Seconds per iteration: the median over {rounds} rounds of {iterations - 1} iterations each (after each "
          "round's first), eager and every timerl variant in turn in each round; timerl's warm-up run before them "
          f"({iterations} iterations, its first {WARM_UP}: the first iterations column). CPU: the same iterations' "
          "process time.")
    print()
    print("| returns | envs x steps | implementation | compile s | first iterations s | median s / iteration | "
          "vs eager | CPU vs eager | peak device bytes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for case in cases:
        n_step, num_envs, steps = case
        label = f"| {'Monte Carlo' if n_step is None else f'{n_step}-step'} | {num_envs} x {steps} |"
        eager_wall, eager_cpu = rows[case]["eager PyTorch"]
        print(f"{label} eager PyTorch | - | - | {eager_wall:.3f} | 1.00x | 1.00x | - |")
        for name, _, _ in variants:
            compile_seconds, first, peak = rows[case, name]
            wall, cpu = rows[case][name]
            print(f"{label} {name} | {compile_seconds:.2f} | {first:.2f} | {wall:.3f} | {wall / eager_wall:.2f}x | "
                  f"{cpu / eager_cpu:.2f}x | {peak} |")


PASS_ROWS = {  # the switches that can change each backend's REINFORCE (`timerl.options.CompileOptions`)
    "torch": ("contributions", "algebra", "cse", "dce", "fusion", "per_iteration_fusion", "vectorize", "matmul_add",
              "donation", "prefetch_draws"),
    "jax": ("contributions", "algebra", "cse", "dce", "fusion", "per_iteration_fusion", "vectorize", "scan_loops",
            "jit_groups"),
}


def bench_passes(iterations: int, backends: tuple[str, ...] = ("torch", "jax"), num_envs: int = 16,
                 steps: int = 200) -> None:
    """Each compile switch's effect on REINFORCE (Monte Carlo, gymnasium CartPole): compile seconds, the first
    iterations (they pay jax's XLA compiles) and the median seconds per iteration after them, with every switch at
    its default and with each one off, plus running sums on (off by default). Ratios are against the defaults row
    of the same backend, measured in this run."""
    import torch

    from algorithms.reinforce import train

    torch.set_num_threads(1)
    print(f"Seconds per iteration: the median of {iterations} iterations after {WARM_UP} warm-up iterations")
    print()
    print("| backend | compile options | compile s | isl s | first iterations s | median s / iteration | "
          "vs defaults | live PDG nodes |")
    print("|---|---|---|---|---|---|---|---|")
    for backend in backends:
        variants = [("defaults", CompileOptions()), ("incrementalize on", CompileOptions(incrementalize=True))] + [
            (f"{name} off", CompileOptions(**{name: False})) for name in PASS_ROWS[backend]]
        baseline = None
        for label, options in variants:
            stats: dict = {}
            curve = train("CartPole-v1", iterations=iterations + WARM_UP, num_envs=num_envs, steps=steps,
                          backend=backend, compile_options={"options": options}, stats=stats)
            first, per_iteration = _warm_up_and_rest(curve)
            baseline = per_iteration if baseline is None else baseline
            executable = stats["executable"]
            isl = executable.stats["compile_phases"].get("schedule: isl", 0.0)
            print(f"| {backend} | {label} | {stats['compile_seconds']:.2f} | {isl:.2f} | "
                  f"{first:.2f} | {per_iteration:.3f} | {per_iteration / baseline:.2f}x | "
                  f"{len(executable.graph.nodes)} |")


def bench_rt_cartpole(iterations: int, num_envs: int = 64, steps: int = 100) -> None:
    """timerl jax with the RT CartPole (a whole iteration without host callbacks) against the hand-written
    `lax.scan` REINFORCE of benchmarks/jax_scan_reinforce.py, same sizes, measured in this run."""
    scan = _load("jax_scan_reinforce")
    baseline = scan.train_scan(iterations=4 * iterations, num_envs=num_envs, steps=steps)
    print("| envs x steps | implementation | first iteration s | s / iteration | vs lax.scan | last iteration s |")
    print("|---|---|---|---|---|---|")
    print(f"| {num_envs} x {steps} | jax lax.scan, one jit per iteration | - | {baseline:.4f} | 1.00x | - |")
    for name, options in (("timerl jax", {}), ("timerl jax, scan_loops=False", {"scan_loops": False})):
        first, seconds, last = scan.timerl_seconds_per_iteration("jax", iterations, num_envs, steps,
                                                                 compile_options=options)
        print(f"| {num_envs} x {steps} | {name} | {first:.2f} | {seconds:.4f} | {seconds / baseline:.2f}x | "
              f"{last:.2f} |")


def plot_reinforce_memory(out: str, iterations: int, steps: int, n_step: int | None, backend: str,
                          pixels: int | None = None, device_memory: int | None = None) -> None:
    """Run a small REINFORCE and draw its memory timeline next to its schedule. ``pixels``: on 3 x pixels x
    pixels frames (`algorithms.pixel_cartpole`, 2 envs); ``device_memory``: with that budget and swapping."""
    from algorithms.reinforce import train
    from timerl.memplot import plot_memory

    kept: dict = {}
    options: dict = {"vectorize": False}
    if device_memory is not None:
        options.update(device_memory=device_memory, swap=True)
    env, num_envs, env_options, frames = "CartPole-v1", 4, None, ""
    if pixels is not None:
        env, num_envs, env_options = "algorithms.pixel_cartpole:PixelCartPole-v0", 2, {"size": pixels}
        frames = f", 3x{pixels}x{pixels}"
    train(env, iterations=iterations, num_envs=num_envs, steps=steps, n_step=n_step, backend=backend,
          stats=kept, compile_options=options, env_options=env_options)
    returns = "Monte Carlo" if n_step is None else f"{n_step}-step"
    budget = "" if device_memory is None else f", {device_memory / 1e6:g} MB, swap=True"
    plot_memory(kept["executable"], out, title=f"{returns}{frames}, {iterations} x {steps} steps, {backend}{budget}")
    print(f"wrote {out}: peak device {kept['peak_device_bytes']} bytes")


def bench_window_memory() -> None:
    """Peak device bytes of the window program at growing ``T`` (target: flat from T = 64 to 1024 within 1.5x)."""
    ratios = _load("window_memory").main([])
    print()
    print("target " + ("met" if all(ratio <= 1.5 for _, ratio in ratios) else "not met") + ": largest ratio "
          f"{max(ratio for _, ratio in ratios):.2f}")


def bench_ppo(iterations: int, quick: bool) -> None:
    """PPO's seconds per iteration and peak memory, one parameter swept at a time (benchmarks/ppo_sweep.py)."""
    _load("ppo_sweep").main(["--out", "ppo_sweep", "--iterations", str(iterations)] + (["--quick"] if quick else []))


def device_line() -> str:
    """Where the benchmarks' torch values and jax arrays live (the torch backend's rule: CUDA where torch sees a
    GPU; jax's default device)."""
    import jax  # noqa: PLC0415 (seconds to import: only for the bench, after its arguments are read)
    import torch  # noqa: PLC0415

    where = f"torch on {torch.cuda.get_device_name(0)} (CUDA)" if torch.cuda.is_available() else "torch on the CPU"
    kind = jax.default_backend()
    return f"{where}, jax on " + ("the CPU" if kind == "cpu" else f"{jax.devices()[0].device_kind} ({kind})")


class _Tee(io.StringIO):
    """Collects what a benchmark prints and passes it on, so a long run still shows progress."""

    def __init__(self, stream) -> None:
        super().__init__()
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(text)
        return super().write(text)


def section(name: str, title: str, command: str, run, *args, write: bool = True,
            path: pathlib.Path | None = None) -> None:
    """Run one benchmark and write what it prints into section ``name`` of docs/benchmarks.md, or of ``path``
    (`benchmarks.report.write_section`: stamped with the machine, commit, date and ``command``)."""
    print(f"## {title}")
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        run(*args)
    print()
    if write:
        report = _load("report")
        report.write_section(name, title, f"{DEVICE[0]}\n\n{tee.getvalue()}", command, path or report.DOCS)


DEVICE = [""]  # the device line of this run, set by `main` before the first section


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    commands = parser.add_subparsers(dest="command", required=True)
    bench = commands.add_parser("bench", help="benchmarks against baselines measured in the same run; the tables "
                                              "are written into docs/benchmarks.md")
    bench.add_argument("--iterations", type=int, default=5, help="timed iterations per row (REINFORCE: medians)")
    bench.add_argument("--quick", action="store_true", help="16 envs x 200 steps, Monte Carlo only")
    bench.add_argument("--no-write", dest="write", action="store_false",
                       help="print the tables only; leave docs/benchmarks.md as it is")
    bench.add_argument("--all-sizes", action="store_true", help="zoo: every size of each algorithm, not the first")
    bench.add_argument("suite", nargs="?", default="all", choices=("all", "ppo", "passes", "memory", "zoo"),
                       help="zoo: every algorithm of benchmarks/zoo, timerl torch and jax against its eager twin; "
                            "ppo: the PPO sweep (paper Fig. 9) against eager PyTorch, PNGs under ppo_sweep/; "
                            "passes: REINFORCE with each compile switch off; memory: the window program and the "
                            "large-observation experiment (paper Fig. 10, 11)")
    plot = commands.add_parser("plot-memory", help="draw REINFORCE's memory timeline next to its schedule (PNG)")
    plot.add_argument("--out", default="memory.png")
    plot.add_argument("--iterations", type=int, default=3)
    plot.add_argument("--steps", type=int, default=50)
    plot.add_argument("--n-step", type=int, default=None)
    plot.add_argument("--backend", default="torch", choices=("torch", "jax"))
    plot.add_argument("--pixels", type=int, default=None, help="image observations, 3 x PIXELS x PIXELS")
    plot.add_argument("--device-memory", type=int, default=None, help="a budget in bytes, with swap=True")
    args = parser.parse_args(argv)
    if args.command == "plot-memory":
        plot_reinforce_memory(args.out, args.iterations, args.steps, args.n_step, args.backend, args.pixels,
                              args.device_memory)
        return
    DEVICE[0] = f"Device: {device_line()}"
    print(DEVICE[0])
    print()
    quick = " --quick" if args.quick else ""
    sizes = " --all-sizes" if args.all_sizes else ""
    command = f"timerl bench {args.suite}{quick}{sizes} --iterations {args.iterations}"
    write = args.write

    def run(name: str, title: str, function, *function_args) -> None:
        section(name, title, command, function, *function_args, write=write)

    if args.suite == "zoo":
        run("zoo", "The algorithm zoo against eager PyTorch twins", _load("zoo_bench").main, args.iterations,
            args.all_sizes)
        return
    if args.suite == "ppo":
        run("ppo-sweep", "PPO: one parameter at a time against eager PyTorch (paper Fig. 9)", bench_ppo,
            args.iterations, args.quick)
        return
    if args.suite == "passes":
        run("passes", "Each compile switch's effect on REINFORCE (Monte Carlo, 16 envs x 200 steps)", bench_passes,
            args.iterations, ("torch",) if args.quick else ("torch", "jax"))
        return
    if args.suite == "memory":
        run("window-memory", "Memory: the window program g = y[t:min(t+4, T)].sum(0)", bench_window_memory)
        run("large-observations", "Large observations: pixel REINFORCE under a 10 MB device budget "
            "(paper Fig. 10, 11)", _load("large_observations").main, ["--sizes", "32", "64"] if args.quick else [])
        return
    run("program50", "Scheduler: a 48-op program over (b, i, t)", bench_program50)
    run("long-recurrence", "A long recurrence: a running sum over 100,000 steps on the reference interpreter",
        bench_long_recurrence)
    configurations = [(16, 200)] if args.quick else [(16, 200), (64, 100)]
    run("reinforce", "REINFORCE against eager PyTorch", bench_reinforce, args.iterations, configurations,
        (None,) if args.quick else (None, 8))
    run("reinforce-rt-jax", "REINFORCE with the RT CartPole (simulator='rt') on jax against a lax.scan",
        bench_rt_cartpole, args.iterations)
    run("passes", "Each compile switch's effect on REINFORCE (Monte Carlo, 16 envs x 200 steps)", bench_passes,
        args.iterations, ("torch",) if args.quick else ("torch", "jax"))
    run("window-memory", "Memory: the window program g = y[t:min(t+4, T)].sum(0)", bench_window_memory)
    print("The MMapGame baselines have their own benchmark: python -m algorithms.mmap bench")


if __name__ == "__main__":
    main()
