"""REINFORCE (Williams, 1992) as recurrent tensors: the TimeRL paper's Alg. 1, with Monte Carlo returns or,
with ``--n-step N``, n-step returns (paper §8.4). The two differ in one line, the window of rewards that a
return reads: ``r[i, t:T]`` (wait for the end of the iteration) or ``r[i, t:min(t + n, T)]`` (a sliding
window, so learning at step ``t`` can start as soon as step ``t + n`` exists).

    python -m algorithms.reinforce --iterations 100 --n-step 8 --backend reference

Returns never cross an episode end: an episode that ends inside the window (``terminated``, which also marks
time-limit truncation) stops the sum there; the next observation already belongs to a new episode. The
n-step return is truncated without bootstrapping (no value function), and episodes still running when an
iteration ends are cut there: both keep the algorithm a plain policy gradient.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from tqdm import tqdm

import timerl as trl
from timerl.runlog import IterationClock, RunLog


def discounted_returns(rewards: trl.RecurrentTensor, ends: trl.RecurrentTensor, gamma: float) -> trl.RecurrentTensor:
    """``sum_k gamma**k * rewards[k]`` over a window (dim 0), up to and including the first episode end: one
    reverse scan over the steps (`discounted_sum` with ``until=``), no window padded to ``T``."""
    return rewards.discounted_sum(gamma, until=ends)


def train(env_name: str = "CartPole-v1", iterations: int = 100, num_envs: int = 16, steps: int = 500,
          n_step: int | None = None, gamma: float = 0.99, lr: float = 1e-2, hidden: int = 64, seed: int = 0,
          baseline: bool = True, backend: str = "reference", progress: bool = False,
          print_schedule: bool = False, simulator: str = "gymnasium", compile_options: dict | None = None,
          stats: dict | None = None, logdir: str | None = None, env_options: dict | None = None
          ) -> list[dict[str, Any]]:
    """Run REINFORCE; returns the learning curve, one dict per iteration (see `iteration_summary`), with
    the seconds each iteration took; ``logdir``: also write it as CSV and TensorBoard events. ``env_options``:
    keywords of the environment (``size=`` of `algorithms.pixel_cartpole`). Image observations (three
    dimensions) go through an 8 x 8 grid of patch embeddings (`trl.nn.PatchEmbedding`) before the MLP."""
    ctx = trl.Context("i t")  # i: training iteration, t: environment step
    i, t = ctx.dims
    I, T = ctx.bounds
    env = trl.rl.make_env(env_name, num_envs=num_envs, seed=seed, simulator=simulator, **(env_options or {}))
    curve: list[dict[str, Any]] = []
    bar = tqdm(total=iterations, desc=f"REINFORCE {env_name}", disable=not progress)
    run_log = None if logdir is None else RunLog(logdir, f"reinforce_{env_name}_{backend}_{seed}")
    clock = IterationClock(run_log, num_envs * steps)

    with ctx:
        if len(env.observation_shape) == 3:
            encoder = trl.nn.PatchEmbedding(env.observation_shape, env.observation_shape[1] // 8, PATCH_FEATURES,
                                            domain=(i,))
            head = trl.nn.MLP([encoder.n_out, hidden, hidden, env.num_actions], activation="tanh", domain=(i,))
            policy = _Encoded(encoder, head)
        else:
            policy = trl.nn.MLP([int(np.prod(env.observation_shape)), hidden, hidden, env.num_actions],
                                activation="tanh", domain=(i,))

        # Acting
        o = trl.placeholder((num_envs, *env.observation_shape), domain=(i, t))
        o[i, 0] = env.reset(domain=(i,))
        pi = trl.distributions.Categorical(logits=policy(o))
        a = pi.sample()
        o[i, t + 1], r, terminated = env.step(a)

        # Learning
        end = T if n_step is None else trl.min(t + n_step, T)  # the one line that differs
        g = discounted_returns(r[i, t:end], terminated[i, t:end], gamma)
        if baseline:  # the mean return of the batch of environments at the same step
            g = g - g.mean()
        loss = -(pi.log_prob(a) * g.detach()).mean()
        loss.backward()
        trl.optim.Adam(policy.parameters(), lr=lr).step()

        # Logging: every iteration's rewards and episode ends, (2, T, num_envs)
        def log(point: dict, value: Any) -> None:
            curve.append(clock.complete(iteration_summary(point["i"], value[0], value[1])))
            bar.set_postfix(mean_length=f"{curve[-1]['mean_length']:.1f}", refresh=False)
            bar.update(1)

        trl.stack([r[i, 0:T], terminated[i, 0:T].astype("float32")]).sink(log)

    started = time.perf_counter()
    executable = ctx.compile(bounds={I: iterations, T: steps}, backend=backend, seed=seed,
                             **(compile_options or {}))
    if print_schedule:
        print(executable.schedule)
    clock.start(time.perf_counter() - started)
    try:
        executable.execute()
    finally:
        clock.close()
    if stats is not None:  # for benchmarks and tools: seconds, peak memory, the executable itself
        stats.update(executable.stats, executable=executable)
    bar.close()
    return curve


PATCH_FEATURES = 4  # features per patch of an image observation


class _Encoded(trl.nn.Module):
    """``head(tanh(encoder(x)))``: a policy on image observations."""

    def __init__(self, encoder: trl.nn.Module, head: trl.nn.Module) -> None:
        self.encoder, self.head = encoder, head

    def __call__(self, x: trl.RecurrentTensor) -> trl.RecurrentTensor:
        return self.head(self.encoder(x).tanh())

    def parameters(self) -> list[trl.RecurrentTensor]:
        return self.encoder.parameters() + self.head.parameters()


def iteration_summary(iteration: int, rewards: np.ndarray, ends: np.ndarray) -> dict[str, Any]:
    """Episodes completed within the iteration; an environment whose episode outlived the whole iteration
    (none completed) counts once with length ``T`` (censored, a lower bound)."""
    lengths, returns = trl.rl.episode_statistics(rewards, ends > 0.5)
    survivors = int((~(ends > 0.5).any(axis=0)).sum())
    steps = rewards.shape[0]
    all_lengths = np.concatenate([lengths, np.full(survivors, steps)])
    all_returns = np.concatenate([returns, rewards[:, ~(ends > 0.5).any(axis=0)].sum(axis=0)])
    return {"iteration": int(iteration), "episodes": int(lengths.size), "mean_length": float(all_lengths.mean()),
            "mean_return": float(all_returns.mean())}


def compile_and_run(ctx: trl.Context, bounds: dict, clock: IterationClock, backend: str, seed: int,
                    compile_options: dict | None, stats: dict | None) -> None:
    """Compile ``ctx`` and execute it, ``clock`` started after the compile (its first iteration's seconds exclude
    it); ``stats``, when given, receives the executable's stats and the executable itself."""
    started = time.perf_counter()
    executable = ctx.compile(bounds=bounds, backend=backend, seed=seed, **(compile_options or {}))
    clock.start(time.perf_counter() - started)
    executable.execute()
    if stats is not None:
        stats.update(executable.stats, executable=executable)


