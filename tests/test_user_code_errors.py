"""User code that raises while a program runs (a source, a sink, a UDF, an environment's step) reaches the user
as a `trl.UserCodeError` naming the RT, the line that created it and the line that raised, with the original
exception chained; the executable stays usable (SPEC.md, "Errors"). On every backend."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from conftest import collect

import timerl as trl
from timerl.pdg.graph import TensorType
from timerl.rt import functional as F

STEPS = 4


class Flaky:
    """A user function that raises at one point while ``armed``; the error's line is ``LINE``."""

    def __init__(self, at: int) -> None:
        self.at, self.armed = at, True

    def check(self, point: dict) -> None:
        if self.armed and point["t"] == self.at:
            raise KeyError(f"no record {point['t']}")  # the line the error must name


LINE = Flaky.check.__code__.co_firstlineno + 2


def _source_program(flaky: Flaky):
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds

    def read(point):
        flaky.check(point)
        return np.float32(point["t"])

    with ctx:
        values = collect(trl.source(read, (), "float32", (t,)) * 2.0)
    return ctx, {T: STEPS}, values


def _sink_program(flaky: Flaky):
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    values: dict = {}

    def keep(point, value):
        flaky.check(point)
        values[(point["t"],)] = np.array(value)

    with ctx:
        (trl.source(lambda p: np.float32(p["t"]), (), "float32", (t,)) * 2.0).sink(keep)
    return ctx, {T: STEPS}, values


def _udf_program(flaky: Flaky):
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds

    def double(point, x):
        flaky.check(point)
        return (x * 2.0,)

    with ctx:
        x = trl.source(lambda p: np.float32(p["t"]), (), "float32", (t,))
        (y,) = F.apply("udf", x, fn=double, outputs=(TensorType((), "float32"),), as_tuple=True)
        values = collect(y)
    return ctx, {T: STEPS}, values


PROGRAMS = {"source": _source_program, "sink": _sink_program, "udf": _udf_program}


@pytest.mark.parametrize("kind", sorted(PROGRAMS))
def test_user_code_raising_is_a_chained_user_code_error(backend, kind):
    flaky = Flaky(at=2)
    ctx, bounds, values = PROGRAMS[kind](flaky)
    exe = ctx.compile(bounds=bounds, backend=backend)
    with pytest.raises(trl.UserCodeError) as raised:
        exe.execute()
    error = raised.value
    assert isinstance(error, trl.TimeRLError)
    assert isinstance(error.__cause__, KeyError) and "no record 2" in str(error.__cause__)
    message = str(error)
    assert f"{kind} (%" in message and "test_user_code_errors.py:" in message, message
    assert "{'t': 2}" in message and f"test_user_code_errors.py:{LINE}" in message, message
    flaky.armed = False  # the executable stays usable: the next run gives every value
    values.clear()
    exe.execute()
    assert {k: float(v) for k, v in values.items()} == {(k,): 2.0 * k for k in range(STEPS)}


class _BrokenEnv(gymnasium.Env):
    """A one-dimensional environment whose step raises on its third call."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self) -> None:
        self.calls = 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.calls += 1
        if self.calls == 3:
            raise RuntimeError("the simulator diverged")
        return np.zeros(1, np.float32), 1.0, False, False, {}


gymnasium.register("TimeRLBroken-v0", entry_point=_BrokenEnv)


def test_an_environment_raising_in_step(backend):
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        env = trl.rl.make_env("TimeRLBroken-v0", num_envs=1, seed=0)
        env.reset()
        obs, reward, terminated = env.step(trl.zeros((1,), "int64", domain=(t,)))
        collect(reward)
    with pytest.raises(trl.UserCodeError, match=r"test_user_code_errors.py:\d+.*RuntimeError: the simulator "
                                                  r"diverged") as raised:
        ctx.compile(bounds={T: 5}, backend=backend).execute()
    assert isinstance(raised.value.__cause__, RuntimeError)


def test_make_env_with_an_option_the_environment_does_not_take():
    with trl.Context(dims="t"):
        with pytest.raises(trl.TimeRLError, match=r"test_user_code_errors.py:\d+.*CartPole-v1.*bogus") as raised:
            trl.rl.make_env("CartPole-v1", num_envs=2, bogus=3)
    assert isinstance(raised.value, TypeError)  # an ArgumentError, as Python's own would be
    with pytest.raises(trl.TimeRLError, match="NoSuchEnv"):
        trl.rl.make_env("NoSuchEnv-v0", num_envs=2)
