"""The manual stays true: every relative link in the README and docs/ resolves, every ```python block of the
README, docs/language.md and the tutorial runs (in order, one namespace per page, in a scratch directory),
docs/compile-options.md is what `timerl.options_doc` renders from `CompileOptions` today, and neither the docs nor
the code's docstrings narrate how the work went (numbered work periods, machine loads): git keeps that.

A block that is not meant to run is fenced ```python no-run (used sparingly: a fragment, or a command that
takes minutes).
"""

from __future__ import annotations

import pathlib
import re

import pytest

from timerl.options_doc import PAGE, render

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
RUNNABLE = ("README.md", "docs/language.md", "docs/tutorial-a2c.md")

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```(?!`)(\S*)[ \t]*(.*)$")


def _relative_links(text: str) -> list[str]:
    outside_code = re.sub(r"```.*?```", "", text, flags=re.S)
    targets = [match.group(1) for match in LINK.finditer(outside_code)]
    return [t for t in targets if not re.match(r"^(https?:|mailto:|#)", t)]


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of every ```python block not marked no-run."""
    blocks, lines, k = [], text.splitlines(), 0
    while k < len(lines):
        match = FENCE.match(lines[k])
        if not match or not match.group(1):
            k += 1
            continue
        language, marks, start = match.group(1), match.group(2), k + 1
        k += 1
        while k < len(lines) and not lines[k].startswith("```"):
            k += 1
        if language == "python" and "no-run" not in marks:
            blocks.append((start + 1, "\n".join(lines[start:k])))
        k += 1
    return blocks


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = [target for target in _relative_links(page.read_text())
              if not (page.parent / target.split("#", 1)[0]).exists()]
    assert not broken, f"{page.relative_to(ROOT)}: links to missing files: {broken}"


@pytest.mark.parametrize("name", RUNNABLE)
def test_python_blocks_run(name, tmp_path, monkeypatch, capsys):
    page = ROOT / name
    if not page.exists():
        pytest.skip(f"{name} is not written yet")
    blocks = python_blocks(page.read_text())
    assert blocks, f"{name} has no runnable python block"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for line, code in blocks:
        try:
            exec(compile(code, f"{name}:{line}", "exec"), namespace)
        except Exception as error:  # the page's own line in the message, then the original error
            raise AssertionError(f"{name}, the block at line {line} failed: {error!r}") from error


def test_compile_options_page_is_current():
    assert PAGE.read_text() == render(), "docs/compile-options.md is stale: run `python -m timerl.options_doc`"


def test_the_no_run_mark_is_rare():
    """At most a few blocks per page opt out, so the pages stay executable."""
    for name in RUNNABLE:
        page = ROOT / name
        if page.exists():
            assert page.read_text().count("```python no-run") <= 4, name


# How work went, not what the code does: "the sixth session", "session 8", "load ~12" (the stamps of
# docs/benchmarks.md say the load a table was measured at, which is what they are for).
NARRATIVE = re.compile(r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|"
                       r"thirteenth|fourteenth|fifteenth) (session|pass)\b|\bsessions? [0-9]+|"
                       r"\bload (average )?(of )?[~<]? ?[0-9]", re.I)


def _product_files() -> list[pathlib.Path]:
    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    for folder in ("timerl", "algorithms", "benchmarks", "tests"):
        files += (ROOT / folder).rglob("*.py")
        files += (ROOT / folder).rglob("*.md")
    return [f for f in files if f.name != "benchmarks.md"]


def test_nothing_narrates_its_own_development():
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}"
             for path in _product_files() for number, line in enumerate(path.read_text().splitlines(), start=1)
             if NARRATIVE.search(line) and path.name != "test_docs.py"]
    assert not found, "history belongs in git, not in the product:\n" + "\n".join(found)


def test_the_readme_stays_a_front_door():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250