def continuing_summary(iteration: int, counted: trl.rl.RunningEpisodes, rewards: np.ndarray,
                       ends: np.ndarray) -> dict[str, Any]:
    """`iteration_summary` where episodes continue across iterations: the episodes that end within the
    iteration, counted whole (``counted`` carries the unfinished ones from iteration to iteration, which must
    come in order); an environment with no episode ending counts once with its unfinished episode's length and
    return so far (censored, a lower bound)."""
    ended = ends > 0.5
    lengths, returns = counted(rewards, ended)
    survivors = ~ended.any(axis=0)
    all_lengths = np.concatenate([lengths, counted.lengths[survivors]])
    all_returns = np.concatenate([returns, counted.returns[survivors]])
    return {"iteration": int(iteration), "episodes": int(lengths.size), "mean_length": float(all_lengths.mean()),
            "mean_return": float(all_returns.mean())}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=500, help="environment steps per iteration (T)")
    parser.add_argument("--n-step", type=int, default=None, help="n-step returns (default: Monte Carlo)")
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-baseline", dest="baseline", action="store_false",
                        help="plain returns, without subtracting the batch mean at each step")
    parser.add_argument("--backend", default="reference", choices=("reference", "torch", "jax"))
    parser.add_argument("--simulator", default="gymnasium", choices=trl.rl.SIMULATORS,
                        help="rt: the environment's dynamics as RT ops (CartPole-v1, MountainCar-v0, Acrobot-v1)")
    parser.add_argument("--print-schedule", action="store_true", help="print the loop program (torch/jax)")
    parser.add_argument("--logdir", default=None, help="write progress.csv and TensorBoard events under it")
    args = parser.parse_args(argv)
    curve = train(args.env, args.iterations, args.num_envs, args.steps, args.n_step, args.gamma, args.lr,
                  args.hidden, args.seed, args.baseline, args.backend, progress=True,
                  print_schedule=args.print_schedule, simulator=args.simulator, logdir=args.logdir)
    returns = "Monte Carlo" if args.n_step is None else f"{args.n_step}-step"
    print(f"\nREINFORCE ({returns} returns) on {args.env}, {args.num_envs} envs x {args.steps} steps, "
          f"backend {args.backend}")
    print("iteration  episodes  mean length  mean return")
    for row in curve:
        print(f"{row['iteration']:9d}  {row['episodes']:8d}  {row['mean_length']:11.1f}  {row['mean_return']:11.1f}")
    last = curve[-5:]
    print(f"mean episode length over the last {len(last)} iterations: "
          f"{np.mean([row['mean_length'] for row in last]):.1f}")
    return curve


if __name__ == "__main__":
    main()
