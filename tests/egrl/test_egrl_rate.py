"""The learner's update rate: with several gradient steps per generation the udf spends evaluations only on a
generation's first step and feeds the others from the replay buffer."""

from __future__ import annotations

import numpy as np
import pytest
from test_egrl_chip import three_layers

from algorithms.egrl.chip import Chip
from algorithms.egrl.evaluate import Evaluator
from algorithms.egrl.learners import Settings, _Driver, learner_iterations


def test_steps_per_generation_reuses_the_replay_between_generations():
    settings = Settings(budget=100, population=4, steps_per_generation=3)
    evaluator = Evaluator(Chip(three_layers(), noise=0.0), settings.budget)
    driver = _Driver("pg", evaluator, None, settings, np.random.default_rng(0), None)
    logits = np.zeros((3, 2, 3))
    used = []
    for iteration in range(7):
        actions, rewards = driver(iteration, logits, {})
        assert actions.shape == (settings.sac.batch, 3, 2) and rewards.shape == (settings.sac.batch,)
        used.append(evaluator.used)
    # PG alone: 4 rollouts at iterations 0, 3 and 6, none between
    assert used == [4, 4, 4, 8, 8, 8, 12]
    assert driver.replay.count == 12


def test_learner_iterations_and_settings_checks():
    assert learner_iterations(Settings(budget=4000, generations_per_step=5)) == 40
    # about one gradient step per evaluation: 20 per generation of 20 rollouts (EGRL's are 21 evaluations)
    assert learner_iterations(Settings(budget=4000, steps_per_generation=20)) == 4000
    with pytest.raises(ValueError):
        Settings(generations_per_step=2, steps_per_generation=2)
    with pytest.raises(ValueError):
        Settings(steps_per_generation=0)
