"""MMap-MuZero learns: on a small workload the sampled games' mean return rises over training, above the
no-learning ablation's (the same self-play, search and learner computation at learning rate 0, `bench.VARIANTS`).

One run each, seed 0, no time budget (`seconds` far above the run: the rounds follow the learner's steps, one
every `steps_per_round`, and the temperature stays 1.0), so the runs are deterministic. The margins were chosen
from the agent's seeds 0, 2, 3 and 4 on this workload (55 buffers; 16 rounds of 8 games, then the final greedy
game): the last five sampled rounds' mean return was 0.387 / 0.376 / 0.401 / 0.385 with learning against
0.249 / 0.256 / 0.267 / 0.246 without (differences 0.119-0.139; the ablation's round means spread by about
0.025 around their mean), and 0.236 / 0.286 / 0.269 / 0.239 in the first round (rises 0.090-0.151).
MARGIN = 0.06 is half the smallest difference and two thirds of the smallest rise.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from algorithms.mmap.check import check_mapping
from algorithms.mmap.bench import COPY_SETUP_SECONDS
from algorithms.mmap.problem import build_problem, with_copy_setup
from algorithms.mmap.synthetic import synthetic_instance
from algorithms.muzero.agent import MuZeroConfig, muzero_play
from algorithms.muzero.learner import LearnerConfig

CONFIG = MuZeroConfig(games=8, iterations=300, extra_rounds=0, seed_weight=0.0, best_seed_share=0.0,
                      learner=LearnerConfig(lr=3e-3), search="puct")
"""The network's policy alone at the root (no greedy seed, no best-game seed): what rises is what the networks
learned; a constant learning rate of 3e-3 (the agent's default decays it to 2e-4), 8
games a round, one round per 20 learner steps (no `extra_rounds`: the budget here is unlimited) and the pUCT
search, as when the margins were chosen (the agent's defaults are 16 and Gumbel MuZero's search, under which
seed 0 gives 0.402 late against 0.237 without learning and 0.231 in the first round)."""
LATE = 5  # the last rounds before the final greedy game
MARGIN = 0.06


def late_mean(curve: list) -> float:
    """Mean return of the last LATE sampled rounds (the curve's last entry is the final greedy game)."""
    return float(np.mean([point["mean"] for point in curve[-LATE - 1:-1]]))


def test_trained_agents_reward_rises_above_the_no_learning_ablation():
    # the setup game, which `muzero_play` applied itself when the margins were chosen (the bench's game now)
    problem = with_copy_setup(build_problem(synthetic_instance(seed=1, num_instructions=16)), COPY_SETUP_SECONDS)
    trained = muzero_play(problem, seed=0, seconds=1e9, config=CONFIG)
    untrained = muzero_play(problem, seed=0, seconds=1e9,
                            config=dataclasses.replace(CONFIG, learner=LearnerConfig(lr=0.0)))
    check_mapping(problem, trained.result.mapping)
    # a round at every steps_per_round-th of the learner's iterations + 1 batches (i = 0 .. iterations), then
    # the final greedy game
    assert trained.rounds == untrained.rounds == CONFIG.iterations // CONFIG.steps_per_round + 2
    assert trained.curve[0]["mean"] == untrained.curve[0]["mean"]  # the same first round: the same initial weights
    assert late_mean(trained.curve) >= late_mean(untrained.curve) + MARGIN
    assert late_mean(trained.curve) >= trained.curve[0]["mean"] + MARGIN  # risen over training
    assert trained.losses[-1] < trained.losses[0]
