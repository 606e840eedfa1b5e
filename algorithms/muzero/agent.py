"""MMap-MuZero on one workload: self-play, Reanalyse and learning interleaved inside the learner program.

The learner program (learner.train) sources each iteration's batch from `_Run.feed`: every
`steps_per_round` iterations it first plays a round of `games` self-play games with the latest weights
(while the wall-clock budget lasts; then up to `extra_rounds` more where the budget has room for them besides the
rounds and steps still to come) and reanalyses stored positions, then samples the batch. The result is the
best game found, as for every search baseline of `algorithms.mmap` (ES, MCTS report their best game too),
after a final round with the last weights (where the budget has room for it): its noise-free greedy game and
`games` - 1 sampled ones at the schedule's last temperature (the sampled rows of the batch cost the search nothing
more: a search of 8 games takes about as long as one of 1).

Temperature (pUCT; Gumbel MuZero plays its search's action, `MuZeroConfig.search`): 1.0 at the start, linearly
down to 0.2 at the end of the budget (Table 6: 1.0 -> 0.2); the first
game of every round plays the most visited action (it costs no extra search: it is one row of the batch), since
the result is the best game found.

The budget: `seconds` of this process's CPU time (wall clock with Ray actors), from the first learner step to the
end of the final round, so the learner's steps, self-play, Reanalyse and the final round are inside it and the
compiles of the two programs (and jax's compile of the search at its first execution) are outside it (reported
as `Outcome.compile_seconds`). A round is played only while the budget has room for it (the longest round so
far: rounds of persisting rows come in bursts) and the learner's remaining steps at their mean cost so far, and
the final round only where the longest round still fits; every round stops searching at a deadline that leaves
the learner's remaining steps their time (before the first step is measured: 1 - `selfplay_share` of the budget),
returning the games ended by then (the first round, at least one), so a run does not overrun its budget by more
than the misestimate of its steps' cost (nor a budget too small for the learner's steps and one game). The
temperature falls over `selfplay_share` of the budget.

Before the first round the replay buffer receives `demonstrations` copies of the production heuristic's game
(`algorithms.mmap.baselines.heuristic`), reanalysed: the search's targets on the heuristic's states (these
searches run inside the budget, at the first learner step), rather than one-hot targets on its moves, which
would teach the heuristic's play where it is worse than random play. The learner's step count follows the budget
(`MuZeroConfig.learner_steps`).
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from algorithms.mmap.baselines.heuristic import heuristic_play
from algorithms.mmap.baselines.result import Result, result_of
from algorithms.mmap.problem import Problem
from algorithms.muzero.actors import Actors
from algorithms.muzero.features import FEATURES
from algorithms.muzero.learner import LearnerConfig, train
from algorithms.muzero.mcts import SearchConfig
from algorithms.muzero.networks import ACTIONS, Layout, Sizes, init_weights
from algorithms.muzero.replay import Replay
from algorithms.muzero.seeding import BestSeed, final_moves, seed_game
from algorithms.muzero.selfplay import Deadline, SearchProgram, demonstration


FIRST_TEMPERATURE, FINAL_TEMPERATURE = 1.0, 0.2  # visit-count temperature over the budget (Table 6)
PERSIST_ABOVE = 300
"""`MuZeroConfig.persistent_rows` by size: rows persist on workloads of more buffers than this (the paper's
sizes, `algorithms.mmap.bench.LARGE_WORKLOADS`: 301-5,597), not at or below it (the small suite: 131-256)."""
PERSISTING_GAMES = 8
"""Games per round where rows persist and `MuZeroConfig.games` is None (a quarter of the 32 rows)."""


@dataclasses.dataclass(frozen=True)
class MuZeroConfig:
    games: int | None = None
    """Games per self-play round; None: by the workload's size (`round_shape`)."""
    rows: int | None = None
    """Search rows (the search program's batch); None: `games`, or by the workload's size where `games` is None.
    Fewer rows than games: a row whose game ends starts the round's next game (`SelfPlay.play`), so the searches
    stay full until the round's last games end."""
    simulations: int = 16
    max_depth: int = 4
    search: str = "gumbel"
    """The search (`SearchConfig.search`): "puct" (MuZero's: actions drawn from the visit counts at the temperature, the
    visit distribution as the policy target) or "gumbel" (Gumbel MuZero's: the search's action, Gumbel noise at the
    root, the improved policy as the target). Gumbel by default: it finds better games at a budget of seconds."""
    gumbel_temperature: bool = False
    """Under "gumbel": the root's Gumbel draws scaled by the temperature schedule (1.0 -> 0.2), so the round's
    sampled games move towards the search's own choice as the budget runs out (`SelfPlay.gumbel_temperature`)."""
    min_q_range: float = 1.0
    """`SearchConfig.min_q_range` in self-play, in reward units (1% of the best saving): below it, untrained networks'
    near-equal Q values would be stretched to [0, 1] and the search would follow their noise."""
    steps_per_round: int = 20
    iterations: int | None = None
    """Learner steps; None: `steps_per_second` per second of the budget (a multiple of `steps_per_round`)."""
    steps_per_second: float = 20.0
    """Learner steps per CPU second of the budget: about a fifth of the budget for the learner, the rest for self-play,
    Reanalyse and the final round."""
    selfplay_share: float = 0.7
    reanalyse_fraction: float = 0.5
    n_step: int = 10
    learner: LearnerConfig = LearnerConfig(lr=3e-3, final_lr=2e-4, decay_steps=300)
    """Adam from 3e-3 down to the paper's 2e-4 (Table 6) by a cosine over the first 300 learner steps: at the few
    hundred steps a budget of seconds buys, 2e-4 throughout leaves the networks near their initial ones, and a constant
    3e-3 lets the best game collapse late in a run (`tests/muzero/test_muzero_training.py`)."""
    sizes: Sizes = Sizes()
    seed: int = 0
    backend: str = "torch"  # the learner program's
    search_backend: str = "jax"  # the search program's: on jax its simulation loop runs as `lax.scan`s
    workers: int = 1  # self-play actors (`actors.Actors`); more than one run on local Ray
    demonstrations: int = 1
    """Copies of the heuristic's game put in the replay buffer before the first round, reanalysed there (the
    paper's Reanalyse of demonstrations): their policy and value targets are the search's with the initial
    weights, so they teach rewards and values of the heuristic's states, not its moves; 0 for none."""

    elite_fraction: float = 0.0
    """Self-imitation: the share of each learner batch drawn from the best game found so far (`Replay.set_elite`:
    its own moves as policy targets, its exact returns as value targets); 0 for none."""

    best_seed_share: float = 1.0
    """The share of a round's games (its first ones, the greedy game among them) whose roots are seeded from the best
    game found so far (`seeding.BestSeed`) at `best_seed_weight`, so they search around the incumbent; 0: every root is
    seeded with the greedy policy's move (`seed_weight`)."""
    best_seed_weight: float = 0.8
    """How much of a best-seeded root's prior is the best game's move (`seed_weight` is the greedy-seeded roots',
    Reanalyse's and the demonstration's)."""

    mutant_share: float = 0.0
    """The share of a round's best-seeded games (never the greedy game) whose roots are seeded from a mutated copy of
    the best game, as ES perturbs its elite; 0 (the default) for none: random flips find less than the Gumbel draws
    around the incumbent."""
    mutation_rate: float = 0.1
    """A mutant's chance per buffer of another move than the best game's (`mutant`)."""
    mutate_when_stalled: bool = False
    """Mutants only in a round after one that found no better game (the incumbent's neighbourhood searched out)."""

    extra_rounds: int = 4
    """Rounds beyond one per `steps_per_round` learner steps: after a round, up to this many more while the budget has
    room for them besides the learner's remaining steps (`_Run.spare`), so cheap rounds fill the budget; 0 for none. The
    cap keeps a run finite under a budget far above it."""

    spread_extra_rounds: bool = True
    """Extra rounds only where the spare budget holds one after every scheduled round left (`_Run.extra_share`), so they
    spread over the run; off: as soon as one fits, which puts them all early."""

    seed_weight: float = 0.5
    """How much of the root's prior is the greedy one-step policy's move (`seeding.greedy_seed`) in self-play, Reanalyse
    and the final game; 0 for the network's policy alone. Seeding lifts the early rounds' games well above the untrained
    networks' own."""

    persistent_rows: bool | None = None
    """Self-play rows persist across rounds (`SelfPlay.play(persist=True)`): a round ends when `games` games have ended
    and the games in progress go on with the next round's weights, so large workloads (long games) still get several
    rounds. None: above `PERSIST_ABOVE` buffers (`persists`)."""
    staggered_starts: bool = True
    """With `persistent_rows`: the rows' first games open with spread prefixes of the greedy policy's game
    (`SelfPlay.play`'s ``stagger``), so games end at spread times from the first round on."""

    seed_first_round: bool | None = None
    """The first round's roots seeded from `seeding.seed_game` (the better of the greedy and the keep-groups one-step
    policies' games), its staggered rows opening with prefixes of that game; False: the greedy policy's move at
    `seed_weight`. None: where rows persist (large workloads), where it helps; on small ones it narrows the first
    round."""

    def seeds_first_round(self, problem: Problem) -> bool:
        """Whether the first round is seeded from `seeding.seed_game` on ``problem`` (`seed_first_round`)."""
        return self.persists(problem) if self.seed_first_round is None else self.seed_first_round

    def rounds_left(self, iterations: int, iteration: int) -> int:
        """The rounds still to come at learner step ``iteration`` of ``iterations``: the later ones of
        `steps_per_round`, and the final one."""
        return (iterations - iteration) // self.steps_per_round + 1

    def round_shape(self, problem: Problem) -> tuple[int, int]:
        """(search rows, games per round): 32 rows; 32 games a round, or `PERSISTING_GAMES` where rows persist
        (`persists`). 32 games fill the rows and give twice the rounds of 64, each after the learner's latest steps."""
        if self.games is not None:
            return (self.games if self.rows is None else self.rows), self.games
        rows = 32 if self.rows is None else self.rows
        if self.persists(problem):
            return rows, PERSISTING_GAMES
        return rows, 32

    def persists(self, problem: Problem) -> bool:
        """Whether self-play rows persist across rounds on ``problem`` (`persistent_rows`)."""
        return problem.num_buffers > PERSIST_ABOVE if self.persistent_rows is None else self.persistent_rows

    def learner_steps(self, seconds: float) -> int:
        if self.iterations is not None:
            return self.iterations
        rounds = max(1, round(seconds * self.steps_per_second / self.steps_per_round))
        return rounds * self.steps_per_round


