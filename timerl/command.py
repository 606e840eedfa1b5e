"""The `timerl` command: the engine's own verbs (`explain`), and every other verb found in the ``timerl.commands``
entry-point group, so that tools built on the engine (the benchmarks: `timerl bench`, `timerl plot-memory`) add
verbs without the engine importing them."""

from __future__ import annotations

import argparse
import os
import pathlib
import runpy
import sys
from importlib.metadata import entry_points

from timerl.runtime.explain import EXPLAIN_VARIABLE

GROUP = "timerl.commands"


def run_explained(script: str, script_args: list[str]) -> None:
    """`timerl explain script.py args...`: the script run as ``python script.py args...`` with `EXPLAIN_VARIABLE`
    set, so that every program it executes prints `Executable.explain` to stderr after it runs."""
    os.environ[EXPLAIN_VARIABLE] = "1"
    sys.argv = [script, *script_args]
    sys.path.insert(0, str(pathlib.Path(script).resolve().parent))
    runpy.run_path(script, run_name="__main__")


def registered() -> dict:
    """The verbs other packages register: name -> entry point (``main(argv)`` of their command line)."""
    return {point.name: point for point in entry_points(group=GROUP)}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    verbs = registered()
    if argv and argv[0] in verbs:
        try:
            command = verbs[argv[0]].load()
        except ImportError as error:
            raise SystemExit(f"timerl {argv[0]}: registered by {verbs[argv[0]].value}, which cannot be imported here "
                             f"({error}); run it from the repository's checkout") from error
        command(argv)
        return
    parser = argparse.ArgumentParser(prog="timerl")
    commands = parser.add_subparsers(dest="command", required=True)
    explain = commands.add_parser("explain", help="run a script; print how each statement of its programs runs")
    explain.add_argument("script")
    explain.add_argument("script_args", nargs=argparse.REMAINDER)
    for name in sorted(verbs):
        commands.add_parser(name, help=f"from {verbs[name].value} (`timerl {name} --help`)", add_help=False)
    args = parser.parse_args(argv)
    run_explained(args.script, args.script_args)


if __name__ == "__main__":
    main()
