"""Vectorized loops (timerl.runtime.batch): the same values as point-by-point execution and as the reference,
with the loop really batched."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl
from benchmarks.eager_memory import LiveTensorBytes
from conftest import collect, run

STEPS, WIDTH = 7, 3


def policy_gradient_program():
    """A recurrent state over t (not vectorizable), a loss per step read after the recurrence, and the
    gradient of an MLP parameter summed over t: the loss and gradient loops are vectorizable."""
    ctx = trl.Context(dims="i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        net = trl.nn.MLP([WIDTH, 8, 2], activation="tanh", domain=(i,))
        s = trl.placeholder((4, WIDTH), "float32", domain=(i, t))
        s[i, 0] = trl.randn((4, WIDTH), domain=(i,))
        s[i, t + 1] = s[i, t] * 0.9 + trl.rand((4, WIDTH), domain=(i, t))
        logits = net(s)
        reward = trl.source(lambda p: np.float32(np.sin(p["t"] + p["i"])), (), "float32", (i, t))
        loss = -(logits.log_softmax(-1).spatial[:, 0] * reward).mean()
        loss.backward()
        grads = [collect(p.grad) for p in net.parameters()]
        losses = collect(loss)
    return ctx, I, T, grads, losses


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_vectorized_loops_match_reference_and_unvectorized(backend):
    results = {}
    # isl keeps the loss and gradient loop apart from the recurrence's loop when per-iteration statements are
    # fused; with them apart (per_iteration_fusion off) it fuses the two loops and the recurrence keeps the
    # whole loop point by point (same values), so the batching asserted here is stated with the switch on
    for name, target, options in (("reference", "reference", {}),
                                  ("vectorized", backend, {"options": trl.CompileOptions(vectorize=True)}),
                                  ("pointwise", backend, {"options": trl.CompileOptions(vectorize=False)})):
        ctx, I, T, grads, losses = policy_gradient_program()
        exe = ctx.compile({I: 1, T: STEPS}, backend=target, **options)
        exe.execute()
        results[name] = ([dict(g) for g in grads], dict(losses))
        if name == "vectorized":
            assert exe.stats["batched_statements"] > 0
        if name == "pointwise":
            assert exe.stats["batched_statements"] == 0
    reference_grads, reference_losses = results["reference"]
    for name in ("vectorized", "pointwise"):
        grads, losses = results[name]
        assert sorted(losses) == sorted(reference_losses)
        for key, value in reference_losses.items():
            np.testing.assert_allclose(losses[key], value, rtol=1e-5, atol=1e-6)
        for got, want in zip(grads, reference_grads):
            assert sorted(got) == sorted(want)
            for key, value in want.items():
                np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-5, err_msg=f"{name} at {key}")


# Windows are padded inside the statement that reduces them (`timerl.runtime.windows`), so batching them needs
# the window's readers fused into that statement; with fusion off every op is a statement of its own, a window
# crosses statements and its loop runs point by point (same values: tests/test_compile_options.py's corpus).
PADDED = trl.CompileOptions(fusion=True, vectorize=True)

WINDOWS = {
    "t:T": lambda t, T: slice(t, T),
    "t:min(t+3,T)": lambda t, T: slice(t, trl.min(t + 3, T)),
    "max(0,t-2):t+1": lambda t, T: slice(trl.max(0, t - 2), t + 1),
}


@pytest.mark.parametrize("window", sorted(WINDOWS))
@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_windows_of_changing_length_batch_with_padding(backend, window):
    """Masked discounted returns over windows of changing length (REINFORCE's returns): a batch pads every
    window to the longest and masks the padding out of the sum; values equal the reference's."""
    rewards = np.random.default_rng(1).normal(size=(STEPS, 4)).astype(np.float32)
    ends = (np.random.default_rng(2).random((STEPS, 4)) < 0.3).astype(np.float32)
    results = []
    for target in ("reference", backend):
        ctx = trl.Context(dims="t")
        (t,), (T,) = ctx.dims, ctx.bounds
        with ctx:
            r = trl.source(lambda p: rewards[p["t"]], (4,), "float32", (t,))
            d = trl.source(lambda p: ends[p["t"]], (4,), "float32", (t,))
            span = WINDOWS[window](t, T)
            alive = (d[span].cumsum(0) - d[span]) == 0
            g = (r[span] * alive).discounted_sum(0.9)
            out = collect(g - g.mean())
        exe = ctx.compile({T: STEPS}, backend=target, **({} if target == "reference" else {"options": PADDED}))
        exe.execute()
        if target != "reference" and window == "t:T":
            # bounded windows are consumed in the loop that produces them (isl fuses the two to free memory
            # early), and such loops stay point by point; a window reaching T waits for the whole loop
            assert exe.stats["batched_statements"] > 0
        results.append(dict(out))
    assert sorted(results[0]) == sorted(results[1])
    for key, want in results[0].items():
        np.testing.assert_allclose(results[1][key], want, rtol=1e-5, atol=1e-6, err_msg=f"at {key}")


def test_vectorize_option_must_be_a_bool():
    ctx, I, T, _, _ = policy_gradient_program()
    with pytest.raises(trl.TimeRLError, match=r"test_vectorize.py:\d+: vectorize= is True or False"):
        ctx.compile({I: 1, T: STEPS}, backend="torch", vectorize="yes")


def _centred_returns(r, d, t, T):
    """Returns over r[t:T] up to the first end in d[t:T] (REINFORCE's mask), minus their mean."""
    alive = (d[t:T].cumsum(0) - d[t:T]) == 0
    g = (r[t:T] * alive).discounted_sum(0.9)
    return g - g.mean()


def _execute(ctx, steps, target, out):
    """(collected values, stats) of ``ctx`` run at T = steps on ``target`` (padded windows off the reference)."""
    (T,) = ctx.bounds
    exe = ctx.compile({T: steps}, backend=target, **({} if target == "reference" else {"options": PADDED}))
    exe.execute()
    return dict(out), exe.stats


def _assert_same_values(got, want):
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-6, err_msg=f"at {key}")


