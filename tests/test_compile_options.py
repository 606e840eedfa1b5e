"""Every compile switch on, and each one off (`trl.CompileOptions`, STYLE 9): a corpus of programs (every SPEC
access pattern, recurrences forward and backward, reductions, draws, merges under conditions, a small
REINFORCE and a small PPO step with gradients and optimizer updates) on torch and jax, each variant against
the reference interpreter. Plus the options' own contract: presets, the loose flags, contradictions, and
``TIMERL_PASS_OFF`` and ``TIMERL_PASS_ON``."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import timerl as trl
from algorithms.ppo import gae, ppo_loss
from algorithms.reinforce import train
from conftest import collect
from timerl.options import PASS_OFF_VARIABLE, PASS_ON_VARIABLE, PRESETS, SWITCHES
from timerl.pdg.graph import Graph
from timerl.pdg.pipeline import PASSES, optimize_graph

RNG = np.random.default_rng(7)
X = RNG.normal(size=(2, 6, 3)).astype(np.float32)  # (i, t, features)
R = RNG.normal(size=(2, 6, 4)).astype(np.float32)  # (i, t, environments)
ENDS = (RNG.random((2, 6, 4)) < 0.3).astype(np.float32)


def windows():
    """Every index form of SPEC "Indexing the domain", over (i, t), each read reduced to one sink."""
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        x = trl.source(lambda p: X[p["i"], p["t"]], (3,), "float32", (i, t))
        y = x * 2.0 + 1.0  # a computed producer, so windows read stored values, not a source
        reads = [y[i, trl.min(t + 1, T - 1)], y[i, trl.max(t - 1, 0)], y[i, 0], y[i, T - 1], y[i, t % 2],
                 y[i, t // 2], y[i, t:T].sum(0), y[i, 0:t + 1].mean(0), y[i, t:trl.min(t + 3, T)].max(0),
                 y[i, trl.max(0, t - 2):t + 1].sum(0), y[i, 0:T].sum(0), y[0:I, t].sum(0), y.spatial[1:]]
        stores = [collect(read) for read in reads]
        stores.append(collect(y[i, t:T].discounted_sum(0.9) * y[i, t:T].discounted_cum_sum(0.5)[0]))
    return ctx, {I: 2, T: 6}, stores


def recurrences():
    """A forward recurrence, a backward one (``g[t-1] = r[t-1] + 0.9 g[t]``), merges with several branches,
    ``ctx.when`` and ``where``."""
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        r = trl.source(lambda p: R[p["i"] % 2, p["t"]], (4,), "float32", (i, t))
        s = trl.placeholder((4,), "float32", domain=(i, t))
        s[i, 0] = r[i, 0]
        s[i, t + 1] = s[i, t].tanh() * 0.5 + r[i, t + 1]
        g = trl.placeholder((4,), "float32", domain=(i, t))
        g[i, T - 1] = r[i, T - 1]
        g[i, t - 1] = r[i, t - 1] + 0.9 * g[i, t]
        w = trl.placeholder((4,), "float32", domain=(i,))  # over iterations: a running state
        w[0] = trl.zeros((4,))
        w[i + 1] = w[i] + s[i, T - 1] - g[i, 0]
        stores = [collect(s), collect(g), collect(w), collect(trl.where(s > 0, s, g).softmax(-1))]
        with ctx.when(t % 2 == 0):
            stores.append(collect(s * g))
    return ctx, {I: 3, T: 6}, stores


def reductions():
    """Reductions over the spatial shape and over whole dimensions, and a sum over the other dimension."""
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        x = trl.source(lambda p: R[p["i"] % 2, p["t"]], (4,), "float32", (i, t))
        m = x.reshape(2, 2) @ x.reshape(2, 2).transpose(0, 1)
        stores = [collect(x.sum()), collect(x.mean(0)), collect(x.max(0)), collect(x.argmax(0)),
                  collect(x.cumsum(0)), collect(x.log_softmax(-1)), collect(m.sum(1)),
                  collect(x[i, 0:T].sum(0).sum()), collect(x[0:I, 0:T].mean(0).mean(0)),
                  collect(trl.stack([x, x.exp()]).min(0)), collect(trl.cat([x, x.abs().sqrt()], 0))]
    return ctx, {I: 2, T: 5}, stores


def draws():
    """Random draws (uniform, normal, Gumbel noise computed from them alone) and a categorical sample."""
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        u = trl.rand((4,), domain=(i, t))
        n = trl.randn((2, 3), domain=(i, t))
        gumbel = -(-(u.clip(1e-6, 1.0)).log()).log()
        logits = trl.source(lambda p: X[p["i"], p["t"]], (3,), "float32", (i, t))
        sample = trl.distributions.Categorical(logits=logits).sample()
        stores = [collect(u), collect(n), collect(gumbel), collect(sample), collect(n[i, 0:T].sum(0))]
    return ctx, {I: 2, T: 5}, stores


def reinforce():
    """REINFORCE as in `algorithms.reinforce`, with RT dynamics instead of an environment: a state recurrence
    driven by sampled actions, masked Monte Carlo returns, the gradient summed over steps, Adam."""
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    with ctx:
        policy = trl.nn.MLP([3, 8, 2], activation="tanh", domain=(i,), seed=3)
        o = trl.placeholder((4, 3), "float32", domain=(i, t))
        o[i, 0] = trl.source(lambda p: X[p["i"] % 2, :4], (4, 3), "float32", (i,))
        pi = trl.distributions.Categorical(logits=policy(o))
        a = pi.sample()
        push = a.astype("float32") * 2.0 - 1.0
        o[i, t + 1] = (o[i, t] * 0.9 + push.unsqueeze(-1) * 0.1).tanh()
        r = -(o ** 2).sum(-1)
        d = trl.source(lambda p: ENDS[p["i"] % 2, p["t"]], (4,), "float32", (i, t))
        alive = (d[i, t:T].cumsum(0) - d[i, t:T]) == 0
        g = (r[i, t:T] * alive).discounted_sum(0.99)
        g = g - g.mean()
        loss = -(pi.log_prob(a) * g.detach()).mean()
        loss.backward()
        trl.optim.Adam(policy.parameters(), lr=1e-2).step()
        stores = [collect(loss), collect(a)] + [collect(p) for p in policy.parameters()]
    return ctx, {I: 3, T: 5}, stores


def ppo():
    """A PPO update as in `algorithms.ppo`: acting with the iteration's frozen weights, GAE as a backward
    recurrence, epochs as a dimension over the whole batch, the clipped surrogate with value loss and entropy."""
    ctx = trl.Context("i t e")
    i, t, e = ctx.dims
    I, T, E = ctx.bounds
    with ctx:
        actor = trl.nn.MLP([3, 8, 2], activation="tanh", domain=(i, e), seed=4)
        critic = trl.nn.MLP([3, 8, 1], activation="tanh", domain=(i, e), seed=5)
        o = trl.source(lambda p: np.stack([X[p["i"] % 2, p["t"]]] * 4) * 0.5, (4, 3), "float32", (i, t))
        acting_pi = trl.distributions.Categorical(logits=actor.frozen(i, 0)(o))
        a = acting_pi.sample()
        r = trl.source(lambda p: R[p["i"] % 2, p["t"]], (4,), "float32", (i, t)) + a.astype("float32")
        done = trl.source(lambda p: ENDS[p["i"] % 2, p["t"]] > 0.5, (4,), "bool", (i, t))
        value = critic.frozen(i, 0)(o).squeeze(-1)
        adv = gae(r, done, value, value[i, T - 1] * 0.0, 0.99, 0.95)
        ret = adv + value
        old_logp = acting_pi.log_prob(a)
        new_pi = trl.distributions.Categorical(logits=actor(o[i, 0:T]))
        loss, stats = ppo_loss(new_pi.log_prob(a[i, 0:T]), old_logp[i, 0:T], adv[i, 0:T],
                               critic(o[i, 0:T]).squeeze(-1), ret[i, 0:T], new_pi.entropy(), 0.2, 0.01, 0.5,
                               norm_adv=False)
        loss.backward()
        trl.optim.Adam(actor.parameters() + critic.parameters(), lr=1e-2, max_grad_norm=0.5).step()
        stores = [collect(loss), collect(stats["approx_kl"]), collect(adv)] + [
            collect(p) for p in actor.parameters()]
    return ctx, {I: 2, T: 4, E: 2}, stores


PROGRAMS = {f.__name__: f for f in (windows, recurrences, reductions, draws, reinforce, ppo)}

# The variants: the defaults, the switches that are off by default turned on, each switch off, the presets. The
# PDG and scheduling switches produce the same graph and schedule for either backend, so they run on torch, the
# cheaper one to compile for; jax runs the defaults and its own switches (`make test-passes` runs the whole suite,
# jax included, with each switch off).
SHARED = ("contributions", "algebra", "cse", "dce", "fusion", "state_fusion", "per_iteration_fusion", "vectorize",
          "distribute")
OFF_BY_BACKEND = {"torch": SHARED + ("matmul_add", "donation", "prefetch_draws"),
                  "jax": ("vectorize", "scan_loops", "jit_groups")}
VARIANTS = {"defaults": trl.CompileOptions(), "incrementalize on": trl.CompileOptions(incrementalize=True),
            "memory_aware on": trl.CompileOptions(memory_aware=True),
            **{f"{name} off": trl.CompileOptions(**{name: False}) for name in sorted(set(sum(
                OFF_BY_BACKEND.values(), ())))},
            **{f"preset {name}": trl.CompileOptions.preset(name) for name in PRESETS if name != "default"}}
ON_JAX = {"defaults"} | {f"{name} off" for name in OFF_BY_BACKEND["jax"]}
# PPO's program is the largest: it runs the defaults, vectorize off and running sums only (each of the other
# variants costs 2-3 s of CPU, and with fusion off isl's problem takes about 40 s)
ONLY = {"ppo": {"defaults", "vectorize off", "incrementalize on"}}
CASES = [(program, backend, variant) for program in PROGRAMS for backend in OFF_BY_BACKEND for variant in VARIANTS
         if (variant in ON_JAX if backend == "jax" else not variant.endswith(" off")
             or variant[:-4] in OFF_BY_BACKEND[backend]) and variant in ONLY.get(program, VARIANTS)]

_REFERENCE: dict[str, list[dict]] = {}


def _values(program: str, backend: str, options: trl.CompileOptions | None) -> list[dict]:
    ctx, bounds, stores = PROGRAMS[program]()
    exe = ctx.compile(bounds=bounds, backend=backend, seed=1,
                      **({} if options is None else {"options": options}))
    exe.execute()
    return [dict(store) for store in stores]


@pytest.mark.parametrize("program, backend, variant", CASES)
def test_every_switch_agrees_with_the_reference(program, backend, variant, monkeypatch):
    monkeypatch.delenv(PASS_OFF_VARIABLE, raising=False)  # the variant is exactly what this test compiles
    monkeypatch.delenv(PASS_ON_VARIABLE, raising=False)
    if program not in _REFERENCE:
        _REFERENCE[program] = _values(program, "reference", None)
    want = _REFERENCE[program]
    got = _values(program, backend, VARIANTS[variant])
    for k, (store, expected) in enumerate(zip(got, want)):
        assert sorted(store) == sorted(expected), f"sink {k}: points differ"
        for key, value in expected.items():
            np.testing.assert_allclose(store[key], value, rtol=1e-4, atol=1e-5,
                                       err_msg=f"{program}, {backend}, {variant}: sink {k} at {key}")


# ---- the options themselves ---------------------------------------------------------------------------------


def _program():
    ctx = trl.Context("t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: float(p["t"]), domain=(t,))
        (x[t:T].sum() * 1.0).sink(lambda p, v: None)
    return ctx, T


def test_presets_state_only_their_differences_and_the_flags_map_onto_fields(monkeypatch):
    monkeypatch.delenv(PASS_OFF_VARIABLE, raising=False)
    monkeypatch.delenv(PASS_ON_VARIABLE, raising=False)
    defaults = trl.CompileOptions()
    unoptimized = trl.CompileOptions.preset("unoptimized")
    assert {f: getattr(unoptimized, f) for f in SWITCHES if getattr(unoptimized, f) != getattr(defaults, f)} == {
        name: False for name in PRESETS["unoptimized"] if getattr(defaults, name) is not False}
    ctx, T = _program()
    assert ctx.compile({T: 3}).options == defaults.resolved(None)
    assert ctx.compile({T: 3}, optimize=False).options == unoptimized.resolved(None)
    assert ctx.compile({T: 3}, optimize=False, vectorize=True).options.vectorize  # a flag overrides optimize
    budget = ctx.compile({T: 3}, device_memory=1 << 20).options
    assert budget.incrementalize and budget.memory_aware and not budget.per_iteration_fusion
    assert not budget.vectorize and not budget.prefetch_draws
    exe = ctx.compile({T: 3}, options=trl.CompileOptions(cse=False, dce=False))
    assert not exe.options.cse and not exe.options.dce and exe.options.algebra
    assert dataclasses.is_dataclass(exe.options) and set(exe.stats["compile_phases"]) >= {
        "pdg passes", "schedule", "lowering"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        exe.options.cse = True


@pytest.mark.parametrize("call, message", [
    (dict(options=trl.CompileOptions(vectorize=False), vectorize=True), "vectorize=True contradicts options="),
    (dict(options=trl.CompileOptions(cse=False), optimize=True), r"optimize=True \(options= sets cse"),
    (dict(options={"cse": False}), "options= is a trl.CompileOptions"),
])
def test_contradictory_or_wrong_options_name_the_users_line(call, message):
    ctx, T = _program()
    with pytest.raises(trl.TimeRLError, match=r"test_compile_options.py:\d+: " + message):
        ctx.compile({T: 3}, backend="torch", **call)
    with pytest.raises(trl.TimeRLError, match=r"test_compile_options.py:\d+: CompileOptions.cse is True or False"):
        trl.CompileOptions(cse="no")
    with pytest.raises(trl.TimeRLError, match="unknown CompileOptions preset 'fast'"):
        trl.CompileOptions.preset("fast")


def test_pass_off_variable_turns_switches_off_unless_the_call_sets_them(monkeypatch):
    ctx, T = _program()
    monkeypatch.delenv(PASS_ON_VARIABLE, raising=False)
    monkeypatch.setenv(PASS_OFF_VARIABLE, "cse, vectorize")
    options = ctx.compile({T: 3}).options
    assert not options.cse and not options.vectorize and options.dce
    assert ctx.compile({T: 3}, vectorize=True).options.vectorize
    assert ctx.compile({T: 3}, options=trl.CompileOptions()).options == trl.CompileOptions().resolved(None)
    monkeypatch.setenv(PASS_OFF_VARIABLE, "cse,fast")
    with pytest.raises(trl.TimeRLError, match="TIMERL_PASS_OFF='cse,fast' names no compile switch"):
        ctx.compile({T: 3})


def test_pass_on_variable_turns_switches_on_unless_the_call_sets_them(monkeypatch):
    ctx, T = _program()
    monkeypatch.delenv(PASS_OFF_VARIABLE, raising=False)
    monkeypatch.setenv(PASS_ON_VARIABLE, "incrementalize, recompute")
    options = ctx.compile({T: 3}).options
    assert options.incrementalize and options.recompute and options.cse
    assert not ctx.compile({T: 3}, recompute=False).options.recompute
    assert ctx.compile({T: 3}, options=trl.CompileOptions()).options == trl.CompileOptions().resolved(None)
    monkeypatch.setenv(PASS_OFF_VARIABLE, "cse,recompute")
    with pytest.raises(trl.TimeRLError, match="TIMERL_PASS_OFF and TIMERL_PASS_ON both name recompute"):
        ctx.compile({T: 3})
    monkeypatch.delenv(PASS_OFF_VARIABLE)
    monkeypatch.setenv(PASS_ON_VARIABLE, "fast")
    with pytest.raises(trl.TimeRLError, match="TIMERL_PASS_ON='fast' names no compile switch"):
        ctx.compile({T: 3})


def test_the_verifier_after_each_pass_names_the_pass_that_broke_the_graph():
    ctx, T = _program()
    graph = ctx.graph()

    def drop_indices(graph: Graph) -> Graph:  # a broken pass: every read loses its index expressions
        nodes = tuple(dataclasses.replace(n, inputs=tuple(dataclasses.replace(e, index=()) for e in n.inputs))
                      for n in graph.nodes)
        return dataclasses.replace(graph, nodes=nodes)

    broken = PASSES[:1] + (("cse", drop_indices),) + PASSES[2:]
    with pytest.raises(trl.TimeRLError, match="after cse: "):
        optimize_graph(graph, {T: 3}, trl.CompileOptions(), broken)
    optimize_graph(graph, {T: 3}, trl.CompileOptions(checks=False, dce=False), broken)  # unchecked: not seen


def test_fusion_off_schedules_reinforce_on_rt_cartpole_op_by_op():
    """With fusion off, isl finds no order for REINFORCE's per-iteration-fused statements (RT CartPole), so the
    scheduler tries again op by op; the failed try names no cycle (the transitive closure of the dependences
    that would take ran for over 15 minutes here, found by ``TIMERL_PASS_OFF=fusion``). Its iteration equals
    the reference interpreter's."""
    curves = [[(row["episodes"], row["mean_length"], row["mean_return"])
               for row in train("CartPole-v1", iterations=1, num_envs=2, steps=4, backend=backend, simulator="rt",
                                compile_options=options, seed=1)]
              for backend, options in (("reference", {}),
                                       ("torch", {"options": trl.CompileOptions(fusion=False)}))]
    assert curves[1] == curves[0]


def test_stats_say_what_the_compiler_chose_for_memory():
    """Under a device_memory budget the compiler turns running sums and the memory-aware schedule on by itself
    (and vectorized loops off); exe.stats["memory_choices"] says so."""
    def program():
        ctx = trl.Context("i t")
        (i, t), (I, T) = ctx.dims, ctx.bounds
        with ctx:
            w = trl.param(np.ones(3, np.float32), domain=(i,))
            x = trl.rand((3,), domain=(i, t))
            (w * x).sum().backward()
            trl.optim.SGD([w], lr=0.1).step()
            w.sink(lambda p, v: None)
        return ctx, {I: 2, T: 6}

    ctx, bounds = program()
    default = ctx.compile(bounds=bounds, backend="torch").stats["memory_choices"]
    ctx, bounds = program()
    budget = ctx.compile(bounds=bounds, backend="torch", device_memory=1 << 20).stats["memory_choices"]
    assert default["device_memory"] is None and not default["incrementalize"] and default["vectorize"]
    assert budget["device_memory"] == 1 << 20 and budget["incrementalize"] and budget["memory_aware"]
    assert not budget["vectorize"] and budget["offloads_kept"] == 0
