"""Does learning help? One workload, a few learner steps between self-play rounds, and what the model learned.

`python -m algorithms.muzero.diagnose transformer_decode --steps 60 --lr 3e-3 --demonstrations 0` plays a round of
8 games (the first greedy and noise-free) every 20 learner steps and prints per round the greedy game's return,
its moves (Copy, NoCopy, Drop) and the round's mean and best return (fractions of the best saving); at the end,
per action over every stored position: how often it was played, its mean reward in the games, and the reward
and next-state value the trained networks predict for it (the dynamics and prediction networks run as a timerl
program on torch). It shows whether learning helps or hurts a workload's play.
"""

from __future__ import annotations

import argparse

import numpy as np

import timerl as trl
from algorithms.mmap.baselines.heuristic import heuristic_play
from algorithms.mmap.bench import game_problem
from algorithms.muzero.learner import LearnerConfig, train
from algorithms.muzero.mcts import SearchConfig
from algorithms.muzero.networks import ACTIONS, Layout, Networks, Sizes, init_weights
from algorithms.muzero.replay import Replay
from algorithms.muzero.selfplay import SearchProgram, SelfPlay, demonstration


def predictions(layout: Layout, weights: np.ndarray, features: np.ndarray) -> dict[str, np.ndarray]:
    """Per action a: the predicted reward of a and the predicted value after a, at every row of ``features``."""
    got: dict[str, np.ndarray] = {}
    ctx = trl.Context("i")
    with ctx:
        nets = Networks(trl.tensor(weights), layout)
        state = nets.representation(trl.tensor(features))
        for action in range(ACTIONS):
            following, reward = nets.dynamics(state, trl.tensor(np.full(len(features), action)))
            _, value = nets.prediction(following)
            nets.reward_of(reward).sink(lambda point, array, a=action: got.__setitem__(f"reward{a}", np.asarray(array)))
            nets.value_of(value).sink(lambda point, array, a=action: got.__setitem__(f"value{a}", np.asarray(array)))
    ctx.compile(bounds={ctx.bounds[0]: 1}, backend="torch").execute()
    return got


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m algorithms.muzero.diagnose")
    parser.add_argument("workload")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--demonstrations", type=int, default=0, help="one-hot copies of the heuristic's game")
    parser.add_argument("--min-q-range", type=float, default=1.0, help="SearchConfig.min_q_range (mctx: 1e-8)")
    args = parser.parse_args(argv)
    problem = game_problem(args.workload)  # the bench's game: the setup game
    saving = problem.latency_all_slow - problem.latency_all_fast
    initial = init_weights(Sizes(), 0)
    layout = Layout.of(initial)
    search = SearchConfig(num_simulations=16, max_depth=4, min_q_range=args.min_q_range)
    program = SearchProgram(layout, 8, search, "jax")
    selfplay = SelfPlay(problem, program, seed=0)
    replay, rng = Replay(), np.random.default_rng(0)
    for _ in range(args.demonstrations):
        replay.add(demonstration(problem, heuristic_play(problem).actions))
    current = {"weights": layout.pack(initial)}

    def play(tag: str) -> None:
        trajectories = selfplay.play(current["weights"], 1.0, greedy_games=1)
        greedy = trajectories[0]
        returns = [t.total_reward / saving for t in trajectories]
        print(f"{tag}: greedy {greedy.total_reward / saving:.3f} moves (C, N, D) "
              f"{np.bincount(greedy.actions, minlength=ACTIONS)}, mean {np.mean(returns):.3f}, best {max(returns):.3f}",
              flush=True)
        for trajectory in trajectories:
            replay.add(trajectory)

    play("initial")

    def feed(i: int) -> dict:
        if i and i % 20 == 0:
            play(f"step {i}")
        return replay.sample(16, rng)

    losses = []

    def publish(i: int, weights: np.ndarray, loss: float) -> None:
        current["weights"] = weights
        losses.append(loss)

    train(current["weights"], layout, LearnerConfig(lr=args.lr), args.steps, feed, publish, "torch", 0)
    play("final")
    print("loss every 10 steps", np.round(losses[::10], 3))
    games = replay.games
    features = np.concatenate([g["features"] for g in games])
    actions = np.concatenate([g["actions"] for g in games])
    rewards = np.concatenate([g["rewards"] for g in games])
    predicted = predictions(layout, current["weights"], features)
    for action in range(ACTIONS):
        played = actions == action
        mean = rewards[played].mean() if played.any() else float("nan")
        print(f"action {action}: played {played.sum()}, mean reward {mean:.3f}; predicted reward "
              f"{predicted[f'reward{action}'].mean():.3f}, value after it {predicted[f'value{action}'].mean():.3f}")


if __name__ == "__main__":
    main()