def test_padded_windows_run_in_chunks_with_the_same_values_and_a_smaller_peak(monkeypatch):
    """A statement that pads windows r[t:T] runs its points in chunks whose padding stays under a byte limit
    (torch): the values equal the reference's and the unchunked run's, and the peak shrinks."""
    import timerl.runtime.batch as batch

    steps = 40
    rewards = np.random.default_rng(3).normal(size=(steps, 8)).astype(np.float32)
    ends = (np.random.default_rng(4).random((steps, 8)) < 0.2).astype(np.float32)

    def run(target, window_bytes):
        monkeypatch.setattr(batch, "WINDOW_BYTES", window_bytes)
        ctx = trl.Context(dims="t")
        (t,), (T,) = ctx.dims, ctx.bounds
        with ctx:
            r = trl.source(lambda p: rewards[p["t"]], (8,), "float32", (t,))
            d = trl.source(lambda p: ends[p["t"]], (8,), "float32", (t,))
            out = collect(_centred_returns(r, d, t, T))
        return _execute(ctx, steps, target, out)

    want, _ = run("reference", 1 << 20)
    whole, whole_stats = run("torch", 1 << 30)
    chunked, chunked_stats = run("torch", 5 * steps * 8 * 4)  # windows of 5 points' padding per chunk
    assert chunked_stats["batched_statements"] > 0
    assert chunked_stats["peak_device_bytes"] < whole_stats["peak_device_bytes"]
    for got in (whole, chunked):
        _assert_same_values(got, want)


