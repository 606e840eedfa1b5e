"""Self-play actors (`algorithms.muzero.actors`): two actors on local Ray play the same games as the same two
actors one after another in this process, and one actor plays what `SelfPlay` alone plays."""

from __future__ import annotations

import numpy as np
import ray

from algorithms.mmap.problem import build_problem
from algorithms.mmap.synthetic import synthetic_instance
from algorithms.muzero.actors import Actors
from algorithms.muzero.mcts import SearchConfig
from algorithms.muzero.networks import Layout, Sizes, init_weights
from algorithms.muzero.selfplay import SearchProgram, SelfPlay
from tests.ray_cluster import local_ray  # noqa: F401  (the fixture)

SIZES = Sizes(hidden=8, image=4, trunk=8, head=8)
CONFIG = SearchConfig(num_simulations=4, max_depth=2)


def games_of(trajectories) -> list:
    return [(t.played, t.actions, np.stack(t.policies).round(6).tolist(), t.total_reward) for t in trajectories]


def test_two_ray_actors_play_what_two_local_actors_play(local_ray):
    problem = build_problem(synthetic_instance(seed=1, num_instructions=8))
    weights = init_weights(SIZES, 0)
    layout = Layout.of(weights)
    packed = layout.pack(weights)
    local = Actors(problem, layout, 3, CONFIG, seed=5, workers=2)
    want = [games_of(local.play(packed, 1.0, greedy_games=1)), games_of(local.play(packed, 0.5))]
    remote = Actors(problem, layout, 3, CONFIG, seed=5, workers=2, use_ray=True)
    got = [games_of(remote.play(packed, 1.0, greedy_games=1)), games_of(remote.play(packed, 0.5))]
    assert remote.searches == local.searches > 0
    for actor in remote.actors:
        ray.kill(actor)  # the session's Ray stays up for the other tests
    assert got == want
    assert len(want[0]) == 3 and want[0][1] != want[0][2]  # the actors' games differ (their seeds do)
    program = SearchProgram(layout, 3, CONFIG)
    alone = SelfPlay(problem, program, seed=5).play(packed, 1.0, greedy_games=1)
    one = Actors(problem, layout, 3, CONFIG, seed=5, program=program)
    assert games_of(one.play(packed, 1.0, greedy_games=1)) == games_of(alone)