@dataclasses.dataclass
class Outcome:
    result: Result
    curve: list  # per round: seconds, mean return of its games (fraction of the best saving), best so far
    losses: list
    rounds: int
    searches: int
    seconds: float = 0.0  # of the budget's clock, from the first learner step to the end of the final round
    compile_seconds: float = 0.0  # wall clock: compiling both programs and the search's first execution
    clock: str = "cpu"


class _Run:
    def __init__(self, problem: Problem, config: MuZeroConfig, seconds: float):
        self.problem, self.config, self.seconds = problem, config, seconds
        self.rng = np.random.default_rng(config.seed)
        initial = init_weights(config.sizes, config.seed)
        self.layout = Layout.of(initial)
        self.weights = self.layout.pack(initial)
        search_config = SearchConfig(num_simulations=config.simulations, max_depth=config.max_depth,
                                     min_q_range=config.min_q_range, search=config.search)
        started = time.perf_counter()
        rows, games = config.round_shape(problem)
        self.program = SearchProgram(self.layout, rows, search_config, config.search_backend)
        self.program.run(self.weights, np.zeros((rows, FEATURES), np.float32),
                         np.ones((rows, ACTIONS), bool), None)  # compiles jax's scans: outside the budget
        self.actors = Actors(problem, self.layout, games, search_config, config.search_backend, config.seed,
                             config.workers, use_ray=config.workers > 1, program=self.program,
                             seed_weight=config.seed_weight, rows=rows, gumbel_temperature=config.gumbel_temperature)
        self.compile_seconds = time.perf_counter() - started  # the learner's compile is added by `feed`
        self.iterations = config.learner_steps(seconds)
        self.replay = Replay(unroll=config.learner.unroll, n_step=config.n_step, discount=search_config.discount,
                             scalar_heads=self.layout.scalar_heads)
        self.saving = max(problem.latency_all_slow - problem.latency_all_fast, 1e-12)
        self.best = None
        self.stalled = False  # the last round found no better game
        self.curve, self.losses = [], []
        # the budget's clock: this process's CPU time (the machine is shared: wall clock counts other jobs' time),
        # wall clock when actors run on Ray; it starts at the first learner step, after both compiles
        self.clock = time.process_time if config.workers == 1 else time.perf_counter
        self.created = time.perf_counter()
        self.start: float | None = None
        self.round_seconds: list[float] = []
        self.longest_reanalyse = 0.0  # a round's Reanalyse runs only where the longest so far fits its deadline
        self.moves = 0

    def elapsed(self) -> float:
        return 0.0 if self.start is None else self.clock() - self.start

    def add_demonstrations(self) -> None:
        """The heuristic's game, reanalysed (its searches inside the budget), `demonstrations` times."""
        if not self.config.demonstrations:
            return
        heuristic = demonstration(self.problem, heuristic_play(self.problem).actions)
        for _ in range(self.config.demonstrations):
            self.replay.add(heuristic)
            self.replay.reanalyse_game(self.program, self.weights, len(self.replay.games) - 1, self.config.seed_weight)

    def play_round(self, temperature: float, reserve: float, final: bool = False) -> None:
        """A round of self-play (its first game noise-free and greedy) that stops searching ``reserve`` seconds
        before the budget's end (`Deadline`); the final one, with the last weights, is followed by no Reanalyse."""
        started = self.clock()
        deadline = Deadline(self.start + self.seconds - reserve, wall=self.config.workers > 1,
                            at_least=1 if self.best is None else 0)
        persist = self.config.persists(self.problem)
        trajectories = self.actors.play(self.weights, temperature, True, greedy_games=1, persist=persist,
                                        best=self.best_seed(), stagger=persist and self.config.staggered_starts,
                                        deadline=deadline)
        if not trajectories:  # stopped at the deadline before a game ended
            self.round_seconds.append(self.clock() - started)
            return
        previous = self.best
        for trajectory in trajectories:
            self.replay.add(trajectory)
            self.moves += trajectory.game.moves
            if self.best is None or trajectory.game.total_reward > self.best.game.total_reward:
                self.best = trajectory
        self.stalled = self.best is previous
        if not self.stalled and self.config.elite_fraction > 0:
            self.replay.set_elite(self.best)
        self.curve.append({"seconds": self.elapsed(), "temperature": temperature,
                           "mean": float(np.mean([t.total_reward for t in trajectories])) / self.saving,
                           "greedy": next((t.total_reward / self.saving for t in trajectories if t.greedy), None),
                           "best": self.best.game.total_reward / self.saving})
        new_positions = sum(len(t.actions) for t in trajectories)
        fraction = self.config.reanalyse_fraction
        if len(self.curve) > 1 and fraction > 0 and not final and \
                not deadline.passed(len(trajectories), self.longest_reanalyse):
            count = int(new_positions * fraction / (1.0 - fraction))
            reanalysed = self.clock()
            self.replay.reanalyse(self.program, self.weights, min(count, 4 * self.program.batch), self.rng,
                                  self.config.seed_weight)
            self.longest_reanalyse = max(self.longest_reanalyse, self.clock() - reanalysed)
        self.round_seconds.append(self.clock() - started)

    def best_seed(self) -> BestSeed | None:
        """The round's seeding from the best game so far (with mutants of it, `mutant_share`); before the first
        game, from `seeding.seed_game` where `MuZeroConfig.seeds_first_round`, else None; None with
        `best_seed_share` 0."""
        if self.config.best_seed_share <= 0:
            return None
        if self.best is None:
            if not self.config.seeds_first_round(self.problem):
                return None
            played = seed_game(self.problem)  # inside the budget: 0.04-0.4 CPU s on the large suite
            return BestSeed(final_moves(self.problem, played), self.config.best_seed_share,
                            self.config.best_seed_weight, played=tuple(played))
        moves = final_moves(self.problem, self.best.played)
        games = self.config.round_shape(self.problem)[1]
        share = self.config.mutant_share if self.stalled or not self.config.mutate_when_stalled else 0.0
        count = min(round(share * games), games - 1)
        mutants = tuple(mutant(moves, self.config.mutation_rate, self.rng) for _ in range(count))
        return BestSeed(moves, self.config.best_seed_share, self.config.best_seed_weight, mutants)

    def feed(self, iteration: int) -> dict:
        """Iteration i's batch; first a self-play round every `steps_per_round` iterations while the budget has
        room for it and the learner's remaining steps (at their mean cost so far)."""
        if self.start is None:
            self.start = self.clock()
            self.compile_seconds += time.perf_counter() - self.created
            self.add_demonstrations()
        if iteration % self.config.steps_per_round == 0:
            elapsed = self.elapsed()
            rounds = sum(self.round_seconds)
            if iteration:
                reserve = (elapsed - rounds) / iteration * (self.iterations - iteration)  # the steps left
            else:
                reserve = (1.0 - self.config.selfplay_share) * self.seconds
            if not self.curve or elapsed + self.longest_round() + reserve <= self.seconds:
                self.play_round(self.temperature(), reserve)
                for _ in range(self.config.extra_rounds if iteration else 0):
                    if self.spare(iteration, reserve) < self.longest_round() * self.extra_share(iteration):
                        break
                    self.play_round(self.temperature(), reserve)
        batch = self.config.learner.batch
        return self.replay.sample(batch, self.rng, elite=round(batch * self.config.elite_fraction))

    def temperature(self) -> float:
        """The schedule's temperature now: FIRST_TEMPERATURE down to FINAL_TEMPERATURE over `selfplay_share`."""
        progress = min(self.elapsed() / max(self.config.selfplay_share * self.seconds, 1e-9), 1.0)
        return FIRST_TEMPERATURE - (FIRST_TEMPERATURE - FINAL_TEMPERATURE) * progress

    def spare(self, iteration: int, steps: float) -> float:
        """The budget left over at ``iteration`` once the learner's remaining steps (``steps`` seconds) and a
        longest round for each of the remaining rounds (the later ones of `steps_per_round`, the final one) have
        their time (`MuZeroConfig.extra_rounds`)."""
        rounds = self.config.rounds_left(self.iterations, iteration)
        return self.seconds - self.elapsed() - steps - rounds * self.longest_round()

    def extra_share(self, iteration: int) -> int:
        """How many longest rounds the spare budget must hold for an extra round now: 1 (extras as soon as they
        fit: early), or with `spread_extra_rounds` one for each scheduled round left (an extra at each of them)."""
        return self.config.rounds_left(self.iterations, iteration) if self.config.spread_extra_rounds else 1

    def longest_round(self) -> float:
        """The longest round so far, on the budget's clock (0 before the first)."""
        return max(self.round_seconds, default=0.0)

    def publish(self, iteration: int, weights: np.ndarray, loss: float) -> None:
        self.weights = weights
        self.losses.append(loss)