def test_padded_chunks_count_the_bytes_of_the_output_read_not_of_the_whole_producer(monkeypatch):
    """A window over one small output of a two-output producer (an environment step's reward beside its
    observation) is chunked by that output's bytes: 4 chunks of 4 points where the limit holds 4 points'
    windows of the reward (counting the observation too would make 16 chunks of one point); the values equal
    the reference's."""
    import timerl.runtime.batch as batch
    from timerl.rt import functional as F
    from timerl.pdg.graph import TensorType

    steps, envs, wide = 16, 8, 256
    rewards = np.random.default_rng(5).normal(size=(steps, envs)).astype(np.float32)
    ends = (np.random.default_rng(6).random((steps, envs)) < 0.2).astype(np.float32)

    def step(point, x):
        return np.full((wide,), point["t"], np.float32), rewards[point["t"]] + 0 * x, ends[point["t"]]

    def run(target):
        monkeypatch.setattr(batch, "WINDOW_BYTES", 4 * steps * envs * 4)
        ctx = trl.Context(dims="t")
        (t,), (T,) = ctx.dims, ctx.bounds
        with ctx:
            x = trl.source(lambda p: np.zeros(envs, np.float32), (envs,), "float32", (t,))
            small = TensorType((envs,), "float32")
            _, r, d = F.apply("udf", x, fn=step, outputs=(TensorType((wide,), "float32"), small, small),
                              as_tuple=True)
            out = collect(_centred_returns(r, d, t, T))
        return _execute(ctx, steps, target, out)

    want, _ = run("reference")
    got, stats = run("torch")
    assert stats["batched_statements"] > 0
    assert stats["padded_chunks"] == 4
    _assert_same_values(got, want)


# The three ops of the tanh gradient fold into one kernel only where one statement holds all of them (fusion)
TANH_FOLDS = trl.CompileOptions(fusion=True)


def test_tanh_gradient_is_found_and_fused_kernel_has_the_same_values():
    """Autodiff's gradient of tanh, ``g * (1 - y * y)``, is found in the gradient statements (the MLP has one
    tanh layer), folded into torch's one-kernel ``tanh_backward`` there (the values of the batched statements
    are checked against the reference above), and that kernel computes the same numbers as the three ops."""
    import torch

    from timerl.runtime.fusions import tanh_gradients

    ctx, I, T, _, _ = policy_gradient_program()
    exe = ctx.compile({I: 1, T: STEPS}, backend="torch", options=TANH_FOLDS)
    found = {}
    for group in exe.groups.values():
        members = [exe.graph.nodes[n] for n in group.members]
        found.update(tanh_gradients(exe.graph, members, set(group.members), set(group.freed_later),
                                    exe.backend.tanh_backward))
    assert len(found) == 1
    (last, (kernel, (g_member, _), (square, _), folded)), = found.items()
    assert exe.graph.nodes[last].op == "mul" and exe.graph.nodes[square.id].op == "mul" and square.id in folded
    g, y = torch.randn(5, 4, 3), torch.tanh(torch.randn(5, 4, 3))
    np.testing.assert_allclose(kernel(g, y).numpy(), (g * (1 - y * y)).numpy(), rtol=1e-6, atol=1e-7)


def test_tanh_gradient_is_one_kernel_in_point_by_point_groups_too():
    """Without vectorized loops the gradient statements run point by point: their generated code calls the fused
    kernel for the last mul and never computes the square or the subtraction (values: the first test above)."""
    ctx, I, T, _, _ = policy_gradient_program()
    exe = ctx.compile({I: 1, T: STEPS}, backend="torch", options=trl.CompileOptions(fusion=True, vectorize=False))
    source = "\n".join(function.source for function in exe.group_functions.values())
    fused = [node for node in exe.graph.nodes if f"v{node.id}_0 = K{node.id}(" in source
             and exe.namespace[f"K{node.id}"] == exe.backend.tanh_backward]
    assert len(fused) == 1
    (sub,) = [exe.graph.nodes[e.producer] for e in fused[0].inputs if exe.graph.nodes[e.producer].op == "sub"]
    square = exe.graph.nodes[sub.inputs[1].producer]
    assert square.op == "mul" and f"v{sub.id}_0 = " not in source and f"v{square.id}_0 = " not in source


