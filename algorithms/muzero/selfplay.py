"""Acting: a batch of MMapGames played by MuZero's search, one compiled search program for all moves.

`SearchProgram` is the timerl program of one batched search: the representation and prediction networks at
the root, `mcts.search` over the simulation dimension with the dynamics and prediction networks
inside, and sinks for the root visit counts and the root's search value (and, under Gumbel MuZero,
``SearchConfig.search = "gumbel"``, the root's improved policy and chosen action). Its inputs (the flat weights, the
games' features, legal masks and Dirichlet draws) are sources that read the host's current values, so the
program is compiled once and executed once per move of the batch.

`SelfPlay` is the host side (the irregular part: games of different lengths, Drop-backup rewinds): it keeps
B games (one per search row; a row whose game ends starts the round's next game), advances each to its next
decision (a buffer with more than one legal action; a forced move is played at once and its reward added to the
decision's), searches all B at once, and plays each game's action drawn from its visit counts with a temperature
(MuZero: pi(a) ~ N(a)^(1/T)); under Gumbel MuZero each game plays the search's action (the Gumbel draws are the
exploration; the greedy games search without them) and learns the improved policy. Dirichlet or Gumbel noise and
the action draws come from a NumPy generator seeded per `SelfPlay`, since a compiled program's own draws repeat at
every execution. Games run with Drop-backup, rewinding to the offending group's opening (`backup_point="group"`,
as every baseline of `algorithms.mmap` plays; see game.py).
"""

from __future__ import annotations

import dataclasses
import time
from typing import NamedTuple

import numpy as np

import timerl as trl
from timerl.rt import functional as F
from algorithms.mmap.game import MMapGame
from algorithms.mmap.problem import Problem
from algorithms.muzero.features import FEATURES, Encoder
from algorithms.muzero.mcts import Root, SearchConfig, Step, gumbel_search_root, search_root
from algorithms.muzero.networks import ACTIONS, Layout, Networks
from algorithms.muzero.seeding import BestSeed, greedy_game, greedy_seed, seed_of
from algorithms.muzero.support import REWARD_SCALE


class Searched(NamedTuple):
    """One batched search's outcome per game."""

    visits: np.ndarray  # (B, A) root visit counts
    value: np.ndarray  # (B,) root search value
    policy: np.ndarray  # (B, A) the policy target: the visit distribution (pUCT), the improved policy (gumbel)
    action: np.ndarray | None  # (B,) the action to play (gumbel); None: drawn from the visits (pUCT, `choose`)


