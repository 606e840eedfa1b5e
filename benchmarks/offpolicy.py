"""Off-policy costs: a replay window's cost per step at two capacities, and the zoo's DQN and TD3 against their
eager twins with a 10,000-transition buffer.

    python -m benchmarks.offpolicy [--write]

Replay: a placeholder recurrence of ``ROWS`` transitions per step, the last ``C / ROWS`` steps of it read as a
window and sampled with ``index_select`` (the shape of `algorithms.dqn`'s buffer), run for ``STEPS`` steps; the
seconds per step over the last third (where the C = 100,000 window is longest) at C = 1,000 and C = 100,000.
Learners: CPU seconds per iteration, the median over the iterations after the first, torch on one thread.
``--write`` puts the tables in docs/benchmarks.md (section ``offpolicy``).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import timerl as trl
from benchmarks.report import write_section
from benchmarks.zoo import dqn, td3

ROWS, STEPS, BATCH = 50, 2400, 128
LEARNERS = {"dqn": (dqn, 4, 250, 4), "td3": (td3, 1, 1000, 3)}  # module, envs, steps, iterations


def replay_seconds_per_step(capacity: int, backend: str) -> float:
    ctx = trl.Context("t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    window = capacity // ROWS
    stamps: dict[int, float] = {}
    with ctx:
        x = trl.placeholder((ROWS, 4), domain=(t,))
        x[0] = trl.zeros((ROWS, 4))
        x[t + 1] = x[t] * 0.5 + trl.rand((ROWS, 4), domain=(t,))
        stored = (trl.min(t + 1, window) * ROWS).astype("float32")
        sample = (trl.rand((BATCH,), domain=(t,)) * stored).astype("int64")
        picked = x[trl.max(0, t - window + 1):t + 1].reshape((-1, 4)).index_select(0, sample).sum()
        with ctx.when(t % (STEPS // 3) == 0):
            picked.sink(lambda p, v: stamps.setdefault(p["t"], time.perf_counter()))
    exe = ctx.compile({T: STEPS + 1}, backend=backend)
    exe.execute()
    first, last = 2 * (STEPS // 3), STEPS
    return (stamps[last] - stamps[first]) / (last - first)


def replay_table(backends: tuple[str, ...]) -> str:
    lines = ["| backend | C = 1,000: ms per step | C = 100,000: ms per step | ratio (target <= 1.2) |",
             "|---|---|---|---|"]
    for backend in backends:
        small, large = (replay_seconds_per_step(c, backend) * 1e3 for c in (1_000, 100_000))
        lines.append(f"| {backend} | {small:.3f} | {large:.3f} | {large / small:.2f} |")
    return "\n".join(lines)


def learner_table(backends: tuple[str, ...]) -> str:
    lines = ["| learner | envs x steps | eager CPU s | " + " | ".join(f"{b} CPU s (x eager)" for b in backends)
             + " | last return eager / " + " / ".join(backends) + " |", "|---|---|---|" + "---|" * len(backends) + "---|"]
    for name, (module, envs, steps, iterations) in LEARNERS.items():
        runs = {"eager": module.run_eager(envs, steps, iterations, 0)}
        for backend in backends:
            runs[backend] = module.run_timerl(envs, steps, iterations, backend, 0)
        cpu = {k: statistics.median(v["cpu_seconds"][1:]) for k, v in runs.items()}
        cells = [f"{cpu[b]:.2f} ({cpu[b] / cpu['eager']:.2f}x)" for b in backends]
        returns = " / ".join(f"{runs[k]['returns'][-1]:.1f}" for k in ("eager", *backends))
        lines.append(f"| {name} | {envs} x {steps} | {cpu['eager']:.2f} | {' | '.join(cells)} | {returns} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write the tables into docs/benchmarks.md")
    parser.add_argument("--backends", nargs="+", default=["torch"], choices=("torch", "jax"))
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    backends = tuple(args.backends)
    body = ("Replay window, seconds per step over the last third of the run (`benchmarks/offpolicy.py`: "
            f"{ROWS} transitions a step, a batch of {BATCH} drawn with index_select):\n\n" + replay_table(backends))
    print(body, flush=True)
    learners = ("\n\nDQN (CartPole-v1) and TD3 (Pendulum-v1) with a 10,000-transition buffer against their eager "
                "twins (`benchmarks/zoo/dqn.py`, `benchmarks/zoo/td3.py`), CPU seconds per iteration, the median "
                "after the first; target: <= 0.8x eager.\n\n" + learner_table(backends))
    print(learners, flush=True)
    body += learners
    if args.write:
        write_section("offpolicy", "Off-policy: replay windows and DQN / TD3 against eager PyTorch", body,
                      "python -m benchmarks.offpolicy --write --backends " + " ".join(backends))
    return body


if __name__ == "__main__":
    main()
