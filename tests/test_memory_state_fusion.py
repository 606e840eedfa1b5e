"""A state placeholder fused into the group that reads it (`CompileOptions.state_fusion`,
`timerl.sched.group._absorb_own_state`: Adam's moments run inside the update) must not raise the peak: with it,
REINFORCE's running-sums schedule ordered its gradients differently (isl's order of independent statements
changes with the groups' numbering: the largest gradient first, +8% peak at 16 envs x 200 steps; now
`timerl.sched.order.order_sequences` orders a loop body by bytes), and a fused placeholder counted its
value, one of the pool's buffers, as new bytes (+16 KiB). Peaks are the pool's exact accounting; the learning
curves are the reference interpreter's."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl
from algorithms.reinforce import train

CASES = {"running sums": dict(incrementalize=True),
         "running sums, point by point": dict(incrementalize=True, vectorize=False),
         "point by point": dict(vectorize=False)}
_REFERENCE: list = []


def _run(backend: str, **options) -> tuple[list[tuple[float, float]], int]:
    stats: dict = {}
    curve = train(iterations=3, num_envs=4, steps=20, backend=backend, stats=stats,
                  compile_options=dict(options=trl.CompileOptions(**options)))
    assert stats.get("leaked_points", 0) == 0  # the reference interpreter keeps no pool
    return [(row["mean_length"], row["mean_return"]) for row in curve], stats["peak_device_bytes"]


@pytest.mark.parametrize("case", CASES)
def test_state_fusion_keeps_the_peak_and_the_reference_values(case):
    if not _REFERENCE:
        _REFERENCE.append(_run("reference")[0])
    fused, fused_peak = _run("torch", **CASES[case])
    apart, apart_peak = _run("torch", state_fusion=False, **CASES[case])
    assert fused_peak <= apart_peak, (fused_peak, apart_peak)
    np.testing.assert_allclose(fused, _REFERENCE[0], rtol=1e-6)
    np.testing.assert_allclose(apart, _REFERENCE[0], rtol=1e-6)
