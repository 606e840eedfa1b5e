"""Optimizations by rule, not by spelling: ops with a check of input values (``pow``, ``gather``, ``one_hot``) batch
like any other, their check run once over the batch; and `Executable.explain` names why a statement is not batched."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import timerl as trl
from timerl import command
from timerl.errors import IndexOutOfRangeError

T, N, K = 6, 3, 4  # steps, rows, classes
OBS = np.random.default_rng(0).normal(size=(N, K)).astype(np.float32)


def _loss_program(spelling: str, bad_action: bool = False):
    """A policy-gradient-like loss over ``t``, written with ``x ** 2``, ``log_prob`` (a gather) and ``one_hot``
    (``spelling="checked"``) or with the same values spelled without those ops (``"plain"``: ``x * x``, a
    one-hot mask from the host, the log-probability as a masked sum)."""
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T_ = ctx.bounds
    out: dict = {}

    with ctx:
        w = trl.placeholder((K, K), "float32", domain=(i,))
        w[0] = trl.tensor(np.eye(K, dtype=np.float32) * 0.5)
        # a rollout: observations and actions come from a recurrence over t, as from an environment
        obs = trl.placeholder((N, K), "float32", domain=(i, t))
        obs[i, 0] = trl.tensor(OBS)
        next_obs = obs * 0.5 + trl.rand((N, K))
        obs[i, t + 1] = next_obs
        next_value = 0.1 * next_obs.sum(-1)  # read at every step, as a critic reads the next observation
        a = (obs + trl.rand((N, K))).argmax(-1)  # the action depends on the state, as a policy's does
        if bad_action:  # an action out of range at t = 4 only
            step = trl.placeholder((), "int64", domain=(i, t))  # t itself, as a counter
            step[i, 0] = trl.tensor(np.int64(0))
            step[i, t + 1] = step + 1
            a = a + trl.where((trl.arange(N) == 1) & (step == 4), K + 2, 0)
        logits = obs @ w
        if spelling == "checked":
            logp = trl.distributions.Categorical(logits=logits).log_prob(a)
            chosen = (a.one_hot(K).astype("float32") * logits).sum(-1)
            square = (logits.mean(-1) - chosen) ** 2
        else:
            mask = (a.unsqueeze(-1) == trl.arange(K)).astype("float32")
            logp = (logits.log_softmax(-1) * mask).sum(-1)
            chosen = (mask * logits).sum(-1)
            difference = logits.mean(-1) - chosen
            square = difference * difference
        loss = (-logp + square + next_value).mean()
        w[i + 1] = w - 0.1 * loss[i, 0:T_].sum()
        loss[i, 0:T_].sink(lambda p, v: out.setdefault(spelling, {}).__setitem__(p["i"], np.asarray(v).copy()))
    return ctx, {I: 2, T_: T}, out


def _run(spelling: str, backend: str):
    ctx, bounds, out = _loss_program(spelling)
    exe = ctx.compile(bounds=bounds, backend=backend, seed=0)
    exe.execute()
    return exe, out[spelling]


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_checked_ops_do_not_change_how_statements_run(backend):
    checked, checked_values = _run("checked", backend)
    plain, plain_values = _run("plain", backend)
    _, reference = _run("checked", "reference")
    # the loss over t runs batched (torch) or in the rollout's lax.scan (jax) in both spellings: the same
    # decisions, the same batched calls
    assert checked.stats["statements"] == plain.stats["statements"]
    assert checked.stats["statements"]["batched" if backend == "torch" else "scanned"] >= 1
    assert checked.stats["batched_statements"] == plain.stats["batched_statements"]
    assert backend == "jax" or checked.stats["batched_statements"] > 0
    kinds = [line.split(":")[1].split(" over")[0].strip() for line in checked.explain().splitlines()
             if line.startswith("G")]
    assert kinds == [line.split(":")[1].split(" over")[0].strip() for line in plain.explain().splitlines()
                     if line.startswith("G")]
    assert sorted(reference) == sorted(checked_values) == [0, 1]
    for key, value in reference.items():
        np.testing.assert_allclose(checked_values[key], value, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(plain_values[key], value, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_a_batched_check_still_names_the_point(backend):
    ctx, bounds, _ = _loss_program("checked", bad_action=True)
    # on jax, without whole loops as lax.scan, so that the loss over t runs batched (one jitted call)
    exe = ctx.compile(bounds=bounds, backend=backend, seed=0, options=trl.CompileOptions(scan_loops=False))
    with pytest.raises(IndexOutOfRangeError, match=r"'t': 4.*index 6 is out of range|index 6 is out of range"):
        exe.execute()
    assert exe.explain().count("batched over t") >= 1


def _recurrence_program():
    ctx = trl.Context("t")
    (t,), (T_,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.float32(p["t"]), (), "float32", (t,))
        s = trl.placeholder((), "float32", domain=(t,))
        s[0] = trl.tensor(np.float32(1.0))
        s[t + 1] = s * 0.5 + x
        (s * 2.0 + 1.0).sink(lambda p, v: None)
    return ctx, {T_: 8}


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_explain_names_a_true_recurrence(backend):
    ctx, bounds = _recurrence_program()
    exe = ctx.compile(bounds=bounds, backend=backend)
    exe.execute()
    text = exe.explain()
    recurrent = [line for line in text.splitlines() if "true recurrence over t" in line]
    assert recurrent, text
    assert "test_explain.py:" in text  # the user's lines
    assert exe.stats["statements"]["point by point"] + exe.stats["statements"]["scanned"] >= 1


def test_explain_says_vectorize_is_off():
    ctx, bounds, _ = _loss_program("checked")
    exe = ctx.compile(bounds=bounds, backend="torch", options=trl.CompileOptions(vectorize=False))
    exe.execute()
    assert "vectorize is off" in exe.explain()
    assert exe.stats["statements"]["batched"] == 0


def test_timerl_explain_runs_a_script(tmp_path, monkeypatch, capsys):
    script = tmp_path / "program.py"
    script.write_text("import timerl as trl\n"
                      "ctx = trl.Context(dims='t')\n"
                      "(t,), (T,) = ctx.dims, ctx.bounds\n"
                      "with ctx:\n"
                      "    r = trl.source(lambda p: float(p['t']), shape=(), dtype='float32', domain=(t,))\n"
                      "    (r[t:T].sum() ** 2).sink(lambda p, v: None)\n"
                      "ctx.compile(bounds={T: 6}, backend='torch').execute()\n")
    monkeypatch.setenv("TIMERL_EXPLAIN", "")  # restored after the test, as is sys.argv
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    command.main(["explain", str(script)])
    err = capsys.readouterr().err
    assert "calls a user's source function" in err and "program.py:5" in err
    assert "batched over t" in err and "program.py:6: sum pow sink" in err
