"""`pip install .` gives a working package: the wheel holds every module and data file the code reads, and the
installed copy (not this checkout) runs the demo and loads a workload, the REGAL weights and the XLA dumps."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out, source = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("source") / "timerl"
    # a clean copy: setuptools' build/ folder in the checkout may hold files the tree no longer has
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__",
                                                                 ".pytest_cache", ".hypothesis", "out"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(source)], check=True, capture_output=True)
    (found,) = out.glob("timerl-*.whl")
    return found


def test_the_wheel_holds_every_file_the_packages_read(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in ("timerl", "algorithms"):
        for path in (ROOT / package).rglob("*.py"):
            assert str(path.relative_to(ROOT)) in names, f"{path.relative_to(ROOT)} missing from the wheel"
    for data in [*(ROOT / "algorithms/mmap/workloads/data").rglob("*.json*"),
                 *(ROOT / "algorithms/regal/weights").iterdir()]:
        assert str(data.relative_to(ROOT)) in names, f"{data.relative_to(ROOT)} missing from the wheel"


SMOKE = """
import algorithms, timerl
from pathlib import Path
assert Path(timerl.__file__).is_relative_to(Path.cwd()), timerl.__file__  # the installed copy, not the checkout
import numpy as np
from algorithms import demo
np.testing.assert_allclose(demo.timerl_returns("reference"), demo.numpy_returns())
from algorithms.mmap.workloads import list_workloads, load_workload
assert len(list_workloads()) >= 30
load_workload(list_workloads()[0])
from algorithms.regal import train
for weights in sorted((Path(train.__file__).parent / "weights").iterdir()):
    assert weights.stat().st_size > 0, weights
print("smoke ok")
"""


def test_the_installed_wheel_runs_outside_the_checkout(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run([sys.executable, "-c", SMOKE], cwd=target, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "smoke ok" in done.stdout
