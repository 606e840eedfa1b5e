"""A 3-dimension program of about 50 ops: the compile-time and execution-time yardstick of the scheduler."""

from __future__ import annotations

import argparse

import time

import numpy as np

import timerl as trl


def build(sink_values: dict):
    ctx = trl.Context(dims="b i t")
    b, i, t = ctx.dims
    B, I, T = ctx.bounds
    with ctx:
        w = trl.param(np.full((4, 4), 0.1, dtype=np.float32), domain=(i,))
        x = trl.source(lambda p: np.full(4, p["t"] + p["b"], np.float32), shape=(4,), domain=(b, i, t))
        h = trl.placeholder((4,), domain=(b, i, t))
        h[b, i, 0] = trl.zeros((4,))
        h[b, i, t + 1] = (h[b, i, t] @ w[i] + x[b, i, t + 1]).tanh()
        r = (h * h).sum(-1)
        g = r[b, i, t:T].discounted_sum(0.9)
        n = r[b, i, t:trl.min(t + 4, T)].mean(0)
        past = r[b, i, trl.max(0, t - 3):t + 1].max(0)
        noise = trl.rand((4,), domain=(b, i, t))
        loss = ((g - n) * (g - n) + past * 0.1 + (noise * h).sum(-1)).mean()
        batch = loss[0:B].sum(0)
        total = batch[i, 0:T].sum(0)
        w[i + 1] = w[i] - total * 0.01 * trl.ones((4, 4))
        s = trl.placeholder((), domain=(b, i, t))
        s[b, i, 0] = r[b, i, 0]
        s[b, i, t + 1] = s[b, i, t] * 0.5 + r[b, i, t + 1]
        c = trl.where(s > 1.0, s.exp().log(), s.sqrt().abs())
        every = c[b, i, t % 2] + c[b, i, t // 2]
        every.sink(lambda p, v: sink_values.__setitem__(("every",) + tuple(p.values()), float(v)))
        total.sink(lambda p, v: sink_values.__setitem__(("total",) + tuple(p.values()), float(v)))
        with ctx.when((i + 1) % 2 == 0):
            w.sink(lambda p, v: sink_values.__setitem__(("w",) + tuple(p.values()), v))
    return ctx


def table() -> None:
    """Compile and run on every backend: ops, compile seconds, execute seconds, peak device bytes."""
    print("| backend | ops | compile s | execute s | peak device bytes |")
    print("|---|---|---|---|---|")
    for backend in ("reference", "torch", "jax"):
        ctx = build({})
        started = time.perf_counter()
        exe = ctx.compile({"B": 2, "I": 3, "T": 12}, backend=backend)
        compiled = time.perf_counter() - started
        exe.execute()
        print(f"| {backend} | {len(ctx.nodes)} | {compiled:.2f} | {exe.stats['execute_seconds']:.3f} | "
              f"{exe.stats['peak_device_bytes']} |")


def main() -> None:
    """Compile and run on every backend (the table of `timerl bench`), then print the torch schedule."""
    table()
    exe = build({}).compile({"B": 2, "I": 3, "T": 12}, backend="torch")
    print(exe.schedule)


if __name__ == "__main__":
    argparse.ArgumentParser(prog="python -m benchmarks.program50", description=main.__doc__).parse_args()
    main()
