"""PPO data-parallel over 1, 2 and 4 jax devices (``compile_options={"devices": N}``, the environments' axis
split): on the CPU's virtual devices, a correctness and overhead figure (the devices share the same cores, so no
speedup is expected): each run's losses against one device's, and its seconds per iteration.

    python -m benchmarks.devices --num-envs 512 --steps 250 --iterations 3 --devices 1 2 4

Each run happens in a child process started with ``XLA_FLAGS=--xla_force_host_platform_device_count=N`` and
``JAX_PLATFORMS=cpu`` (jax reads them only before its first import)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from benchmarks import report

LOSSES = ("policy_loss", "value_loss", "entropy", "approx_kl")


def measure(devices: int, num_envs: int, steps: int, iterations: int) -> dict:
    """One PPO run on ``devices`` devices (in this process: jax must see that many)."""
    from algorithms import ppo  # imports jax: after the child's XLA_FLAGS are set

    stats: dict = {}
    curve = ppo.train(iterations=iterations, num_envs=num_envs, steps=steps, backend="jax",
                      compile_options={"devices": devices}, stats=stats)
    seconds = [row["iteration_seconds"] for row in curve[1:]] or [curve[0]["iteration_seconds"]]
    return {"devices": devices, "losses": [[row[name] for name in LOSSES] for row in curve],
            "returns": [row["mean_return"] for row in curve], "compile": curve[0]["compile_seconds"],
            "iteration": statistics.median(seconds), "placed": (stats.get("devices") or {}).get("placed")}


def run_child(devices: int, num_envs: int, steps: int, iterations: int) -> dict:
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={max(devices, 1)}",
           "JAX_PLATFORMS": "cpu"}  # the CPU's virtual devices, also on a machine with a GPU
    done = subprocess.run([sys.executable, "-m", "benchmarks.devices", "--child", "--devices", str(devices),
                           "--num-envs", str(num_envs), "--steps", str(steps), "--iterations", str(iterations)],
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"devices={devices} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(runs: list[dict], num_envs: int, steps: int, iterations: int) -> str:
    one = runs[0]
    lines = [f"PPO on CartPole-v1, {num_envs} environments x {steps} steps, {iterations} iterations, jax on "
             "the CPU's virtual devices (one process; the devices share its cores, so this is an overhead figure, "
             "not a speedup). 1 device is the one-device jax backend (no mesh); seconds per iteration are the "
             "median after the first iteration.", "",
             "| devices | compile s | s / iteration | max rel. loss difference vs 1 device | same returns |",
             "|---:|---:|---:|---:|:---:|"]
    for run in runs:
        diff = max((abs(a - b) / max(abs(b), 1e-6) for got, want in zip(run["losses"], one["losses"])
                    for a, b in zip(got, want)), default=0.0)
        lines.append(f"| {run['devices']} | {run['compile']:.1f} | {run['iteration']:.2f} | {diff:.1e} | "
                     f"{'yes' if run['returns'] == one['returns'] else 'no'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, default=512)
    parser.add_argument("--steps", type=int, default=250)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-write", action="store_true", help="print the table, leave docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.devices[0], args.num_envs, args.steps, args.iterations)))
        return
    runs = [run_child(n, args.num_envs, args.steps, args.iterations) for n in sorted(set(args.devices))]
    body = table(runs, args.num_envs, args.steps, args.iterations)
    print(body)
    if not args.no_write:
        command = ("python -m benchmarks.devices " + " ".join(sys.argv[1:] if argv is None else argv)).strip()
        report.write_section("devices", "PPO data-parallel over virtual devices", body, command)


if __name__ == "__main__":
    main()
