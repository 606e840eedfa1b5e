"""The algorithm zoo: each module ``benchmarks/zoo/<name>.py`` is one algorithm, its timerl program (in
``algorithms/``) beside an eager twin in plain CleanRL-style PyTorch with the same sizes, semantics and update count.

A module defines ``SIZES = [(envs, steps), ...]`` (small first), ``run_timerl(envs, steps, iterations, backend,
seed)`` and ``run_eager(envs, steps, iterations, seed)``, each returning at least ``{"seconds": [...],
"cpu_seconds": [...], "returns": [...]}``: per iteration, its wall seconds, CPU seconds and mean episode return.
`modules` finds every such module; `timerl bench zoo` runs them side by side (`benchmarks/zoo_bench.py`).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

PROTOCOL = ("SIZES", "run_timerl", "run_eager")


def modules() -> dict[str, ModuleType]:
    """Every zoo module by name, in name order; a module missing part of the protocol is an error."""
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        missing = [name for name in PROTOCOL if not hasattr(module, name)]
        if missing:
            raise TypeError(f"benchmarks/zoo/{info.name}.py lacks {', '.join(missing)} of the zoo's protocol")
        found[info.name] = module
    return found


def from_curve(curve: list[dict]) -> dict[str, list[float]]:
    """A timerl learner's curve (rows with `timerl.runlog.IterationClock`'s seconds) as the protocol's dict."""
    return {"seconds": [row["iteration_seconds"] for row in curve],
            "cpu_seconds": [row["iteration_cpu_seconds"] for row in curve],
            "returns": [row["mean_return"] for row in curve]}
