"""A running sum over 100,000 steps of one dimension on the reference interpreter: what a long recurrence costs
(`tests/test_language.py::test_recurrence_over_100k_steps_reference` checks its value; its time is measured here,
because the project's tests assert no times)."""

from __future__ import annotations

import argparse

import time

import timerl as trl


def build(sink_values: dict):
    """``s[t + 1] = s[t] + x[t + 1]`` with ``x[t] = t % 3``; the last step's sum goes into ``sink_values``."""
    ctx = trl.Context(dims="t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    with ctx:
        x = trl.source(lambda p: float(p["t"] % 3), dtype="float64", domain=(t,))
        s = trl.placeholder((), "float64", domain=(t,))
        s[0] = x[0]
        s[t + 1] = s[t] + x[t + 1]
        with ctx.when(t == T - 1):
            s.sink(lambda point, value: sink_values.update(last=float(value)))
    return ctx


def measure(steps: int = 100_000, backend: str = "reference") -> tuple[float, float]:
    """(compile seconds, execute seconds) of the running sum over ``steps`` steps; checks the sum."""
    values: dict = {}
    ctx = build(values)
    started = time.perf_counter()
    exe = ctx.compile({"T": steps}, backend=backend)
    compiled = time.perf_counter() - started
    started = time.perf_counter()
    exe.execute()
    executed = time.perf_counter() - started
    expected = float(sum(k % 3 for k in range(steps)))
    if values.get("last") != expected:
        raise AssertionError(f"running sum over {steps} steps: {values.get('last')} != {expected}")
    return compiled, executed


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.long_recurrence",
                                     description="(compile seconds, execute seconds) of a long running sum")
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--backend", default="reference", choices=("reference", "torch", "jax"))
    arguments = parser.parse_args()
    print(measure(arguments.steps, arguments.backend))
