"""A ScheduleError names the cycle by the user lines of the reads that close it, in a few lines; the
internal ops are on the error (``.ops``), not in the message."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import timerl as trl


def test_off_by_one_target_network_names_the_read(compiled_backend):
    ctx = trl.Context("t")
    (t,) = ctx.dims
    (T,) = ctx.bounds
    data = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    with ctx:
        q = trl.nn.MLP([4, 8, 2], activation="relu", domain=(t,), flat=True)
        params_line = inspect.currentframe().f_lineno - 1
        x = trl.source(lambda p: data[p["t"] % 6], shape=(4,), domain=(t,))
        with ctx.when(t < T - 1):
            target = 1.0 + 0.9 * q.frozen(t + 1)(x).max(-1)  # one step ahead: the weights this step produces
            target_line = inspect.currentframe().f_lineno - 1
            loss = (q(x).max(-1) - target.detach()) ** 2
            loss.backward()
            trl.optim.Adam(q.parameters(), lr=1e-3).step()
            step_line = inspect.currentframe().f_lineno - 1
            loss.sink(lambda p, v: None)
    with pytest.raises(trl.ScheduleError) as caught:
        ctx.compile({T: 5}, backend=compiled_backend)
    message, here = str(caught.value), __file__
    first = message.splitlines()[2]
    assert f"{here}:{target_line}" in first and "ahead" in first  # the read that closes it comes first
    assert f"{here}:{params_line}" in message and f"{here}:{step_line}" in message
    assert len(message.splitlines()) <= 8 and len(message) < 1200
    assert "spatial_index" not in message and "grad_accumulate" not in message
    assert len(caught.value.ops) > 10 and any("grad_accumulate" in op for op in caught.value.ops)