class SearchProgram:
    def __init__(self, layout: Layout, batch: int, config: SearchConfig, backend: str = "torch"):
        self.layout, self.batch, self.config = layout, batch, config
        self.inputs: dict[str, np.ndarray] = {}
        self.outputs: dict[str, np.ndarray] = {}
        ctx = trl.Context("s")
        (s,) = ctx.dims
        (S,) = ctx.bounds
        with ctx:
            weights = trl.source(self._input("weights"), (layout.size,), "float32")
            features = trl.source(self._input("features"), (batch, FEATURES), "float32")
            invalid = trl.source(self._input("invalid"), (batch, ACTIONS), "bool")
            noise = trl.source(self._input("noise"), (batch, ACTIONS), "float32")
            noise_fraction = trl.source(self._input("noise_fraction"), (batch, 1), "float32")  # per game
            seed = trl.source(self._input("seed"), (batch, ACTIONS), "float32")  # a distribution per game
            seed_weight = trl.source(self._input("seed_weight"), (batch, 1), "float32")
            nets = Networks(weights, layout)
            state = nets.representation(features)
            logits, value = nets.prediction(state)
            # the root's prior: the policy mixed with the seed distribution (a baseline's move), then noise
            mixed = F.softmax(logits, dim=-1) * (1.0 - seed_weight) + seed * seed_weight
            policy = F.log(F.maximum(mixed, float(np.finfo(np.float32).tiny)))

            def recurrent_fn(embedding, action):
                following, reward = nets.dynamics(embedding, action)
                next_policy, next_value = nets.prediction(following)
                return Step(nets.reward_of(reward), next_policy, nets.value_of(next_value), following)

            root = Root(policy, nets.value_of(value), state)
            if config.search == "gumbel":  # ``noise``: Gumbel draws, scaled per game by ``noise_fraction``
                outcome = gumbel_search_root(root, recurrent_fn, invalid, noise, config, s, noise_fraction)
                visits, root_value = outcome.visits, outcome.value
                outcome.policy.sink(self._output("policy"))
                outcome.action.sink(self._output("action"))
            else:
                visits, root_value = search_root(root, recurrent_fn, invalid, noise, config, s, noise_fraction)
            visits.sink(self._output("visits"))
            root_value.sink(self._output("value"))
        self.executable = ctx.compile(bounds={S: config.num_simulations}, backend=backend)

    def _input(self, name):
        return lambda point: self.inputs[name]

    def _output(self, name):
        return lambda point, value: self.outputs.__setitem__(name, np.asarray(value).copy())

    def run(self, weights: np.ndarray, features: np.ndarray, legal: np.ndarray, noise: np.ndarray | None,
            exact: int | np.ndarray = 0, seed: np.ndarray | None = None, seed_weight: float | np.ndarray = 0.0):
        """(root visit counts (B, A), root search values (B,)): `search`'s first two."""
        searched = self.search(weights, features, legal, noise, exact, seed, seed_weight)
        return searched.visits, searched.value

    def search(self, weights: np.ndarray, features: np.ndarray, legal: np.ndarray, noise: np.ndarray | None,
               exact: int | np.ndarray = 0, seed: np.ndarray | None = None,
               seed_weight: float | np.ndarray = 0.0) -> Searched:
        """The search of B games. ``noise`` (B, A): Dirichlet draws (pUCT) or standard Gumbel draws (gumbel); None
        searches without noise, and so do the first ``exact`` games (or the rows where ``exact``, a (B,) bool mask,
        holds). ``seed`` (B, A): a distribution over actions per game (e.g. one-hot on a baseline's move) that the
        root's prior mixes in with ``seed_weight`` (one for all games or (B,), one per game), before the noise;
        None: none."""
        gumbel = self.config.search == "gumbel"
        scale = 1.0 if gumbel else self.config.dirichlet_fraction
        fraction = np.full((self.batch, 1), 0.0 if noise is None else scale, np.float32)
        if isinstance(exact, np.ndarray):
            fraction[exact] = 0.0
        else:
            fraction[:exact] = 0.0
        self.inputs.update(weights=weights.astype(np.float32), features=features.astype(np.float32),
                           invalid=~legal, noise=np.zeros(legal.shape, np.float32) if noise is None else
                           noise.astype(np.float32), noise_fraction=fraction,
                           seed=np.zeros(legal.shape, np.float32) if seed is None else seed.astype(np.float32),
                           seed_weight=np.zeros((self.batch, 1), np.float32) if seed is None else
                           np.broadcast_to(np.asarray(seed_weight, np.float32).reshape(-1, 1), (self.batch, 1)))
        self.executable.execute()
        visits = self.outputs["visits"]
        if gumbel:
            return Searched(visits, self.outputs["value"], self.outputs["policy"], self.outputs["action"])
        return Searched(visits, self.outputs["value"], visits / np.maximum(visits.sum(-1, keepdims=True), 1.0), None)


@dataclasses.dataclass
class Trajectory:
    """One game's decisions: features, legal masks, actions, rewards (scaled, forced moves included),
    search policies (visit distributions) and root search values."""

    features: list = dataclasses.field(default_factory=list)
    legal: list = dataclasses.field(default_factory=list)
    actions: list = dataclasses.field(default_factory=list)
    rewards: list = dataclasses.field(default_factory=list)
    policies: list = dataclasses.field(default_factory=list)
    values: list = dataclasses.field(default_factory=list)
    seeds: list = dataclasses.field(default_factory=list)
    """The root's seed distribution at each decision (`SearchProgram.run`), kept for Reanalyse."""
    total_reward: float = 0.0
    game: MMapGame | None = None
    played: list = dataclasses.field(default_factory=list)
    """Every move in play order (forced ones too), for reporting the mapping."""
    greedy: bool = False
    """Searched without noise at temperature 0 (`SelfPlay.play`'s ``greedy_games``)."""
    seeded: bool = False
    """Its roots seeded from the best game (`BestSeed`) while a `play` call passes one."""
    seed_moves: dict | None = None
    """The moves its roots are seeded from (`BestSeed.moves_of`: the best game's or a mutant's)."""
    opening: int = 0
    """Moves of a reference game replayed at its start without a search (`SelfPlay.play`'s ``stagger``)."""
    opening_reward: float = 0.0
    """The (scaled) reward of the moves before its first decision (an opening, forced moves): ``rewards`` start at
    the first decision, so ``sum(rewards) + opening_reward`` is the game's return, scaled."""


