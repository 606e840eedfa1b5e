"""PPO (Schulman et al., 2017, "Proximal Policy Optimization Algorithms") as recurrent tensors, in the shape
of CleanRL's ppo.py: a rollout of ``T`` steps in ``N`` environments with the current policy, advantages by
GAE, then ``E`` epochs of ``M`` minibatch Adam updates of the clipped surrogate, the value loss and an
entropy bonus.

    python -m algorithms.ppo --iterations 100 --backend torch --logdir runs

The program has four dimensions: ``i`` (iteration), ``t`` (environment step), ``e`` (epoch) and ``m``
(minibatch). The parameters live over ``(i, e, m)`` and the optimizer steps them in that order, like the
nested loops of the paper's Algorithm 1; the rollout of iteration ``i`` acts with the weights at
``(i, 0, 0)``. GAE is the paper's backward recurrence, a placeholder defined from its own next step.

The environments are reset once and keep running across iterations, as in CleanRL: iteration ``i + 1`` starts
from the observation iteration ``i`` ended on, and the last step of an iteration bootstraps from the value of
that observation. Discrete actions use a Categorical policy,
continuous ones a Normal with a state-independent log-std, clipped to the action space when taken.
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import gymnasium
import numpy as np
from tqdm import tqdm

import timerl as trl
from algorithms.reinforce import continuing_summary
from timerl.runlog import IterationClock, RunLog


def train(env_name: str = "CartPole-v1", iterations: int = 100, num_envs: int = 4, steps: int = 128,
          epochs: int = 4, minibatches: int = 4, gamma: float = 0.99, gae_lambda: float = 0.95,
          clip_coef: float = 0.2, ent_coef: float = 0.01, vf_coef: float = 0.5, lr: float = 2.5e-4,
          max_grad_norm: float = 0.5, hidden: int = 64, norm_adv: bool = True, seed: int = 0,
          backend: str = "torch", logdir: str | None = None, progress: bool = False,
          print_schedule: bool = False, simulator: str = "gymnasium", compile_options: dict | None = None,
          stats: dict | None = None, obs_padding: int = 0, reward_scale: float = 1.0) -> list[dict[str, Any]]:
    """Run PPO; returns the learning curve, one dict per iteration (returns, losses, seconds). ``stats``
    receives the executable's statistics (compile and execute seconds, peak memory); ``obs_padding``
    appends that many zeros to every observation (the benchmark's observation-size sweep); ``reward_scale``
    multiplies the rewards the critic learns (Pendulum's are in the hundreds; logs show the real ones)."""
    batch = num_envs * steps
    if batch % minibatches:
        raise trl.TimeRLError(f"num_envs * steps = {batch} does not split into {minibatches} minibatches")
    minibatch = batch // minibatches
    ctx = trl.Context("i t e m")  # iteration, environment step, epoch, minibatch
    i, t, e, m = ctx.dims
    I, T, E, M = ctx.bounds
    env = trl.rl.make_env(env_name, num_envs=num_envs, seed=seed, simulator=simulator)
    obs_size = int(np.prod(env.observation_shape)) + obs_padding
    curve: list[dict[str, Any]] = []

    with ctx:
        updates = (i, e, m)
        actor = trl.nn.MLP([obs_size, hidden, hidden, env.num_actions or int(np.prod(env.action_shape))],
                           domain=updates, gains=(math.sqrt(2), 0.01), flat=True)
        critic = trl.nn.MLP([obs_size, hidden, hidden, 1], domain=updates, gains=(math.sqrt(2), 1.0), flat=True)
        log_std = None if env.discrete else trl.param(np.zeros(env.action_shape, np.float32), domain=updates)

        def policy(output, log_std):
            """The action distribution given the actor's output (logits, or the Normal's mean)."""
            if env.discrete:
                return trl.distributions.Categorical(logits=output)
            return trl.distributions.Normal(output, log_std.exp())

        # Rollout: N environments for T steps with the weights the iteration starts with
        acting_actor, acting_critic = actor.frozen(i, 0, 0), critic.frozen(i, 0, 0)
        acting_log_std = None if log_std is None else log_std[i, 0, 0].detach()
        observed = trl.placeholder((num_envs, *env.observation_shape), domain=(i, t))
        observed[0, 0] = env.reset()  # once: episodes continue from one iteration to the next
        padding = trl.zeros((num_envs, obs_padding))  # one constant for every padded observation
        o = observed if not obs_padding else trl.cat([observed, padding], -1)
        acting = acting_actor(o)
        a = policy(acting, acting_log_std).sample()
        next_o, r, done = env.step(a if env.discrete else a.clip(*_action_bounds(env_name)))
        observed[i, t + 1] = next_o
        observed[i + 1, 0] = next_o[i, T - 1]  # the next iteration starts where this one ended
        value = acting_critic(o).squeeze(-1)

        # Generalized advantage estimation; the last step bootstraps from the observation it leads to
        last_o = next_o[i, T - 1]
        if obs_padding:
            last_o = trl.cat([last_o, padding], -1)
        critic_reward = r if reward_scale == 1.0 else r * reward_scale  # no per-step op when unscaled
        adv = gae(critic_reward, done, value, acting_critic(last_o).squeeze(-1), gamma, gae_lambda)
        ret = adv + value

        # Minibatches: a fresh permutation of the iteration's T * N samples per epoch, one slice per update
        sample = trl.source(lambda p: _minibatch(seed, p["i"], p["e"], p["m"], minibatches, batch), (minibatch,),
                            "int64", (i, e, m))

        def mb(x):
            """The minibatch of update ``(i, e, m)`` of a per-step quantity over ``(i, t)``."""
            flat = x[i, 0:T].reshape((batch, *x.shape[1:]))
            return flat.index_select(0, sample)

        # The loss at every update (i, e, m). The acting policy's log-probabilities of the minibatch's actions
        # come from its stored outputs, one computation for the minibatch instead of one per step
        mb_obs, mb_a = mb(o), mb(a)
        old_logp = _joint(policy(mb(acting), acting_log_std).log_prob(mb_a), env.discrete)
        new_pi = policy(actor(mb_obs), log_std)
        new_logp = _joint(new_pi.log_prob(mb_a), env.discrete)
        entropy = _joint(new_pi.entropy(), env.discrete)
        new_value = critic(mb_obs).squeeze(-1)
        loss, diagnostics = ppo_loss(new_logp, old_logp, mb(adv), new_value, mb(ret), entropy, clip_coef, ent_coef,
                                     vf_coef, norm_adv)
        loss.backward()
        params = actor.parameters() + critic.parameters() + ([] if log_std is None else [log_std])
        trl.optim.Adam(params, lr=lr, eps=1e-5, max_grad_norm=max_grad_norm).step()

        # Logging: the iteration's rewards and episode ends, and the losses of its last update
        losses = trl.stack(list(diagnostics.values())).detach()
        episodes = trl.stack([r[i, 0:T], done[i, 0:T].astype("float32")])
        run_log = None if logdir is None else RunLog(logdir, f"ppo_{env_name}_{backend}_{seed}")
        log = _Logger(curve, iterations, IterationClock(run_log, batch), progress, f"PPO {env_name}", num_envs)
        episodes.sink(log.episodes)
        losses[i, E - 1, M - 1].sink(log.losses)

    started = time.perf_counter()
    executable = ctx.compile(bounds={I: iterations, T: steps, E: epochs, M: minibatches}, backend=backend,
                             seed=seed, **(compile_options or {}))
    compile_seconds = time.perf_counter() - started
    if print_schedule:
        print(executable.schedule)
    log.start(compile_seconds)
    try:
        executable.execute()
    finally:
        log.close()
    if stats is not None:
        stats.update(executable.stats, executable=executable)
    curve.sort(key=lambda row: row["iteration"])
    return curve


def gae(r: trl.RecurrentTensor, done: trl.RecurrentTensor, value: trl.RecurrentTensor,
        last_value: trl.RecurrentTensor, gamma: float, lam: float) -> trl.RecurrentTensor:
    """Generalized advantage estimation over ``(i, t)``, as the backward recurrence of the GAE paper:
    ``adv[t] = delta[t] + gamma * lam * (1 - done[t]) * adv[t + 1]``, with
    ``delta[t] = r[t] + gamma * (1 - done[t]) * V(o[t + 1]) - V(o[t])``. ``value`` is ``V(o[t])``;
    ``last_value`` (over ``i``) is the value of the observation after the last step."""
    ctx = value.ctx
    i, t = value.domain
    T = ctx.bound_of(t)
    next_value = trl.placeholder(value.shape, value.dtype, domain=(i, t))
    next_value[i, T - 1] = last_value
    next_value[i, t - 1] = value
    not_done = 1.0 - done.astype(value.dtype)
    delta = r + gamma * not_done * next_value - value
    adv = trl.placeholder(value.shape, value.dtype, domain=(i, t))
    adv[i, T - 1] = delta[i, T - 1]
    adv[i, t - 1] = delta[i, t - 1] + gamma * lam * not_done[i, t - 1] * adv[i, t]
    return adv


def ppo_loss(new_logp, old_logp, adv, new_value, ret, entropy, clip_coef: float, ent_coef: float,
             vf_coef: float, norm_adv: bool = True):
    """The PPO objective on one minibatch (CleanRL's, without value clipping): the clipped surrogate, half
    the squared value error, an entropy bonus. Returns the loss and the statistics CleanRL logs."""
    if norm_adv:
        adv = (adv - adv.mean()) / (_std(adv) + 1e-8)
    log_ratio = new_logp - old_logp
    ratio = log_ratio.exp()
    pg_loss = trl.rt.functional.maximum(-adv * ratio, -adv * ratio.clip(1 - clip_coef, 1 + clip_coef)).mean()
    v_loss = 0.5 * ((new_value - ret) ** 2).mean()
    entropy = entropy.mean()
    loss = pg_loss - ent_coef * entropy + vf_coef * v_loss
    stats = {"policy_loss": pg_loss, "value_loss": v_loss, "entropy": entropy,
             "approx_kl": ((ratio - 1) - log_ratio).mean(),
             "clip_fraction": ((ratio - 1.0).abs() > clip_coef).astype(ratio.dtype).mean()}
    return loss, stats


def _joint(per_dim: trl.RecurrentTensor, discrete: bool) -> trl.RecurrentTensor:
    """Log-probabilities and entropies of a vector action: the sum over its independent dimensions."""
    return per_dim if discrete else per_dim.sum(-1)


def _std(x: trl.RecurrentTensor) -> trl.RecurrentTensor:
    """The unbiased standard deviation of all elements, like ``torch.std``."""
    centered = x - x.mean()
    return ((centered * centered).sum() / (x.shape[0] - 1)).sqrt()


def _minibatch(seed: int, iteration: int, epoch: int, index: int, minibatches: int, batch: int) -> np.ndarray:
    """Sample indices of minibatch ``index`` of ``epoch``: a slice of the epoch's permutation of the batch."""
    order = np.random.default_rng((seed, iteration, epoch)).permutation(batch)
    size = batch // minibatches
    return order[index * size:(index + 1) * size]


def _action_bounds(env_name: str) -> tuple[float, float]:
    space = gymnasium.make(env_name).action_space
    return float(np.min(space.low)), float(np.max(space.high))


class _Logger:
    """Fills the learning curve from the two sinks, timing each iteration from one to the next, and writes
    each row to the run log as soon as it is complete."""

    def __init__(self, curve: list[dict[str, Any]], iterations: int, clock: IterationClock, progress: bool,
                 title: str, num_envs: int) -> None:
        self.curve, self.pending, self.clock = curve, {}, clock
        # episodes span iterations: counted in order of iterations, whatever order the sinks run in
        self.counted, self.blocks, self.counted_until = trl.rl.RunningEpisodes(num_envs), {}, 0
        self.bar = tqdm(total=iterations, desc=title, disable=not progress)

    def start(self, compile_seconds: float) -> None:
        self.clock.start(compile_seconds)

    def episodes(self, point: dict, value: Any) -> None:
        """An iteration's rewards and episode ends, counted in order of iterations (unfinished episodes carry
        over)."""
        self.blocks[point["i"]] = value
        while self.counted_until in self.blocks:
            block = self.blocks.pop(self.counted_until)
            self._add(self.counted_until, "episodes", continuing_summary(self.counted_until, self.counted, *block))
            self.counted_until += 1

    def losses(self, point: dict, value: Any) -> None:
        names = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")
        self._add(point["i"], "losses", {name: float(v) for name, v in zip(names, value)})

    def _add(self, iteration: int, kind: str, values: dict[str, Any]) -> None:
        """The two sinks of an iteration run in either order; its row is complete after both."""
        parts = self.pending.setdefault(iteration, {})
        parts[kind] = values
        if len(parts) < 2:
            return
        del self.pending[iteration]
        self.curve.append(self.clock.complete({**parts["episodes"], **parts["losses"]}))
        row = self.curve[-1]
        self.bar.set_postfix(mean_length=f"{row['mean_length']:.1f}", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
        self.clock.close()


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=128, help="environment steps per iteration (T)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--minibatches", type=int, default=4)
    parser.add_argument("--lr", type=float, default=2.5e-4)
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--gae-lambda", type=float, default=0.95)
    parser.add_argument("--ent-coef", type=float, default=0.01)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--reward-scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="torch", choices=("reference", "torch", "jax"))
    parser.add_argument("--devices", type=int, default=1,
                        help="jax: split the environments across this many devices (docs/scale-out.md)")
    parser.add_argument("--logdir", default=None, help="write progress.csv and TensorBoard events under it")
    parser.add_argument("--print-schedule", action="store_true", help="print the loop program (torch/jax)")
    parser.add_argument("--plot", default=None, help="draw the learning curve into this PNG")
    args = parser.parse_args(argv)
    curve = train(args.env, args.iterations, args.num_envs, args.steps, args.epochs, args.minibatches,
                  gamma=args.gamma, gae_lambda=args.gae_lambda, lr=args.lr, ent_coef=args.ent_coef, hidden=args.hidden, seed=args.seed, backend=args.backend,
                  logdir=args.logdir, progress=True, print_schedule=args.print_schedule,
                  reward_scale=args.reward_scale,
                  compile_options={"devices": args.devices} if args.devices != 1 else None)
    print(f"\nPPO on {args.env}, {args.num_envs} envs x {args.steps} steps, {args.epochs} epochs x "
          f"{args.minibatches} minibatches, backend {args.backend}")
    print("iteration  env steps  episodes  mean length  mean return  s/iteration")
    for row in curve:
        print(f"{row['iteration']:9d}  {row['env_steps']:9d}  {row['episodes']:8d}  {row['mean_length']:11.1f}  "
              f"{row['mean_return']:11.1f}  {row['iteration_seconds']:11.3f}")
    if args.plot:
        plot_curve(curve, args.plot, f"PPO on {args.env} ({args.backend})")
    return curve


def plot_curve(curve: list[dict[str, Any]], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (length_axis, return_axis) = plt.subplots(1, 2, figsize=(9, 3.2))
    steps = [row["env_steps"] for row in curve]
    length_axis.plot(steps, [row["mean_length"] for row in curve])
    length_axis.set(xlabel="environment steps", ylabel="mean episode length")
    return_axis.plot(steps, [row["mean_return"] for row in curve])
    return_axis.set(xlabel="environment steps", ylabel="mean episode return")
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


if __name__ == "__main__":
    main()
