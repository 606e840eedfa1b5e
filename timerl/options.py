"""`CompileOptions`: one switch per transformation of the compile pipeline (`timerl.compile`), frozen.

Every switch changes how fast a program runs or how much memory it needs, never its results: the test suite
runs programs with every switch on and again with each one off, against the reference interpreter
(`tests/test_compile_options.py`). ``TIMERL_PASS_OFF=cse`` (a comma-separated list of field names) turns
those switches off in every compile of the process that neither passes ``options=`` nor sets them with a flag
(`make test-passes`); ``TIMERL_PASS_ON=recompute`` likewise turns switches on. A test about one switch
pins it with ``options=``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Mapping

from timerl.errors import TimeRLError, user_location

PASS_OFF_VARIABLE = "TIMERL_PASS_OFF"
PASS_ON_VARIABLE = "TIMERL_PASS_ON"


@dataclass(frozen=True)
class CompileOptions:
    """What the compiler may do to a program; each field is one step of the pipeline, in pipeline order.

    ``None`` (only where a field allows it) means "decided by the compile call": see the field."""

    # ---- PDG passes (`timerl.pdg.pipeline`) ------------------------------------------------------------------
    checks: bool = True
    """Run the PDG verifier after every pass; its error names the pass that broke the graph. (The graph as
    the user built it is always verified: that is where the user's mistakes show.)"""
    contributions: bool = True
    """Gradient nodes whose every contribution is read at their own point from an op evaluable everywhere
    become plain sums (`timerl.pdg.contributions`): the backward pass then fuses like the forward pass, and
    isl schedules far fewer statements (REINFORCE's learning over ``t`` becomes one statement). isl may then place a once-per-iteration statement at the first or last step of a loop;
    such parts move out of the loop (`timerl.sched.peel`), so the loop still runs batched."""
    algebra: bool = True
    """Algebraic simplification (`timerl.pdg.algebra`): ops that return an input unchanged are read through."""
    cse: bool = True
    """Common subexpression elimination (`timerl.pdg.cse`): equal ops reading equal inputs become one."""
    dce: bool = True
    """Dead code elimination (`timerl.pdg.dce`): ops that no sink, placeholder or UDF needs are dropped."""
    incrementalize: bool | None = None
    """Running sums instead of sums over a whole dimension (`timerl.pdg.incrementalize`, paper §5.3): memory
    follows n-step windows, not ``T``. The loops holding a running sum run it point by point and batch the rest
    in chunks of points (`timerl.runtime.batch.chunk_points`), so the peak stays flat in ``T``. ``None``: on
    when ``device_memory`` is set."""
    recompute: bool = False
    """Values that wait for a late reader (after a read of a later step: a Monte Carlo return) are computed
    again right before it from values kept anyway, where the flops per byte freed are few
    (`timerl.pdg.recompute`; beyond the paper, like ``jax.checkpoint`` chosen automatically). Off by default:
    it costs time and pays only where memory is the constraint."""
    # ---- scheduling (`timerl.sched`) ---------------------------------------------------------------------------
    fusion: bool = True
    """Dataflow groups (paper §5.4): ops on the same points joined by identity reads become one statement."""
    state_fusion: bool = True
    """A placeholder that only carries one group's state from one step to the next runs inside that group, at
    its points (`timerl.sched.group._absorb_own_state`; with ``fusion``): fewer statements for a game's move."""
    per_iteration_fusion: bool = True
    """Statements that run once per outer iteration (parameters, optimizer state) share one isl statement per
    kind (`timerl.sched.group._fuse_per_iteration`); never together with a memory-aware schedule."""
    memory_aware: bool | None = None
    """Nest the schedule below its outermost band so that values die sooner (`timerl.sched.schedule`).
    ``None``: on with ``incrementalize``."""
    # ---- lowering and execution (`timerl.runtime`) ------------------------------------------------------------
    vectorize: bool = True
    """Loops without backward dependences run statement by statement, each over all the loop's points in one
    batched call (`timerl.runtime.batch`, paper §5.2). Off whenever ``device_memory`` is set."""
    distribute: bool = True
    """Loop distribution around recurrences (with ``vectorize``; on jax only with ``scan_loops`` off): what a
    recurrent statement computes that its recurrence does not need becomes a statement of its own
    (`timerl.sched.group._recurrent_tail`: a rollout's critic values and ``1 - done``), and a loop that cannot
    run statement by statement runs as consecutive loops, the recurrence point by point and the rest batched
    (`timerl.runtime.distribute`)."""
    scan_loops: bool = True
    """jax: loops of array kernels only become one `jax.lax.scan` (`timerl.runtime.jax_scan`). Off whenever
    ``device_memory`` is set."""
    jit_groups: bool = True
    """jax: a group's pure kernels run as one `jax.jit` instead of one dispatch per op."""
    compile_groups: bool = False
    """torch: a group's pure kernels run as one function compiled by TorchInductor (C++ loops on the CPU;
    `timerl.runtime.torch_plan`) instead of one Python call and dispatch per op; then ``matmul_add``,
    ``donation`` and ``prefetch_draws`` do not apply. Off by default: compiling takes seconds for a small group
    and minutes for a large one, which pays only for a group run many times (plan once, run many)."""
    matmul_add: bool = True
    """torch: ``x @ w + b`` read nowhere else becomes one ``addmm`` (`timerl.runtime.fusions.matmul_adds`)."""
    donation: bool = True
    """torch: an elementwise op whose input dies at it writes into that input's buffer (paper §6.2)."""
    prefetch_draws: bool = True
    """Random draws, and the noise computed from them alone, come 32 points of the innermost dimension ahead
    (`timerl.runtime.draws`); the values are the same. Off whenever ``device_memory`` is set."""

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            optional = field.type == "bool | None"
            if not (isinstance(value, bool) or (optional and value is None)):
                raise TimeRLError(f"{user_location()}: CompileOptions.{field.name} is True or False"
                                  f"{' or None' if optional else ''}, got {value!r}")

    @classmethod
    def preset(cls, name: str) -> "CompileOptions":
        """One of `PRESETS`, by name."""
        if name not in PRESETS:
            raise TimeRLError(f"{user_location()}: unknown CompileOptions preset {name!r}; choose one of "
                              f"{', '.join(PRESETS)}")
        return cls(**PRESETS[name])

    def switched_off(self, names: tuple[str, ...] | list[str]) -> "CompileOptions":
        """These options with the named switches off."""
        unknown = sorted(set(names) - set(SWITCHES))
        if unknown:
            raise TimeRLError(f"{user_location()}: unknown compile switch {', '.join(unknown)}; the switches are "
                              f"{', '.join(SWITCHES)}")
        return dataclasses.replace(self, **{name: False for name in names})

    def switched_on(self, names: tuple[str, ...] | list[str]) -> "CompileOptions":
        """These options with the named switches on."""
        return dataclasses.replace(self.switched_off(names), **{name: True for name in names})

    def distributes(self, backend: str) -> bool:
        """Whether loops are distributed around recurrences (``distribute``) for this backend."""
        return self.distribute and self.vectorize and not (backend == "jax" and self.scan_loops)

    def resolved(self, device_memory: int | None) -> "CompileOptions":
        """The options with every ``None`` decided and what a memory budget excludes switched off."""
        incrementalize = device_memory is not None if self.incrementalize is None else self.incrementalize
        memory_aware = incrementalize if self.memory_aware is None else self.memory_aware
        budget = {} if device_memory is None else dict(vectorize=False, distribute=False, scan_loops=False,
                                                       prefetch_draws=False)
        return dataclasses.replace(self, incrementalize=incrementalize, memory_aware=memory_aware,
                                   per_iteration_fusion=self.per_iteration_fusion and not memory_aware, **budget)


SWITCHES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(CompileOptions))