def mutant(moves: dict, rate: float, rng: np.random.Generator) -> dict:
    """A copy of ``moves`` (position -> action) where each position's action is, with probability ``rate``, one of
    the other actions, uniformly (`seed_of` falls back to the greedy policy's move where it is illegal)."""
    changed = rng.random(len(moves)) < rate
    shifts = rng.integers(1, ACTIONS, len(moves))
    return {position: (action + int(shift)) % ACTIONS if change else action
            for (position, action), change, shift in zip(moves.items(), changed, shifts)}


def muzero_play(problem: Problem, seed: int = 0, seconds: float = 60.0,
                config: MuZeroConfig | None = None) -> Outcome:
    """MuZero on ``problem`` as given: the game is the caller's choice, as for every agent of `algorithms.mmap`
    (the bench's default is the setup game, `algorithms.mmap.bench.game_problem`)."""
    config = dataclasses.replace(config or MuZeroConfig(), seed=seed)
    run = _Run(problem, config, seconds)
    train(run.weights, run.layout, config.learner, run.iterations, run.feed, run.publish, config.backend, seed)
    if run.elapsed() + run.longest_round() <= seconds:  # the final round only where the budget has room for it
        run.play_round(FINAL_TEMPERATURE, 0.0, final=True)
    best = run.best
    return Outcome(result_of("muzero", best.game, best.played, run.moves), run.curve, run.losses,
                   len(run.curve), run.actors.searches, run.elapsed(), run.compile_seconds,
                   "cpu" if config.workers == 1 else "wall")
