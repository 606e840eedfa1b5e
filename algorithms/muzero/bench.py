"""MuZero next to the baselines of `python -m algorithms.mmap bench`, at an equal CPU-time budget.

Per workload: the heuristic (one pass; the production-compiler stand-in), ES with a budget of game moves equal to
`seconds` times the workload's measured moves per CPU second of random play, and MuZero with `seconds` of this
process's CPU time, the compiles of its two programs outside it (`agent.muzero_play`). CPU time because the
machine is shared: wall clock would count other jobs' time. Every mapping is checked by `check.check_mapping`.
Reported: reward as a fraction of the largest possible saving, speedup latency(heuristic) / latency(agent), and
the paper's "prod" speedup (best of agent and heuristic, Table 3). All three play one game: the setup game by
default (`algorithms.mmap.bench.game_problem`).
"""

from __future__ import annotations

import dataclasses
import functools
import time

import numpy as np

from algorithms.mmap.baselines import AGENTS, Result
from algorithms.mmap.bench import COPY_SETUP_SECONDS, game_problem, moves_per_second
from algorithms.mmap.check import check_mapping
from algorithms.mmap.problem import Problem
from algorithms.muzero.agent import MuZeroConfig, muzero_play
from algorithms.muzero.learner import LearnerConfig

SMALL_WORKLOADS = ("autoencoder_momentum", "transformer_decode", "mlp_sgd", "cnn_sgd", "gru_scan_sgd",
                   "lstm_scan_adam")


@dataclasses.dataclass(frozen=True)
class LearnedResult(Result):
    curve: tuple = ()
    """Per self-play round: seconds, temperature, mean return and best return so far (fractions of the best
    saving)."""
    budget_seconds: float = 0.0
    """The budget, in CPU seconds of this process: what random play takes for the agent's budget of moves."""
    used_seconds: float = 0.0
    """CPU seconds used, learner steps and self-play (`agent.Outcome.seconds`)."""
    compile_seconds: float = 0.0


VARIANTS = {
    "muzero": MuZeroConfig(),
    # paper Fig. 7, learning without search: one simulation per move, so the move is the root's Gumbel-top-1
    # sample of the prior (pUCT: the prior's choice plus Dirichlet noise); value and reward learning unchanged
    "muzero_nosearch": MuZeroConfig(simulations=1),
    # search without learning: the same search, self-play and learner computation at a learning rate of 0, so
    # every search uses the initial random networks
    "muzero_nolearn": MuZeroConfig(learner=LearnerConfig(lr=0.0)),
    # MuZero's pUCT search (`MuZeroConfig.search`; the default is Gumbel MuZero's)
    "muzero_puct": MuZeroConfig(search="puct"),
    "muzero_gumbel_t": MuZeroConfig(search="gumbel", gumbel_temperature=True),  # its draws scaled by temperature
}


def play_variant(variant: str, problem: Problem, seed: int = 0, budget: int | None = None) -> LearnedResult:
    """A `VARIANTS` entry as an agent of `algorithms.mmap.bench` (``budget`` in game moves): it gets the CPU time
    random play takes for ``budget`` moves on this workload (60 s without a budget), compiles outside it."""
    seconds = 60.0 if budget is None else budget_seconds(problem, budget, seed)
    outcome = muzero_play(problem, seed=seed, seconds=seconds, config=VARIANTS[variant])
    fields = {f.name: getattr(outcome.result, f.name) for f in dataclasses.fields(Result)}
    return LearnedResult(**{**fields, "agent": variant}, curve=tuple(outcome.curve), budget_seconds=seconds,
                         used_seconds=outcome.seconds, compile_seconds=outcome.compile_seconds)


def budget_seconds(problem: Problem, moves: int, seed: int = 0) -> float:
    """CPU seconds of this process that random play takes for ``moves`` game moves on ``problem``."""
    return moves / moves_per_second(problem, seed=seed, clock=time.process_time)


MUZERO_AGENTS = {name: functools.partial(play_variant, name) for name in VARIANTS}


def bench_workload(name: str, seconds: float, seed: int = 0, config: MuZeroConfig | None = None,
                   copy_setup_seconds: float = COPY_SETUP_SECONDS) -> dict:
    """Heuristic, ES and MuZero on workload ``name``, all in one game (`algorithms.mmap.bench.game_problem`: the
    setup game by default, the bytes-only game with ``copy_setup_seconds`` 0)."""
    problem = game_problem(name, copy_setup_seconds)
    saving = problem.latency_all_slow - problem.latency_all_fast
    budget = int(seconds * moves_per_second(problem, seed=seed, clock=time.process_time))
    row = {"workload": name, "buffers": problem.num_buffers, "seconds": seconds,
           "copy_setup_seconds": copy_setup_seconds}
    for agent in ("heuristic", "es"):
        start = time.perf_counter()
        result = AGENTS[agent](problem, seed=seed, budget=budget)
        check_mapping(problem, result.mapping)
        row[agent] = {"reward": result.reward / saving, "latency": result.latency,
                      "seconds": time.perf_counter() - start}
    start = time.perf_counter()
    outcome = muzero_play(problem, seed=seed, seconds=seconds, config=config)
    check_mapping(problem, outcome.result.mapping)
    row["muzero"] = {"reward": outcome.result.reward / saving, "latency": outcome.result.latency,
                     "seconds": time.perf_counter() - start, "cpu_seconds": outcome.seconds,
                     "compile_seconds": outcome.compile_seconds, "curve": outcome.curve, "rounds": outcome.rounds,
                     "searches": outcome.searches, "losses": outcome.losses}
    return row


def markdown(rows: list[dict]) -> str:
    agents = ("heuristic", "es", "muzero")
    lines = ["| workload | buffers | " + " | ".join(f"{a} reward" for a in agents)
             + " | es s | muzero s | muzero vs heuristic | es vs heuristic | muzero prod |",
             "|" + "---|" * (2 + len(agents) + 5)]
    for row in rows:
        heuristic = row["heuristic"]["latency"]
        rewards = " | ".join(f"{row[a]['reward']:.4f}" for a in agents)
        mu, es = row["muzero"]["latency"], row["es"]["latency"]
        lines.append(f"| {row['workload']} | {row['buffers']} | {rewards} | {row['es']['seconds']:.0f} | "
                     f"{row['muzero']['seconds']:.0f} | {heuristic / mu:.4f} | {heuristic / es:.4f} | "
                     f"{heuristic / min(mu, heuristic):.4f} |")
    if rows:
        beats_es = sum(r["muzero"]["reward"] >= r["es"]["reward"] for r in rows)
        beats_heuristic = sum(r["heuristic"]["latency"] / r["muzero"]["latency"] > 1 for r in rows)
        prod = np.mean([r["heuristic"]["latency"] / min(r["muzero"]["latency"], r["heuristic"]["latency"])
                        for r in rows])
        lines += ["", f"MuZero reward >= ES on {beats_es}/{len(rows)} workloads; speedup over the heuristic > 1 on "
                      f"{beats_heuristic}/{len(rows)}; mean prod speedup {prod:.4f}."]
    return "\n".join(lines)
