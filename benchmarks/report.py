"""docs/benchmarks.md as named sections, each rewritten by the benchmark that owns it.

A section lies between ``<!-- begin NAME -->`` and ``<!-- end NAME -->``; `write_section` replaces it (or appends
it) and stamps it with the machine, the commit, the date and the command that produced it, so every table says
where its numbers come from.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import platform
import subprocess

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
HEADER = ("# Benchmarks\n\nEvery table below is written by the command named under it (`make bench` runs them all);"
          " each says the machine, commit and date it was measured on.\n")


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=DOCS.parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def stamp(command: str) -> str:
    """One line: machine, load, commit, date and the command, for the foot of a table."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"*{platform.machine()}, {os.cpu_count()} cores, load {load:.1f} at the start; commit {_commit()}; "
            f"{when}; `{command}`*")


def write_section(name: str, title: str, body: str, command: str, path: pathlib.Path = DOCS) -> None:
    """Replace (or append) section ``name`` of ``path`` with ``## title``, ``body`` and a `stamp` line."""
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    block = f"{begin}\n## {title}\n\n{body.rstrip()}\n\n{stamp(command)}\n{end}"
    text = path.read_text() if path.exists() else HEADER
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1]
        text = head + block + tail
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)
