"""Which workloads the game tests play: the ten first workloads and four small ones whose programs bring new
structure (a cond inside a differentiated scan, a fori_loop of optimizer steps, embedding gathers and
scatters, a sampling loop). The whole suite (34 programs up to 17,634 buffers) takes minutes per test
there; TIMERL_MMAP_ALL_WORKLOADS=1 plays every one."""

import os

from algorithms.mmap.instance import available_workload_names
from algorithms.mmap.workloads.programs import PROGRAMS

NEW_STRUCTURE = ["rnn_cond_scan_sgd", "ppo_update_adam", "dlrm_sgd", "diffusion_sample"]


def game_test_workloads() -> list[str]:
    names = available_workload_names()
    if os.environ.get("TIMERL_MMAP_ALL_WORKLOADS"):
        return names
    return [name for name in names if name in PROGRAMS or name in NEW_STRUCTURE]
