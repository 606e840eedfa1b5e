"""Layers point down (shared/STYLE.md, example 13): symbolic expressions (with the errors and the compile
options, which import nothing else) at the bottom, then ops, the PDG and its passes, sched, the backends,
runtime, `compile.py`, the language (`timerl.rt`) and the libraries and tools on top. Read from the source (no import runs): no module imports a higher layer, no function-local import of a
timerl module dodges a cycle, and modules import one another without circles."""

from __future__ import annotations

import ast
from pathlib import Path

import timerl
from timerl.graphs import strongly_connected

PACKAGE = Path(timerl.__file__).parent

# bottom to top; a module belongs to the first layer with a prefix of its name
LAYERS = (
    ("foundation", ("timerl.errors", "timerl.files", "timerl.graphs", "timerl.options", "timerl.symbolic",
                    "timerl.symbolic_structure", "timerl.symbolic_conditions")),
    ("ops", ("timerl.ops",)),
    ("pdg", ("timerl.pdg",)),
    ("sched", ("timerl.sched",)),
    ("backends", ("timerl.backends",)),
    ("runtime", ("timerl.runtime",)),
    ("compile", ("timerl.compile",)),
    ("language", ("timerl.rt",)),
    ("libraries", ("timerl.nn", "timerl.optim", "timerl.distributions", "timerl.envs", "timerl.rl")),
    ("tools", ("timerl.memplot", "timerl.runlog", "timerl.command", "timerl.options_doc")),
)
TOP = len(LAYERS) - 1  # `timerl` itself, the user-facing package, sits on top

# function-local imports with a reason other than a cycle: module -> what it imports late, and why
LATE_IMPORTS = {
    "timerl.backends.base": ({"timerl.backends.torch_backend", "timerl.backends.jax_backend"},
                             "torch and jax load when a program first asks for them, not with timerl"),
    "timerl.runtime.devices": ({"timerl.backends.jax_sharded"}, "jax loads when a program asks for devices"),
}

# modules that are one module split in files, and import one another (re-exports at the bottom of symbolic)
ONE_MODULE = {frozenset({"timerl.symbolic", "timerl.symbolic_structure", "timerl.symbolic_conditions"})}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("timerl",) + path.relative_to(PACKAGE).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _target(module: str, name: str) -> str:
    """``from module import name``: the submodule when ``name`` is one, else the module."""
    return f"{module}.{name}" if f"{module}.{name}" in MODULES else module


def _imports(tree: ast.AST) -> tuple[set[str], set[str]]:
    """The timerl modules imported at module level (outside ``if TYPE_CHECKING:``), and inside functions."""
    top: set[str] = set()
    late: set[str] = set()

    def names(node: ast.AST) -> set[str]:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("timerl"):
            return {_target(node.module, alias.name) for alias in node.names}
        if isinstance(node, ast.Import):
            return {alias.name for alias in node.names if alias.name.startswith("timerl")}
        return set()

    def walk(node: ast.AST, inside_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue  # annotations only: nothing runs
            (late if inside_function else top).update(names(child))
            walk(child, inside_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(tree, False)
    return top, late


IMPORTS = {name: _imports(ast.parse(path.read_text())) for name, path in MODULES.items()}


def _layer(module: str) -> int:
    if module == "timerl":
        return TOP
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def test_every_module_has_a_layer():
    for module in MODULES:
        _layer(module)


def test_no_import_runs_up_the_layers():
    upward = [f"{module} ({LAYERS[_layer(module)][0]}) imports {target} ({LAYERS[_layer(target)][0]})"
              for module, (top, _) in IMPORTS.items() for target in sorted(top)
              if target in MODULES and _layer(target) > _layer(module)]
    assert not upward, "\n".join(upward)


def test_no_function_local_imports_of_timerl_modules():
    late = {module: found for module, (_, found) in IMPORTS.items() if found}
    for module, found in late.items():
        allowed, reason = LATE_IMPORTS.get(module, (set(), ""))
        assert found <= allowed, f"{module} imports {sorted(found - allowed)} inside a function"


def test_modules_import_one_another_without_circles():
    graph = {module: {t for t in top if t in MODULES and t != module} for module, (top, _) in IMPORTS.items()}
    components = strongly_connected({module: sorted(targets) for module, targets in graph.items()})
    circles = [c for c in components if len(c) > 1 and frozenset(c) not in ONE_MODULE]
    assert not circles, circles


USERS = ("algorithms", "benchmarks")  # built on the engine: the learners, the demo and the benchmarks


def test_the_engine_imports_none_of_its_users():
    """No timerl module imports the learners or the benchmarks, at module level or inside a function, nor loads
    them by file path; tools on top of the engine add `timerl` verbs through the ``timerl.commands`` entry points."""
    found = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom) else
                     [alias.name for alias in node.names] if isinstance(node, ast.Import) else [])
            found += [f"{module} imports {name}" for name in names if name.split(".")[0] in USERS]
        if "spec_from_file_location" in path.read_text():
            found.append(f"{module} loads modules by file path")
    assert not found, "\n".join(found)

