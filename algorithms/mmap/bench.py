"""Benchmark: every baseline on every workload, as Markdown tables shaped like the paper's Tables 2 and 3.

Per workload: buffers, game speed (moves per second of random play on one core), and per agent the
reward normalised by the largest possible saving (all-slow minus all-fast latency: the return of a game
with unlimited fast memory and free copies) and the speedup latency(heuristic) / latency(agent), the
paper's speedup against the production compiler; plus the speedup over an all-slow program.
Every mapping is checked by `check.check_mapping` before it is reported. Speedups are given twice: by the
reward's cost model, and by the event-level simulator (`simulator.py`: copies on a DMA engine with finite
bandwidth and a setup time, stalls when a copy is late), which the rewards know nothing about. Per
workload, the Pearson correlation between a game's return and its simulated speedup over all-slow, over
`CORRELATION_GAMES` random games of varied Drop rates, measures how well the reward predicts the
simulated latency (the shape of the paper's Table 5).

Budget: `budget` episodes' worth of game moves per agent (budget x buffers), the same for every search
agent, which is the paper's "same hardware budget" comparison made deterministic; or, with `seconds`, the moves
random play makes in that many CPU seconds of this process on the workload (measured first), so that every search
agent gets about that CPU time (agents that are no game players, e.g. MuZero's, turn the moves back into CPU
seconds at the same speed). Each agent's measured CPU seconds are reported (CPU time: the machine is shared, and
wall clock would count other jobs' time). Moves replayed after a
Drop-backup rewind count too; on workloads with long alias groups one game can take 20-35x its buffers.
Speed is measured first, one workload at a time, so that it is one core's speed; the agents then run in
`jobs` processes.

The game: every agent plays the same one, by default the *setup game* (`game_problem`): each copy's demand is
the DMA's setup time (`DmaSpec.latency_seconds`, 0.5 us) plus its bytes over the bandwidth
(`problem.with_copy_setup`), the game whose rewards agree with the simulator (a copy whose window covers its
demand does not stall there). Benefits, supplies and latency tables are unchanged, so rewards and cost-model
latencies are the paper's; a mapping of the setup game is valid in the bytes-only game too. ``copy_setup_seconds``
0 (the CLI's `--bytes-only`) plays the bytes-only game of `costmodel.demand_picoseconds`. Every mapping is checked in the game it was played in.

Sizes: `WORKLOADS` are the eight workloads of 131-256 buffers; `LARGE_WORKLOADS` eight of
301-5,597 buffers (paper Table 2 spans 300-9,888), where a budget that grows with the workload
(`scaled_seconds`: ``seconds`` x buffers / `SCALE_BUFFERS`, at least ``seconds``) is the fair one: a game is
as many moves as buffers, so a fixed budget would buy a large workload's agents fewer games.
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from algorithms.mmap.baselines import AGENTS
from algorithms.mmap.baselines.policies import legal_list
from algorithms.mmap.check import check_mapping
from algorithms.mmap.game import MMapGame
from algorithms.mmap.instance import available_workload_names
from algorithms.mmap.mapping import mapping_records
from algorithms.mmap.problem import Problem, build_problem, with_copy_setup
from algorithms.mmap.simulator import DmaSpec, simulate_mapping

DEFAULT_BUDGET = 100
CORRELATION_GAMES = 24
FALLBACK_WORKLOADS = ("synthetic_0_100", "synthetic_1_300", "synthetic_2_1000")
COPY_SETUP_SECONDS = DmaSpec().latency_seconds
"""The setup game's DMA setup time per copy: the simulator's (module docstring)."""
WORKLOADS = ("autoencoder_momentum", "transformer_decode", "mlp_sgd", "cnn_sgd", "rnn_cond_scan_sgd",
             "dqn_update_adam", "gru_scan_sgd", "diffusion_sample")
LARGE_WORKLOADS = ("lstm_scan_adam", "neural_ode_adam", "lstm_lm_adam", "muzero_adam", "wavenet_adam",
                   "vit_tiny_adam", "alphatensor_adam", "resnet_bottleneck_adam")
SUITES = {"small": WORKLOADS, "large": LARGE_WORKLOADS}
SCALE_BUFFERS = 300
"""`scaled_seconds`: a workload of this many buffers (or fewer) gets the base budget."""


def game_problem(name, copy_setup_seconds: float = COPY_SETUP_SECONDS) -> Problem:
    """The problem every agent plays on workload ``name``: the setup game (module docstring), or with
    ``copy_setup_seconds`` 0 the bytes-only game."""
    problem = build_problem(name)
    return with_copy_setup(problem, copy_setup_seconds) if copy_setup_seconds else problem


def scaled_seconds(seconds: float, buffers: int) -> float:
    """The budget of a workload of ``buffers`` buffers: ``seconds`` x buffers / `SCALE_BUFFERS`, at least
    ``seconds`` (the same number of games' worth of moves on every workload above `SCALE_BUFFERS`)."""
    return seconds * max(1.0, buffers / SCALE_BUFFERS)


@dataclass(frozen=True)
class AgentScore:
    reward: float
    latency: float
    seconds: float
    simulated: float
    """Latency of the mapping in the event-level simulator (microseconds)."""
    curve: list | None = None
    """A learning agent's curve (its `Result`'s ``curve``, e.g. MuZero's per self-play round), else None."""


@dataclass(frozen=True)
class WorkloadReport:
    name: str
    buffers: int
    steps_per_second: float
    all_slow_latency: float
    best_saving: float
    scores: dict
    simulated_all_slow: float
    correlation: float
    """Pearson correlation of return and simulated speedup over random games (nan if all games tie)."""
    copy_setup_seconds: float = COPY_SETUP_SECONDS
    """The game every agent played (`game_problem`): 0 is the bytes-only game."""
    budget_seconds: float | None = None
    """The budget in CPU seconds of random play when the bench ran with ``seconds`` (scaled or not), else None."""


def moves_per_second(problem: Problem, seconds: float = 1.0, seed: int = 0, clock=time.perf_counter) -> float:
    """Game moves per second of random legal play with Drop-backup (at least one whole episode); ``clock``:
    `time.process_time` for moves per CPU second of this process."""
    rng = np.random.default_rng(seed)
    moves, start = 0, clock()
    while moves == 0 or clock() - start < seconds:
        game = MMapGame(problem, drop_backup=True)
        while not game.done:
            legal = legal_list(game)
            game.play(legal[int(rng.integers(len(legal)))])
        moves += game.moves
    return moves / (clock() - start)


def score_agents(name: str, budget: int = DEFAULT_BUDGET, seed: int = 0, agents=tuple(AGENTS),
                 registry: dict | None = None, moves: int | None = None,
                 copy_setup_seconds: float = COPY_SETUP_SECONDS) -> dict:
    """Every agent's best game on one workload, all in one game (`game_problem`), each mapping checked there.
    ``registry``: agent name -> agent (default the baselines' `AGENTS`); ``moves``: the budget in game moves
    (default ``budget`` x buffers)."""
    problem = game_problem(name, copy_setup_seconds)
    registry = AGENTS if registry is None else registry
    moves = budget * problem.num_buffers if moves is None else moves
    scores = {}
    for agent in agents:
        start = time.process_time()
        result = registry[agent](problem, seed=seed, budget=moves)
        seconds = time.process_time() - start
        check_mapping(problem, result.mapping)
        scores[agent] = AgentScore(result.reward, result.latency, seconds,
                                   simulate_mapping(problem, result.mapping).latency_us, getattr(result, "curve", None))
    return scores


def score_workload(name: str, budget: int = DEFAULT_BUDGET, seed: int = 0, agents=tuple(AGENTS),
                   registry: dict | None = None, moves: int | None = None,
                   copy_setup_seconds: float = COPY_SETUP_SECONDS) -> tuple:
    """(every agent's score, the reward-latency correlation of the game's random play) on one workload."""
    return (score_agents(name, budget, seed, agents, registry, moves, copy_setup_seconds),
            reward_latency_correlation(game_problem(name, copy_setup_seconds), seed=seed))


def reward_latency_correlation(problem: Problem, games: int = CORRELATION_GAMES, seed: int = 0,
                               dma: DmaSpec = DmaSpec()) -> float:
    """Pearson correlation between the return of a game and its simulated speedup over all-slow.

    Games are random legal play where Drop, when legal, is taken with probability p (p spread over [0, 1]
    across the games, so that returns spread too); the other legal moves are uniform.
    """
    rng = np.random.default_rng(seed)
    all_slow = simulate_mapping(problem, None, dma).latency_us
    returns, speedups = [], []
    for drop_probability in np.linspace(0.0, 1.0, games):
        game = MMapGame(problem, drop_backup=True, backup_point="group")
        while not game.done:
            legal = legal_list(game)
            if 2 in legal and (len(legal) == 1 or rng.random() < drop_probability):
                game.play(2)
            else:
                moves = [action for action in legal if action != 2]
                game.play(moves[int(rng.integers(len(moves)))])
        returns.append(game.total_reward)
        records = mapping_records(game) if game.feasible else None
        speedups.append(all_slow / simulate_mapping(problem, records, dma).latency_us)
    if np.std(returns) == 0 or np.std(speedups) == 0:
        return float("nan")
    return float(np.corrcoef(returns, speedups)[0, 1])


def bench_workload(name: str, budget: int = DEFAULT_BUDGET, seed: int = 0, agents=tuple(AGENTS),
                   copy_setup_seconds: float = COPY_SETUP_SECONDS) -> WorkloadReport:
    speed = moves_per_second(game_problem(name, copy_setup_seconds), seed=seed)
    return _report(name, speed, *score_workload(name, budget, seed, agents, copy_setup_seconds=copy_setup_seconds),
                   copy_setup_seconds)


def run_bench(names=None, budget: int = DEFAULT_BUDGET, seed: int = 0, agents=tuple(AGENTS), jobs: int = 2,
              registry: dict | None = None, seconds: float | None = None,
              copy_setup_seconds: float = COPY_SETUP_SECONDS, scale: bool = False) -> list:
    """Every agent on every workload (`jobs` workloads at a time), all in one game (`game_problem`); ``seconds``:
    the budget as CPU seconds of random play (moves per CPU second of this process: on a shared machine the wall
    clock counts other jobs' time) instead of ``budget`` episodes, with ``scale`` `scaled_seconds` of it
    (module docstring)."""
    names = list(names or available_workload_names() or FALLBACK_WORKLOADS)
    problems = {name: game_problem(name, copy_setup_seconds) for name in names}
    speeds = {name: moves_per_second(problems[name], seed=seed, clock=time.process_time) for name in names}
    budgets = {name: None if seconds is None else
               scaled_seconds(seconds, problems[name].num_buffers) if scale else seconds for name in names}
    moves = {name: None if budgets[name] is None else int(budgets[name] * speeds[name]) for name in names}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {name: pool.submit(score_workload, name, budget, seed, tuple(agents), registry, moves[name],
                                     copy_setup_seconds) for name in names}
        return [_report(name, speeds[name], *futures[name].result(), copy_setup_seconds, budgets[name])
                for name in names]


def _report(name: str, speed: float, scores: dict, correlation: float,
            copy_setup_seconds: float = COPY_SETUP_SECONDS, budget_seconds: float | None = None) -> WorkloadReport:
    problem = build_problem(name)
    return WorkloadReport(name, problem.num_buffers, speed, problem.latency_all_slow,
                          problem.latency_all_slow - problem.latency_all_fast, scores,
                          simulate_mapping(problem, None).latency_us, correlation, copy_setup_seconds,
                          budget_seconds)


def markdown(reports: list, agents=tuple(AGENTS), reference: str = "heuristic") -> str:
    """Markdown tables; speedups are latency(reference agent) / latency(agent)."""
    searchers = [a for a in agents if a != reference]
    reward_head = " | ".join(f"{a} reward" for a in agents)
    speed_head = " | ".join(f"{a} vs {reference}" for a in searchers)
    slow_head = " | ".join(f"{a} vs all-slow" for a in agents)
    setups = sorted({report.copy_setup_seconds for report in reports})
    game = ("the bytes-only game (copy demand: bytes / bandwidth)" if setups == [0] else
            "the setup game (copy demand: DMA setup " + " / ".join(f"{s * 1e6:g}" for s in setups)
            + " us + bytes / bandwidth)")
    lines = [
        f"Every agent played {game}.",
        "",
        "Rewards (fraction of the largest possible latency saving) and speed:",
        "",
        f"| workload | buffers | steps/s | {reward_head} |",
        "|" + "---|" * (3 + len(agents)),
    ]
    for report in reports:
        rewards = " | ".join(f"{report.scores[a].reward / max(report.best_saving, 1e-12):.4f}" for a in agents)
        lines.append(f"| {report.name} | {report.buffers} | {report.steps_per_second:,.0f} | {rewards} |")
    tables = (("latency", "all_slow_latency", "Speedups by the reward's cost model (latency of the reference / "
               "latency of the agent; > 1 is faster):", ""),
              ("simulated", "simulated_all_slow", "Speedups by the event-level simulator (DMA copies with finite "
               "bandwidth and latency, stalls when late), and the Pearson correlation of a game's return with "
               "its simulated speedup over random games:", " reward-latency correlation |"))
    for field, all_slow, title, extra in tables:
        lines += ["", title, "", f"| workload | {speed_head} | {slow_head} |{extra}",
                  "|" + "---|" * (1 + len(searchers) + len(agents) + bool(extra))]
        for report in reports:
            base = report.scores.get(reference)
            versus = " | ".join(f"{getattr(base, field) / getattr(report.scores[a], field):.4f}" if base else "n/a"
                                for a in searchers)
            slow = " | ".join(f"{getattr(report, all_slow) / getattr(report.scores[a], field):.4f}" for a in agents)
            lines.append(f"| {report.name} | {versus} | {slow} |" + (f" {report.correlation:.3f} |" if extra else ""))
    lines += ["", "Seconds each agent took (CPU; budget: the CPU seconds of random play that its moves took):", "",
              "| workload | budget | " + " | ".join(agents) + " |", "|" + "---|" * (2 + len(agents))]
    for report in reports:
        budget = "moves" if report.budget_seconds is None else f"{report.budget_seconds:.0f}"
        lines.append(f"| {report.name} | {budget} | "
                     + " | ".join(f"{report.scores[a].seconds:.0f}" for a in agents) + " |")
    if reports and reference in agents:
        for label, field in (("cost model", "latency"), ("simulated", "simulated")):
            speedups = {a: np.array([_speedup(r, reference, a, field) for r in reports]) for a in searchers}
            means = ", ".join(f"{a} {np.mean(v):.4f}" for a, v in speedups.items())
            prod = ", ".join(f"{a} {np.mean(np.maximum(v, 1.0)):.4f}" for a, v in speedups.items())
            faster = ", ".join(f"{a} {int((v > 1).sum())}/{len(reports)}" for a, v in speedups.items())
            lines += ["", f"Mean speedup vs {reference} ({label}): {means}",
                      f"Mean 'prod' speedup vs {reference} (best of agent and {reference}, {label}): {prod}",
                      f"Workloads where the agent is faster than {reference} ({label}): {faster}"]
    if reports and "es" in agents:
        at_least = ", ".join(f"{a} {sum(r.scores[a].reward >= r.scores['es'].reward for r in reports)}/{len(reports)}"
                             for a in agents if a != "es")
        lines += ["", f"Workloads where the agent's reward >= ES's: {at_least}"]
    if reports:
        lines += ["", f"Mean reward-latency correlation: {np.nanmean([r.correlation for r in reports]):.3f}"]
    return "\n".join(lines)


def _speedup(report: WorkloadReport, reference: str, agent: str, field: str) -> float:
    """latency(reference) / latency(agent) by ``field`` ("latency": the cost model, or "simulated")."""
    return getattr(report.scores[reference], field) / getattr(report.scores[agent], field)
