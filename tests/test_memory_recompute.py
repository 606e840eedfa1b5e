"""Recomputation (issue 9, item 6; `timerl.pdg.recompute`, ``recompute=True``): values that wait for the
backward pass of Monte Carlo REINFORCE (the hidden layers' activations) are computed again from the kept
observation and the parameters, so what a step leaves on the device until the end of the iteration shrinks to
the observation, action, reward and episode end; the results are those without recomputation."""

from __future__ import annotations

import pytest

import timerl as trl
from algorithms.reinforce import train


def run(backend: str, steps: int, num_envs: int = 4, **options) -> tuple[list, dict]:
    stats: dict = {}
    curve = train(iterations=2, num_envs=num_envs, steps=steps, n_step=None, backend=backend, stats=stats,
                  compile_options=options or None)
    return [(row["episodes"], row["mean_length"], row["mean_return"]) for row in curve], stats


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_recomputation_changes_no_result(backend):
    options = dict(incrementalize=True, vectorize=False)
    plain, plain_stats = run(backend, 24, **options)
    again, stats = run(backend, 24, recompute=True, **options)
    assert again == plain
    assert len(stats["executable"].graph.nodes) > len(plain_stats["executable"].graph.nodes)  # the copies
    if backend == "torch":
        reference, _ = run("reference", 24)
        assert again == reference


def test_recomputation_keeps_less_per_step_than_keeping_the_activations():
    # a property of the fused schedule: its options are stated, not left to TIMERL_PASS_OFF (with fusion off
    # the copies are not placed next to their readers: 17040 B per step against 17121 B without recomputing)
    peaks = {}
    for recompute in (False, True):
        options = {"options": trl.CompileOptions(incrementalize=True, vectorize=False, recompute=recompute)}
        short = run("torch", 40, num_envs=16, **options)[1]["peak_device_bytes"]
        long = run("torch", 120, num_envs=16, **options)[1]["peak_device_bytes"]
        peaks[recompute] = (short, long, (long - short) / 80)
    per_step_kept, per_step_recomputed = peaks[False][2], peaks[True][2]
    # without: two 16 x 64 float32 tanh outputs per step (8 KiB) and more; with: observation (256 B), action,
    # reward, episode end and log-probabilities, well under a quarter of it
    assert per_step_kept >= 2 * 16 * 64 * 4
    assert per_step_recomputed * 4 <= per_step_kept, peaks
    assert peaks[True][1] < peaks[False][1]