def test_torch_tanh_of_large_float32_arrays_is_close_to_numpy_and_exact_elsewhere():
    """The torch backend's tanh: on float32 arrays of at least `_SIGMOID_TANH_ELEMENTS` elements it is
    ``2 * sigmoid(2x) - 1`` (torch's CPU tanh is several times slower), within 2.4e-7 of NumPy's float64 tanh
    everywhere, infinities and NaN included, in place (``out=``, buffer donation) too; small arrays and float64
    ones are torch's own tanh, bit for bit."""
    import torch

    from timerl.backends.torch_backend import _SIGMOID_TANH_ELEMENTS, tanh

    rng = np.random.default_rng(0)
    values = np.concatenate([rng.normal(size=20000) * scale for scale in (1e-6, 1e-3, 0.1, 1.0, 3.0, 10.0, 100.0)]
                            + [np.array([0.0, -0.0, 50.0, -50.0, 1e30, -1e30, np.inf, -np.inf, np.nan])])
    x = torch.from_numpy(values.astype(np.float32))
    assert x.numel() >= _SIGMOID_TANH_ELEMENTS
    want = np.tanh(values.astype(np.float32).astype(np.float64))
    got = tanh(x).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.nanmax(np.abs(got - want)) < 2.4e-7
    donated = x.clone()
    assert tanh(donated, out=donated) is donated
    np.testing.assert_array_equal(donated.numpy(), got)
    small, wide = x[:_SIGMOID_TANH_ELEMENTS - 1], torch.from_numpy(values)
    np.testing.assert_array_equal(tanh(small).numpy(), torch.tanh(small).numpy())  # (NaN equals NaN here)
    np.testing.assert_array_equal(tanh(wide).numpy(), torch.tanh(wide).numpy())


def test_tanh_of_large_arrays_and_its_gradient_match_the_reference():
    """A tanh layer over a whole window of 64 points (64 x 256 x 64 elements, the fast tanh) and its gradient:
    the same values as the reference interpreter."""
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        w = trl.tensor(np.random.default_rng(1).normal(size=(8, 64)).astype(np.float32), "float32",
                       requires_grad=True)
        x = trl.source(lambda p: np.random.default_rng(p["t"]).normal(size=(256, 8)).astype(np.float32) * 2,
                       (256, 8), "float32", (t,))
        h = (x[0:T] @ w).tanh()
        (h * h).sum().backward()
        hidden, grad = collect(h), collect(w.grad)
    results = {}
    for backend in ("reference", "torch"):
        for store in (hidden, grad):
            store.clear()
        ctx.compile({T: 64}, backend=backend).execute()
        results[backend] = (dict(hidden), dict(grad))
    for got, want in zip(results["torch"], results["reference"]):
        assert sorted(got) == sorted(want) and want
        for key, value in want.items():
            np.testing.assert_allclose(got[key], value, rtol=1e-4, atol=1e-5)


def test_batched_statement_drops_intermediates_after_their_last_reader():
    """A batched statement of 1 MiB intermediates (a chain of elementwise ops over 64 points of 4096 floats,
    after a recurrence) keeps only what it still needs: the live torch bytes (every storage torch makes,
    `benchmarks.eager_memory.LiveTensorBytes`) stay well below all of them at once; values as the reference's.
    About a batched statement of fused ops, so it states the switches that make one (with vectorize or distribute
    off the chain runs point by point; with fusion off each op is a statement of its own, whose outputs live until
    the whole batched loop ends: 10.5 MB)."""
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.placeholder((4096,), "float32", domain=(t,))  # a recurrence; the chain runs batched after it
        x[0] = trl.full((4096,), 0.5, "float32")
        following = x * 0.99
        x[t + 1] = following
        last = collect(following[T - 1])
        y = x.exp()
        h = ((((y * 1.5 + 1.0).tanh() * 2.0 - 0.5).exp() + y) * 0.25)
        out = collect(h.sum()[0:T])  # read after the loop: the chain is not needed by the recurrence
    results = {}
    for backend in ("reference", "torch"):
        out.clear()
        last.clear()
        exe = ctx.compile({T: 64}, backend=backend, options=trl.CompileOptions(fusion=True, vectorize=True,
                                                                               distribute=True))
        if backend == "torch":
            with LiveTensorBytes() as live:
                exe.execute()
            assert exe.stats["batched_statements"] > 0
            # measured: 5.3 MB, against 11.6 MB with every intermediate alive until the statement ends
            assert live.peak < 7 * 64 * 4096 * 4
        else:
            exe.execute()
        results[backend] = dict(out)
    assert sorted(results["torch"]) == sorted(results["reference"])
    for key, value in results["reference"].items():
        np.testing.assert_allclose(results["torch"][key], value, rtol=1e-5)