# Transformations that ``optimize=False`` turns off (SPEC: "all PDG transformations"); code generation choices
# (jit_groups, matmul_add, donation, prefetch_draws) and the checks stay as they are.
TRANSFORMATIONS = ("contributions", "algebra", "cse", "dce", "incrementalize", "fusion", "state_fusion",
                   "per_iteration_fusion",
                   "memory_aware", "vectorize", "distribute", "scan_loops")

# Each preset states only how it differs from the defaults.
PRESETS: Mapping[str, Mapping[str, Any]] = {
    "default": {},
    "unoptimized": {name: False for name in TRANSFORMATIONS},  # what ``optimize=False`` means
    # peak memory follows n-step windows, not T
    "memory": {"incrementalize": True, "vectorize": False, "distribute": False},
}

# The loose keyword flags of `ctx.compile` and the fields they set.
FLAGS = ("vectorize", "incrementalize", "scan_loops", "recompute")


def from_call(options: Any, optimize: Any, flags: Mapping[str, Any]) -> CompileOptions:
    """The options of one ``ctx.compile`` call: ``options=`` exactly as given (a flag that contradicts it is an
    error), or else the loose flags (``optimize`` picks the default or the "unoptimized" preset, an explicit flag
    overrides its field) with ``TIMERL_PASS_OFF`` turning off and ``TIMERL_PASS_ON`` turning on the switches no
    flag set."""
    given = {name: value for name, value in flags.items() if value is not None}
    if options is not None:
        if not isinstance(options, CompileOptions):
            raise TimeRLError(f"{user_location()}: options= is a trl.CompileOptions, got {options!r}")
        contradictions = [f"{name}={value!r}" for name, value in given.items() if getattr(options, name) != value]
        if optimize is not None:
            meant = CompileOptions() if optimize else CompileOptions.preset("unoptimized")  # what the flag says
            differs = [name for name in TRANSFORMATIONS
                       if getattr(options, name) not in (None, getattr(meant, name))]
            if differs:
                contradictions.append(f"optimize={optimize!r} (options= sets {', '.join(differs)} otherwise)")
        if contradictions:
            verb = "contradicts" if len(contradictions) == 1 else "contradict"
            raise TimeRLError(f"{user_location()}: {' and '.join(contradictions)} {verb} options=; give each "
                              "switch once, in options=")
        return options  # exactly as given: how a test pins the switch it is about
    options = DEFAULT if optimize is None or optimize else CompileOptions.preset("unoptimized")
    options = dataclasses.replace(options, **given)
    off, on = passes_off(), passes_on()
    both = sorted(set(off) & set(on))
    if both:
        raise TimeRLError(f"{PASS_OFF_VARIABLE} and {PASS_ON_VARIABLE} both name {', '.join(both)}")
    options = options.switched_off([name for name in off if name not in given])
    return options.switched_on([name for name in on if name not in given])


def passes_off() -> list[str]:
    """The switches ``TIMERL_PASS_OFF`` names (empty when it is unset)."""
    return _switches_named(PASS_OFF_VARIABLE)


def passes_on() -> list[str]:
    """The switches ``TIMERL_PASS_ON`` names (empty when it is unset)."""
    return _switches_named(PASS_ON_VARIABLE)


def _switches_named(variable: str) -> list[str]:
    value = os.environ.get(variable, "")
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = sorted(set(names) - set(SWITCHES))
    if unknown:
        raise TimeRLError(f"{variable}={value!r} names no compile switch ({', '.join(unknown)}); the "
                          f"switches are {', '.join(SWITCHES)}")
    return names


DEFAULT = CompileOptions()
