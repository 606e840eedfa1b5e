"""`timerl/MMapGameRT-v0` (the RT game behind gymnasium's vector API) against one NumPy game per env."""

import gymnasium
import numpy as np

from algorithms.mmap import RT_ENV_ID
from algorithms.mmap.game import MMapGame
from algorithms.mmap.problem import build_problem
from algorithms.mmap.synthetic import synthetic_instance

WORKLOAD = synthetic_instance(0, 25)


def test_vector_env_plays_like_numpy_games_with_next_step_autoreset():
    problem = build_problem(WORKLOAD)
    num_envs = 3
    env = gymnasium.make_vec(RT_ENV_ID, num_envs=num_envs, workload=problem, drop_backup=True,
                             backend="reference", vectorization_mode="vector_entry_point")
    assert env.observation_space["action_mask"].shape == (num_envs, 3)
    games = [MMapGame(problem, drop_backup=True) for _ in range(num_envs)]
    observation, _ = env.reset(seed=0)
    rng = np.random.default_rng(0)
    restarting = np.zeros(num_envs, dtype=bool)
    episodes = 0
    for _ in range(3 * problem.num_buffers):
        want_masks = [np.zeros(3, np.int8) if restart else game.action_mask() for game, restart in
                      zip(games, restarting)]
        assert np.array_equal(observation["action_mask"], np.stack(want_masks))
        actions = np.array([rng.choice(np.flatnonzero(mask)) if mask.any() else 0 for mask in want_masks])
        observation, reward, terminated, truncated, _ = env.step(actions)
        for k, game in enumerate(games):
            if restarting[k]:
                games[k] = MMapGame(problem, drop_backup=True)
                assert reward[k] == 0.0 and not terminated[k]
                continue
            assert reward[k] == game.play(int(actions[k]))
            assert terminated[k] == game.done
        episodes += int(terminated.sum())
        restarting = terminated.copy()
        assert not truncated.any()
    assert episodes >= num_envs  # every env finished at least one game and was reset


def test_illegal_action_loses_the_game():
    problem = build_problem(WORKLOAD)
    env = gymnasium.make_vec(RT_ENV_ID, num_envs=2, workload=problem, backend="reference",
                             vectorization_mode="vector_entry_point")
    observation, _ = env.reset()
    game = MMapGame(problem)
    while observation["action_mask"][0].all():
        observation, *_ = env.step(np.array([2, 2]))
        game.play(2)
    illegal = int(np.flatnonzero(observation["action_mask"][0] == 0)[0])
    _, reward, terminated, _, _ = env.step(np.array([illegal, 2]))
    assert terminated[0] and not terminated[1]
    assert reward[0] == -game.total_reward
