"""Monte Carlo REINFORCE keeps, per step, only what its backward pass needs (issue 9, item 1): the return at
step ``t`` reads every later reward, so learning waits for the last step; after it, each step's backward
pass runs in one loop with its gradient sums (`timerl.sched.order.phases`), instead of computing one backward
product for every step in one loop and consuming them in the next. Bounds are derived from the shapes."""

from __future__ import annotations

import timerl as trl
from algorithms.reinforce import train

ENVS, HIDDEN = 4, 16


def _reinforce(steps: int, n_step: int | None, **options):
    stats: dict = {}
    curve = train(iterations=3, num_envs=ENVS, steps=steps, n_step=n_step, hidden=HIDDEN, backend="torch",
                  stats=stats, compile_options=options)
    return [(r["mean_length"], r["mean_return"]) for r in curve], stats["peak_device_bytes"]


def test_monte_carlo_keeps_per_step_only_the_activations_the_backward_pass_reads():
    curves, peaks = {}, {}
    for steps in (24, 96):
        # the peak is a property of the fused schedule: its options are stated, not left to TIMERL_PASS_OFF
        curves[steps], peaks[steps] = _reinforce(steps, None, options=trl.CompileOptions(incrementalize=True,
                                                                                         vectorize=False))
    # two tanh outputs (the backward pass of tanh and of the next layer's weights reads them), the
    # observation (the first layer's weight gradient), log-probabilities and action (log_prob's backward),
    # reward and episode end (the returns and the sink); 10% for points in flight at either peak. Kept apart
    # from its consumer, each step's backward product (HIDDEN floats per env) and last-layer weight gradient
    # would add more than half of that again.
    per_step = ENVS * (2 * HIDDEN * 4 + 4 * 4 + 2 * 4 + 8 + 4 + 1)
    assert peaks[96] - peaks[24] <= 1.1 * (96 - 24) * per_step, (peaks, (peaks[96] - peaks[24]) / 72, per_step)
    whole_curve, _ = _reinforce(96, None, incrementalize=False, vectorize=False)
    assert curves[96] == whole_curve  # the same learning, whatever the order

