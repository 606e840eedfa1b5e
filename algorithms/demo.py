"""`make demo` (`python -m algorithms.demo`): what timerl computes, next to NumPy, section by section."""

from __future__ import annotations

import argparse

import numpy as np

import timerl as trl

GAMMA = 0.99
STEPS = 12


def reward_stream(step: int) -> float:
    """A small, recognisable reward stream: a reward of 1 every third step, -0.5 otherwise."""
    return 1.0 if step % 3 == 2 else -0.5


def timerl_returns(backend: str) -> np.ndarray:
    """G[t] = r[t] + gamma * r[t+1] + ... + gamma**(T-1-t) * r[T-1], written as one anti-causal RT."""
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    returns = np.full(STEPS, np.nan)
    with ctx:
        r = trl.source(lambda p: reward_stream(p["t"]), shape=(), dtype="float64", domain=(t,))
        g = r[t:T].discounted_sum(GAMMA)
        g.sink(lambda p, v: returns.__setitem__(p["t"], float(v)))
    ctx.compile(bounds={T: STEPS}, backend=backend).execute()
    return returns


def numpy_returns() -> np.ndarray:
    rewards = np.array([reward_stream(k) for k in range(STEPS)])
    returns, running = np.zeros(STEPS), 0.0
    for k in reversed(range(STEPS)):
        running = rewards[k] + GAMMA * running
        returns[k] = running
    return returns


def discounted_returns_section() -> bool:
    print(f"== Discounted returns: g = r[t:T].discounted_sum({GAMMA}), T = {STEPS} ==")
    columns = {"numpy": numpy_returns(), "reference": timerl_returns("reference"), "torch": timerl_returns("torch"),
               "jax": timerl_returns("jax")}
    print("   t  reward  " + "  ".join(f"{name:>10}" for name in columns))
    for k in range(STEPS):
        print(f"{k:4d}  {reward_stream(k):6.2f}  " + "  ".join(f"{c[k]:10.6f}" for c in columns.values()))
    agree = all(np.allclose(c, columns["numpy"], rtol=1e-6) for c in columns.values())
    print("all backends agree with NumPy" if agree else "MISMATCH: a backend disagrees with NumPy")
    print()
    return agree


def reinforce_section() -> bool:
    """REINFORCE (paper Alg. 1) learning CartPole-v1 on the torch backend, with its learning curve."""
    from algorithms.reinforce import train

    iterations, steps = 30, 200
    print(f"== REINFORCE on CartPole-v1: 16 environments, {iterations} iterations x {steps} steps, torch ==")
    curve = train("CartPole-v1", iterations=iterations, num_envs=16, steps=steps, backend="torch", progress=True)
    lengths = [row["mean_length"] for row in curve]
    print(" iter  mean episode length")
    for row, length in zip(curve, lengths):
        print(f"{row['iteration']:5d}  {length:8.1f}  " + "#" * int(40 * length / steps))
    first, last = np.mean(lengths[:5]), np.mean(lengths[-5:])
    print(f"mean episode length: first 5 iterations {first:.1f}, last 5 iterations {last:.1f}")
    print()
    return last > first


SECTIONS = [discounted_returns_section, reinforce_section]


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python -m algorithms.demo", description=__doc__).parse_args(argv)
    print("timerl demo: deep-RL programs as recurrent tensors\n")
    results = [section() for section in SECTIONS]
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
