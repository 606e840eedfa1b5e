"""The learners on a Ray cluster of two nodes: a head and a worker node started on loopback ports here (as
`ray start --head` and `ray start --address` would on two machines), each with one CPU. EGRL's population, REGAL's
BRKGA jobs and MuZero's self-play actors join it through ``RAY_ADDRESS`` and give the same results as serial runs
(their own Ray tests, run again against the cluster); two one-CPU tasks held together land on both nodes. The
cluster uses Ray's token authentication (``RAY_AUTH_MODE=token``), the default of `ray start`."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))
LEARNER_RAY_TESTS = ["tests/egrl/test_egrl_workers.py", "tests/regal/test_regal_ray.py",
                     "tests/muzero/test_muzero_actors.py"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _node(*arguments: str, env: dict) -> subprocess.Popen:
    """One Ray node in the foreground (``--block``) in its own process group, so that stopping it stops only it
    (``ray stop`` would stop every Ray on the machine, other tests' included)."""
    return subprocess.Popen([RAY, "start", "--block", "--num-cpus=1", "--disable-usage-stats", *arguments],
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _stop(node: subprocess.Popen) -> None:
    try:
        os.killpg(node.pid, signal.SIGTERM)
        node.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(node.pid, signal.SIGKILL)


def _driver(code_or_args: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *code_or_args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


NODES_CHECK = """
import time, ray
ray.init(log_to_driver=False, configure_logging=False)  # RAY_ADDRESS: the cluster
deadline = time.time() + 120
while len([n for n in ray.nodes() if n["Alive"]]) < 2 and time.time() < deadline:
    time.sleep(1)
assert len([n for n in ray.nodes() if n["Alive"]]) == 2, ray.nodes()

@ray.remote(num_cpus=1)
def where(seconds):
    time.sleep(seconds)
    return ray.get_runtime_context().get_node_id()

print(len(set(ray.get([where.remote(3.0), where.remote(3.0)]))))
"""


@pytest.fixture(scope="module")
def cluster():
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must fit 107 characters
    port = _free_port()
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    # token authentication, as `ray start` sets up a cluster by default: every node and driver holds the token
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    head = _node("--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}",
                 f"--node-manager-port={_free_port()}", f"--object-manager-port={_free_port()}", env=env)
    worker = None
    try:
        address = f"127.0.0.1:{port}"
        time.sleep(5)
        worker = _node(f"--address={address}", f"--node-manager-port={_free_port()}",
                       f"--object-manager-port={_free_port()}", env=env)
        yield {**env, "RAY_ADDRESS": address}
    finally:
        for node in (worker, head):
            if node is not None:
                _stop(node)
        shutil.rmtree(temp, ignore_errors=True)


def test_two_one_cpu_tasks_run_on_both_nodes(cluster):
    done = _driver(["-c", NODES_CHECK], cluster, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "2"


def test_the_learners_equal_serial_on_the_cluster(cluster):
    done = _driver(["-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-x", *LEARNER_RAY_TESTS], cluster,
                   timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout and "deselected" not in done.stdout
