"""Ray for the learners' ``--workers N`` (EGRL's population, REGAL's BRKGA jobs, MuZero's self-play actors):
started once per process, on first use. With a cluster address (``--ray-address``, or ``RAY_ADDRESS`` in the
environment) the process joins that cluster; without one it starts a local Ray with ``workers`` CPUs, no
dashboard and the workers' output kept out of the driver's. A process that already called ``ray.init`` (a
cluster, or a test session's shared Ray) keeps its own setting. Work travels as Ray objects (weights, workloads,
graphs), so the nodes of a cluster need the package installed, not a shared filesystem.
"""

from __future__ import annotations

import argparse
import os

import ray

ADDRESS_VARIABLE = "RAY_ADDRESS"


def start(workers: int) -> None:
    """Ray running in this process: the cluster at ``RAY_ADDRESS`` if set, else a local one with ``workers``
    CPUs, if this call starts it."""
    if ray.is_initialized():
        return
    address = os.environ.get(ADDRESS_VARIABLE)
    if address:  # an existing cluster decides its own resources: it refuses num_cpus
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    else:
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False)


def add_address_argument(parser: argparse.ArgumentParser) -> None:
    """``--ray-address ADDRESS`` on a learner's command line (default: ``RAY_ADDRESS``, else a local Ray)."""
    parser.add_argument("--ray-address", default=os.environ.get(ADDRESS_VARIABLE),
                        help="join the Ray cluster at ADDRESS (host:port; default: $RAY_ADDRESS, else start a "
                             "local Ray with --workers CPUs)")


def use_address(address: str | None) -> None:
    """Make `start` join the cluster at ``address`` (from ``--ray-address``); ``None`` keeps the default."""
    if address:
        os.environ[ADDRESS_VARIABLE] = address
