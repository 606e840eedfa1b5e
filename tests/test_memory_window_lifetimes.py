"""Values whose bytes are known only at run time (a window ``x[t:T]`` and what a group computes from it, e.g.
a Monte Carlo return) are freed after their last reader inside the group, like the values of static size,
and the pool counts the most bytes alive at once with the group's stored outputs counted from where each is
computed (`timerl.runtime.lifetimes.free_after_last_use`). Before, a group kept every window-sized
intermediate until it returned, and counted them on top of all its stored outputs: REINFORCE Monte Carlo's
peak at T = 100 rose 2% above eager PyTorch's when the contributions pass fused the returns into the
backward pass's group (issue 9). Bounds derived from the shapes; values against the reference interpreter."""

from __future__ import annotations

import numpy as np

import timerl as trl
from timerl.runtime.dryrun import required_device_bytes
from timerl.runtime.lifetimes import free_after_last_use

ROWS = 64


def window_chain(backend: str, steps: int, **options):
    """At each step, five elementwise ops and a cumsum on the window ``x[t:T]`` (one group), summed to a sink."""
    ctx = trl.Context("t")
    (t,), (T,) = ctx.dims, ctx.bounds
    sums: dict[int, float] = {}
    with ctx:
        x = trl.source(lambda p: np.full((ROWS,), 0.01 * p["t"], np.float32), (ROWS,), "float32", (t,))
        y = ((x[t:T] * 0.5).exp() + 1.0).tanh().cumsum(0)
        y.sum().sink(lambda p, v: sums.__setitem__(p["t"], float(v)))
    exe = ctx.compile({T: steps}, backend=backend, **options)
    exe.execute()
    return exe, sums


def test_window_intermediates_die_at_their_last_reader():
    steps = 64
    exe, sums = window_chain("torch", steps, vectorize=False)
    _, expected = window_chain("reference", steps)
    assert sums.keys() == expected.keys()
    for step, value in expected.items():
        np.testing.assert_allclose(sums[step], value, rtol=1e-5)
    whole = steps * ROWS * 4  # every x (the first window reads all of them), and one window at t = 0
    # x, and at most two windows alive at once (an op's input and its output), the two scalar constants;
    # kept to the group's end, the five window-sized intermediates would make it 6 * whole
    assert exe.stats["peak_device_bytes"] <= 3 * whole + 8, exe.stats["peak_device_bytes"]
    assert exe.stats["peak_device_bytes"] == required_device_bytes(exe.schedule, exe.graph, exe.groups, exe.bounds,
                                                                   exe.transient)
    assert exe.stats["leaked_points"] == 0


def test_candidates_count_run_time_sizes_stored_outputs_and_deletions():
    body = ["v1_0 = f()",  # run-time size (member 1)
            "v2_0 = g(v1_0)",  # static 100
            "v3_0 = h(v2_0)",  # stored, 40
            "v4_0 = k(v3_0)"]  # static 10
    result, candidates = free_after_last_use(body, {"v2_0": 100, "v4_0": 10}, stored={"v3_0": 40},
                                             dynamic={"v1_0": 1})
    assert result == ["v1_0 = f()", "v2_0 = g(v1_0)", "del v1_0", "v3_0 = h(v2_0)", "del v2_0",
                      "v4_0 = k(v3_0)", "del v4_0"]
    # lines 1-2: v1, then v1 and v2 (100 + b1); line 3: v2 and the stored v3 (140); line 4: v3 and v4 (50):
    # the most for each set of run-time-sized values alive; the pool adds the result after the group stored
    # v3, so its 40 come off every candidate
    assert candidates == ((60, (1,)), (100, ()))
