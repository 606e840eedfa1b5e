"""Local Ray for the learners' ``--workers N`` (EGRL's population, REGAL's BRKGA jobs, MuZero's self-play
actors): started once per process, on first use, with ``workers`` CPUs, no dashboard and the workers' output
kept out of the driver's. A process that already called ``ray.init`` (a cluster, or a test session's shared
local Ray) keeps its own setting.
"""

from __future__ import annotations

import ray


def start(workers: int) -> None:
    """Ray running in this process, with ``workers`` CPUs if this call starts it."""
    if not ray.is_initialized():
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