class Rows:
    """The search rows' games in progress (`SelfPlay.play`): per row its trajectory (None: free), the rewards of
    forced moves since its last decision, and the map of position -> the last action played there
    (`SelfPlay.replay_backups`)."""

    def __init__(self, batch: int):
        self.games: list[Trajectory | None] = [None] * batch
        self.pending = [0.0] * batch
        self.last_moves: list[dict] = [{} for _ in range(batch)]


@dataclasses.dataclass(frozen=True)
class Deadline:
    """When a `SelfPlay.play` call stops searching: at ``at`` on this process's CPU clock (``wall``: on the wall
    clock, the same in every process of the machine, as Ray actors need), once ``at_least`` games have ended."""

    at: float
    wall: bool = False
    at_least: int = 0

    def now(self) -> float:
        return time.perf_counter() if self.wall else time.process_time()

    def passed(self, ended: int, ahead: float = 0.0) -> bool:
        """Whether the call stops, ``ended`` games having ended: ``ahead`` seconds from now (a search step's cost)
        are past the deadline."""
        return ended >= self.at_least and self.now() + ahead >= self.at


class SelfPlay:
    def __init__(self, problem: Problem, program: SearchProgram, seed: int = 0, noise: bool = True,
                 seed_weight: float = 0.0, replay_backups: bool = True, gumbel_temperature: bool = False):
        """``seed_weight``: how much of the root's prior is the greedy policy's move (`greedy_seed`), 0 for none;
        ``replay_backups``: after a Drop-backup rewind, replay each undone move (where still legal) without a
        search, as forced moves (`_forced_moves`): the rewind drops one alias group and nothing else changes for
        the moves in between, which the search already chose. Without it a round's searches follow its games'
        rewinds: on vit_tiny_adam (2,494 buffers) a sampled game plays 27,000-38,000 moves (40-54 rewinds, each
        replaying hundreds of decisions), the greedy game 5,236; one round of 16 games took 33,067 searches.
        ``gumbel_temperature``: under Gumbel MuZero, the root's Gumbel draws scaled by `play`'s temperature (as
        argmax(T g + logits) draws from softmax(logits / T)); False: unscaled (the paper's)."""
        self.problem, self.program, self.noise, self.seed_weight = problem, program, noise, seed_weight
        self.replay_backups = replay_backups
        self.gumbel_temperature = gumbel_temperature
        self.encoder = Encoder(problem)
        self.rng = np.random.default_rng(seed)
        self.reward_scale = REWARD_SCALE / max(problem.latency_all_slow - problem.latency_all_fast, 1e-12)
        self.searches = 0
        self.live_rows = 0  # rows of those searches that held a live game (the rest repeat one)
        self.longest_step = 0.0  # the longest search step under a `Deadline` so far (its clock), for the next one
        self.rows: Rows | None = None  # games in progress between persisting calls of `play`

    def play(self, weights: np.ndarray, temperature: float, greedy_games: int = 0,
             count: int | None = None, persist: bool = False, best: BestSeed | None = None,
             stagger: bool = False, deadline: Deadline | None = None) -> list[Trajectory]:
        """``count`` (B when None) complete games, in the order they start; ``best``: the first of them (`BestSeed`'s
        share of ``count``) search with roots seeded from the best game (`Trajectory.seeded`). Temperature 0 plays
        the most visited action, as do the first `greedy_games` games, which are searched without noise (each round
        then plays the current networks' own choice). The B rows of the search batch start the first B games; a row
        whose game ends starts the next one while fewer than ``count`` have started, so every search is full until
        the last games end (Drop-backup makes games of different lengths). Rows without a live game repeat a live game's
        features (encoded once). With ``count`` <= B no row is refilled: the games of one batch, as before.

        ``persist``: the rows outlive the call (`Rows`). A row whose game ends always starts a new one, and the
        call returns as soon as ``count`` games have ended (at least ``count``: those ending at the same search),
        in the order they ended; the games still in progress go on at the next persisting call, with its weights
        and temperature. So no round ends with a tail of rows idle while its last games finish, and a round can
        be shorter than one game per row (at large sizes a round of B games took up to 41 CPU s). The first
        `greedy_games` games started in the call are the greedy ones (`Trajectory.greedy`); they may end in a
        later call.

        ``stagger`` (with ``persist``): when the rows start afresh, row r's first game (unless a greedy one) opens
        by replaying, without a search, the first r / B of ``best.played`` where given (the first round's seed
        game), else of the greedy one-step policy's game (`greedy_game`), so the rows' first games end at spread
        times and so do all later ones: a round of ``count`` < B games then
        ends after about ``count`` / B of a game's searches from the first call on (rows started together end
        together, and the first round waits for most of them). ``deadline``: the call stops searching once it has
        passed or the longest search step so far (the search and the moves up to the next decision, over this
        and earlier calls) would pass it (`Deadline`), and returns the games ended by then (those in progress go on
        at the next persisting call; without ``persist`` they are dropped)."""
        batch = self.program.batch
        count = batch if count is None else count
        opening = None
        if persist:
            if self.rows is None or len(self.rows.games) != batch:
                self.rows = Rows(batch)
                if stagger:
                    opening = list(best.played) if best is not None and best.played else greedy_game(self.problem)
            rows = self.rows
        else:
            rows = Rows(batch)
        started: list[Trajectory] = []
        finished: list[Trajectory] = []
        seeded_games = 0 if best is None else best.games(count)

        def start(row: int) -> None:
            trajectory = Trajectory(game=MMapGame(self.problem, drop_backup=True, backup_point="group"),
                                    greedy=len(started) < greedy_games, seeded=len(started) < seeded_games,
                                    seed_moves=None if best is None else best.moves_of(len(started), count))
            started.append(trajectory)
            rows.games[row], rows.pending[row], rows.last_moves[row] = trajectory, 0.0, {}
            if opening is not None and not trajectory.greedy:
                rows.pending[row] = self._open(trajectory, opening[:len(opening) * row // batch],
                                               rows.last_moves[row])

        def credit(row: int) -> None:  # the pending forced moves' rewards to the last decision (or the opening)
            trajectory = rows.games[row]
            if trajectory.rewards:
                trajectory.rewards[-1] += rows.pending[row]
            else:
                trajectory.opening_reward += rows.pending[row]
            rows.pending[row] = 0.0

        def more() -> bool:  # whether a free row starts a game
            return len(finished) < count if persist else len(started) < count

        for row in range(batch):
            if rows.games[row] is None and (persist or len(started) < count):
                start(row)
        opening = None  # only the rows' first games open with it
        last = None if deadline is None else deadline.now()
        while True:
            for row in range(batch):
                while rows.games[row] is not None:
                    trajectory = rows.games[row]
                    rows.pending[row] += self._forced_moves(trajectory.game, trajectory, rows.last_moves[row])
                    if not trajectory.game.done:
                        break
                    credit(row)
                    trajectory.total_reward = trajectory.game.total_reward
                    finished.append(trajectory)
                    rows.games[row] = None
                    if more():
                        start(row)
            live = [row for row in range(batch) if rows.games[row] is not None]
            if deadline is not None:
                self.longest_step, last = max(self.longest_step, deadline.now() - last), deadline.now()
                if deadline.passed(len(finished), self.longest_step):
                    break
            if not live or (persist and len(finished) >= count):
                break
            games = [rows.games[row].game for row in live]
            features, legal = self.encoder.encode_many(games)
            index = np.zeros(batch, dtype=np.int64)  # each row of the batch: its game's place in `live`
            index[live] = np.arange(len(live))
            features, legal = features[index], legal[index]
            noise = self._noise(batch, temperature) if self.noise else None
            seeds, seed_weight = None, self.seed_weight
            if self.seed_weight > 0 or best is not None:
                seeded = [best is not None and rows.games[row].seeded for row in live]
                seeds = np.stack([seed_of(game, rows.games[row].seed_moves if on else None)
                                  for game, row, on in zip(games, live, seeded)])[index]
                seed_weight = np.array([best.weight if on else self.seed_weight for on in seeded])[index]
            greedy = np.array([rows.games[row] is not None and rows.games[row].greedy for row in range(batch)])
            searched = self.program.search(weights, features, legal, noise, exact=greedy, seed=seeds,
                                           seed_weight=seed_weight)
            self.searches += 1
            self.live_rows += len(live)
            if searched.action is not None:
                actions = searched.action[live]
            else:
                actions = choose(searched.visits[live], legal[live], np.where(greedy[live], 0.0, temperature),
                                 self.rng)
            for row, action in zip(live, actions.tolist()):
                trajectory = rows.games[row]
                credit(row)
                trajectory.features.append(features[row])
                trajectory.legal.append(legal[row])
                trajectory.actions.append(action)
                trajectory.policies.append(searched.policy[row])
                trajectory.values.append(float(searched.value[row]))
                if seeds is not None:
                    trajectory.seeds.append(seeds[row])
                rows.last_moves[row][trajectory.game.position] = action
                trajectory.rewards.append(trajectory.game.play(action) * self.reward_scale)
                trajectory.played.append(action)
        return finished if persist else [trajectory for trajectory in started if trajectory.game.done]

    def _noise(self, batch: int, temperature: float) -> np.ndarray:
        """The root's noise draws for a search: Dirichlet (pUCT) or Gumbel (gumbel; `gumbel_temperature`)."""
        if self.program.config.search == "gumbel":
            return self.rng.gumbel(size=(batch, ACTIONS)) * (temperature if self.gumbel_temperature else 1.0)
        return self.rng.dirichlet([self.program.config.dirichlet_alpha] * ACTIONS, size=batch)

    def _open(self, trajectory: Trajectory, moves: list[int], last_moves: dict) -> float:
        """Replay ``moves`` from the start of ``trajectory``'s game without a search (a staggered start); their
        rewards."""
        reward = 0.0
        for action in moves:
            last_moves[trajectory.game.position] = action
            reward += trajectory.game.play(action) * self.reward_scale
            trajectory.played.append(action)
        trajectory.opening = len(moves)
        return reward

    def _forced_moves(self, game: MMapGame, trajectory: Trajectory, last_moves: dict) -> float:
        """Play the moves that need no search: those with one legal action, and (`replay_backups`) a position
        that a Drop-backup rewind undid, where the action played there last is still legal; their rewards."""
        reward = 0.0
        while not game.done:
            action = last_moves.get(game.position, -1) if self.replay_backups else -1
            if action < 0 or not game.is_legal(action):  # a legal replay is also the move when it is the only one
                legal = game.legal_actions()
                if sum(legal) != 1:
                    break
                action = legal.index(True)
            last_moves[game.position] = action
            reward += game.play(action) * self.reward_scale
            trajectory.played.append(action)
        return reward


def choose(visits: np.ndarray, legal: np.ndarray, temperatures: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One action per row of visit counts (n, A): the most visited legal one at temperature 0, else drawn with
    pi(a) ~ N(a)^(1/T) (a row without legal visits: uniform over its legal actions). The drawn rows take one
    uniform number each, in row order, and invert the cumulative distribution as `Generator.choice` does, so the
    actions are those of `rng.choice(A, p=pi)` row by row (`test_choose_draws_as_rng_choice_row_by_row`)."""
    counts = np.where(legal, visits, 0.0).astype(np.float64)
    empty = counts.sum(axis=1) == 0
    counts[empty] = legal[empty]
    actions = np.argmax(counts, axis=1)
    drawn = temperatures > 0
    if drawn.any():
        weights = counts[drawn] ** (1.0 / temperatures[drawn, None])
        cumulative = np.cumsum(weights / weights.sum(axis=1, keepdims=True), axis=1)
        cumulative /= cumulative[:, -1:]
        uniform = rng.random(int(drawn.sum()))
        actions[drawn] = (cumulative <= uniform[:, None]).sum(axis=1)
    return actions


def demonstration(problem: Problem, actions) -> Trajectory:
    """Another agent's game (its moves in play order, e.g. the heuristic's) as a trajectory to learn from: at each
    decision (a move with more than one legal action) the policy target is the move played and the root value 0
    (the value target is then the n-step return alone); forced moves add their rewards to the decision before."""
    encoder = Encoder(problem)
    reward_scale = REWARD_SCALE / max(problem.latency_all_slow - problem.latency_all_fast, 1e-12)
    game = MMapGame(problem, drop_backup=True, backup_point="group")
    trajectory = Trajectory(game=game)
    for action in actions:
        if sum(game.legal_actions()) > 1:
            features, legal = encoder.encode(game)
            trajectory.features.append(features)
            trajectory.legal.append(legal)
            trajectory.actions.append(int(action))
            trajectory.policies.append(np.eye(ACTIONS, dtype=np.float32)[int(action)])
            trajectory.values.append(0.0)
            trajectory.seeds.append(greedy_seed(game))
            trajectory.rewards.append(0.0)
        reward = game.play(int(action)) * reward_scale
        if trajectory.rewards:
            trajectory.rewards[-1] += reward
        trajectory.played.append(int(action))
    trajectory.total_reward = game.total_reward
    return trajectory
