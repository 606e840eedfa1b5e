"""Every command-line entry point answers ``--help`` with exit status 0: each module with a ``__main__`` block
(found in the source tree, so a new one is covered) and the ``timerl`` console script of pyproject.toml.

All run in one child process, by `runpy` as ``python -m`` does, so the heavy imports happen once."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent

CHILD = """
import contextlib, importlib, io, json, runpy, sys
codes = {}
for module in sys.argv[1:]:
    sys.argv = [module, "--help"]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            if ":" in module:  # a console script, module:function
                name, function = module.split(":")
                getattr(importlib.import_module(name), function)()
            else:
                runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    except BaseException as error:
        code = f"{type(error).__name__}: {error}"
    codes[module] = [code, out.getvalue()[:3000]]
print("CODES=" + json.dumps(codes))
"""


def _entry_points() -> list[str]:
    modules = []
    for package in ("timerl", "algorithms", "benchmarks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text()
            if path.name == "__main__.py" or 'if __name__ == "__main__"' in text:
                parts = path.relative_to(ROOT).with_suffix("").parts
                modules.append(".".join(parts[:-1] if path.name == "__main__.py" else parts))
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    return modules + sorted(scripts.values())


def test_every_entry_point_answers_help():
    entries = _entry_points()
    assert "algorithms.egrl" in entries and "benchmarks" in entries and "timerl.command:main" in entries
    result = subprocess.run([sys.executable, "-c", CHILD, *entries], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    lines = [line for line in result.stdout.splitlines() if line.startswith("CODES=")]
    assert lines, result.stderr[-2000:]
    codes = json.loads(lines[0][len("CODES="):])
    failed = {module: code for module, code in codes.items() if code[0] != 0}
    assert not failed, failed
    assert all("usage" in output.lower() for _, output in codes.values()), codes  # help, not the command's work
