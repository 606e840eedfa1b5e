"""Self-play actors: the games of a round split over `workers` actors, each with its own compiled search program.

Actor ``k`` plays its share of the round's games (the first ``games % workers`` actors one more) on its share of
the search rows (likewise; a row whose game ends starts the actor's next game: `SelfPlay.play`) with a NumPy
generator seeded from (seed, k) (actor 0 from the seed alone, so one actor plays exactly what `SelfPlay` alone
plays); only actor 0 plays the round's greedy games. The round's trajectories are the actors' in actor order, so
a run gives the same games whether its actors run one after another in this process (``ray=False``) or at the
same time as Ray actors (``ray=True``, local Ray here: `algorithms.local_ray`): the order the games are
played in is the only thing Ray changes, and nothing depends on it.
"""

from __future__ import annotations

import numpy as np
import ray

from algorithms import local_ray
from algorithms.mmap.problem import Problem
from algorithms.muzero.mcts import SearchConfig
from algorithms.muzero.networks import Layout
from algorithms.muzero.seeding import BestSeed
from algorithms.muzero.selfplay import Deadline, SearchProgram, SelfPlay, Trajectory


class Actor:
    def __init__(self, problem: Problem, layout: Layout, rows: int, config: SearchConfig, backend: str, seed: int,
                 index: int, program: SearchProgram | None = None, seed_weight: float = 0.0,
                 gumbel_temperature: bool = False):
        program = program if program is not None else SearchProgram(layout, rows, config, backend)
        self.selfplay = SelfPlay(problem, program, seed=seed if index == 0 else np.random.SeedSequence([seed, index]),
                                 seed_weight=seed_weight, gumbel_temperature=gumbel_temperature)

    def play(self, weights: np.ndarray, temperature: float, noise: bool, greedy_games: int,
             count: int | None = None, persist: bool = False, best: BestSeed | None = None,
             stagger: bool = False, deadline: Deadline | None = None) -> list[Trajectory]:
        self.selfplay.noise = noise
        return self.selfplay.play(weights, temperature, greedy_games=greedy_games, count=count, persist=persist,
                                  best=best, stagger=stagger, deadline=deadline)

    def searches(self) -> int:
        return self.selfplay.searches

    def live_rows(self) -> int:
        return self.selfplay.live_rows


class Actors:
    """`workers` actors playing one round's ``games`` games together (module docstring)."""

    def __init__(self, problem: Problem, layout: Layout, games: int, config: SearchConfig, backend: str = "torch",
                 seed: int = 0, workers: int = 1, use_ray: bool = False, program: SearchProgram | None = None,
                 seed_weight: float = 0.0, rows: int | None = None, gumbel_temperature: bool = False):
        """``rows``: search rows of all actors together (``games`` when None; fewer rows than games refill them);
        ``program``: a compiled search program of ``rows`` rows that a single local actor may use;
        ``seed_weight``, ``gumbel_temperature``: `SelfPlay`'s."""
        rows = games if rows is None else rows
        if not 1 <= workers <= min(games, rows):
            raise ValueError(f"workers must be between 1 and the games per round and search rows "
                             f"({min(games, rows)}), got {workers}")
        self.shares = [games // workers + (k < games % workers) for k in range(workers)]
        row_shares = [rows // workers + (k < rows % workers) for k in range(workers)]
        self.use_ray = use_ray
        if use_ray:
            local_ray.start(workers)
            remote = ray.remote(num_cpus=1)(Actor)
            self.actors = [remote.remote(problem, layout, share, config, backend, seed, k, None, seed_weight,
                                          gumbel_temperature)
                           for k, share in enumerate(row_shares)]
        else:
            reuse = program if workers == 1 and program is not None and program.batch == rows else None
            self.actors = [Actor(problem, layout, share, config, backend, seed, k, reuse, seed_weight,
                                 gumbel_temperature)
                           for k, share in enumerate(row_shares)]

    def play(self, weights: np.ndarray, temperature: float, noise: bool = True,
             greedy_games: int = 0, persist: bool = False, best: BestSeed | None = None, stagger: bool = False,
             deadline: Deadline | None = None) -> list[Trajectory]:
        """One round: every actor's games, in actor order; actor 0 plays the greedy ones. ``persist``: each actor's
        rows keep their games in progress between rounds; ``best``, ``stagger``, ``deadline``: `SelfPlay.play`'s
        (each actor stops at the deadline; ``at_least`` applies to actor 0 alone)."""
        if self.use_ray:
            shared = ray.put(weights)
            pending = [actor.play.remote(shared, temperature, noise, greedy_games if k == 0 else 0, share, persist,
                                         best, stagger, self._deadline(deadline, k))
                       for k, (actor, share) in enumerate(zip(self.actors, self.shares))]
            rounds = ray.get(pending)
        else:
            rounds = [actor.play(weights, temperature, noise, greedy_games if k == 0 else 0, share, persist, best,
                                 stagger, self._deadline(deadline, k))
                      for k, (actor, share) in enumerate(zip(self.actors, self.shares))]
        return [trajectory for games in rounds for trajectory in games]

    @staticmethod
    def _deadline(deadline: Deadline | None, actor: int) -> Deadline | None:
        if deadline is None or actor == 0:
            return deadline
        return Deadline(deadline.at, deadline.wall)

    def play_greedy(self, weights: np.ndarray) -> Trajectory:
        """One game without noise at temperature 0 (deterministic: a round of them would repeat it), by actor 0."""
        actor = self.actors[0]
        if self.use_ray:
            (trajectory,) = ray.get(actor.play.remote(ray.put(weights), 0.0, False, 1, 1))
        else:
            (trajectory,) = actor.play(weights, 0.0, False, 1, 1)
        return trajectory

    @property
    def searches(self) -> int:
        """Batched searches run by all actors."""
        if self.use_ray:
            return sum(ray.get([actor.searches.remote() for actor in self.actors]))
        return sum(actor.searches() for actor in self.actors)

    @property
    def live_rows(self) -> int:
        """Rows of those searches that held a live game."""
        if self.use_ray:
            return sum(ray.get([actor.live_rows.remote() for actor in self.actors]))
        return sum(actor.live_rows() for actor in self.actors)
