import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from algorithms.mmap import ENV_ID
from algorithms.mmap.check import check_mapping
from algorithms.mmap.instance import as_instance, available_workload_names
from algorithms.mmap.synthetic import synthetic_instance

SMALL = synthetic_instance(0, 25)


def test_registered_env_passes_gymnasium_checks():
    env = gymnasium.make(ENV_ID, workload=SMALL)
    check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.skipif(not available_workload_names(), reason="no parsed workloads yet")
def test_env_by_workload_name_and_by_workload_object():
    name = "mlp_sgd" if "mlp_sgd" in available_workload_names() else available_workload_names()[0]
    by_name = gymnasium.make(ENV_ID, workload=name)
    from algorithms.mmap.workloads import load_workload

    by_object = gymnasium.make(ENV_ID, workload=load_workload(name))
    named, loaded = by_name.unwrapped.problem, by_object.unwrapped.problem
    assert (named.size, named.alias_group, named.demand) == (loaded.size, loaded.alias_group, loaded.demand)
    assert (named.supply == loaded.supply).all()
    assert as_instance(name).buffers == as_instance(load_workload(name)).buffers


def play_first_legal(env):
    observation, info = env.reset(seed=0)
    total, steps, done = 0.0, 0, False
    while not done:
        assert env.observation_space.contains(observation)
        assert info["action_mask"].dtype == np.int8 and info["action_mask"].shape == (3,)
        action = int(np.flatnonzero(info["action_mask"])[0])
        observation, reward, done, truncated, info = env.step(action)
        total += reward
        steps += 1
        assert not truncated
    return total, steps, info


def test_episode_reports_mapping_and_memory_size():
    env = gymnasium.make(ENV_ID, workload=SMALL, drop_backup=True)
    total, steps, info = play_first_legal(env)
    problem = env.unwrapped.problem
    assert info["feasible"] and steps >= problem.num_buffers
    assert info["fast_memory_bytes"] == problem.fast_memory_bytes
    assert len(info["mapping"]) == problem.num_buffers
    assert {"tensor_id", "alias_id", "size", "offset", "start", "end"} <= set(info["mapping"][0])
    check_mapping(problem, info["mapping"])
    assert total == pytest.approx(problem.latency_all_slow - info["latency"])


def test_illegal_action_loses_the_game():
    env = gymnasium.make(ENV_ID, workload=SMALL)
    _, info = env.reset()
    while info["action_mask"].all():
        _, _, _, _, info = env.step(2)
    before = env.unwrapped.game.total_reward
    illegal = int(np.flatnonzero(info["action_mask"] == 0)[0])
    _, reward, done, _, info = env.step(illegal)
    assert done and not info["feasible"]
    assert reward == pytest.approx(-before)
