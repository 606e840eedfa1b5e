"""The loop program generated as Python (timerl.runtime.codegen) against the interpreter's closures it
replaces and against the reference: same values, same memory accounting, every point freed."""

from __future__ import annotations

import numpy as np
import pytest

from test_vectorize import STEPS, policy_gradient_program
from timerl.runtime.executor import _Interpreter


def _run(backend: str, generated: bool, options: dict):
    ctx, I, T, grads, losses = policy_gradient_program()
    exe = ctx.compile({I: 1, T: STEPS}, backend=backend, **options)
    if not generated and backend != "reference":
        exe._program = _Interpreter(exe).build(exe.schedule.root, ())
    exe.execute()
    return exe, [dict(g) for g in grads], dict(losses)


@pytest.mark.parametrize("backend", ["torch", "jax"])
@pytest.mark.parametrize("options", [{}, {"vectorize": False}], ids=["vectorized", "pointwise"])
def test_generated_program_matches_interpreter_and_reference(backend, options):
    exe, grads, losses = _run(backend, True, options)
    assert "for c" in exe._program.source and "def program" in exe._program.source
    oracle, oracle_grads, oracle_losses = _run(backend, False, options)
    _, reference_grads, reference_losses = _run("reference", False, {})
    assert exe.stats["peak_device_bytes"] == oracle.stats["peak_device_bytes"]
    assert exe.stats["leaked_points"] == oracle.stats["leaked_points"] == 0
    for got, want in ((losses, oracle_losses), (losses, reference_losses)):
        assert sorted(got) == sorted(want)
        for key, value in want.items():
            np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-6)
    for got_all, want_all in ((grads, oracle_grads), (grads, reference_grads)):
        for got, want in zip(got_all, want_all):
            assert sorted(got) == sorted(want)
            for key, value in want.items():
                np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-5)


def test_budgeted_programs_keep_the_interpreter():
    """With device_memory each statement clears the pool's pins first: no generated program there."""
    ctx, I, T, grads, losses = policy_gradient_program()
    exe = ctx.compile({I: 1, T: STEPS}, backend="torch", device_memory=10**9)
    assert not hasattr(exe._program, "source")
    exe.execute()
    assert exe.stats["leaked_points"] == 0
