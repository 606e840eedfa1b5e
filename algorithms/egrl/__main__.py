"""``python -m algorithms.egrl bench [--seeds 5 --budget 4000 ...]`` (see `algorithms.egrl.bench`),
``python -m algorithms.egrl ceiling [--exact] [--chip FILE]`` (see `algorithms.egrl.ceiling`) and
``python -m algorithms.egrl report RUNS.jsonl --optimum FILE`` (see `algorithms.egrl.report`).

The kernels here are small (tens to hundreds of nodes), so BLAS and torch thread pools only add contention:
both are pinned to one thread, BLAS through its environment variable before NumPy first loads.
"""

import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402  (after the thread settings above)

from algorithms.egrl import bench, ceiling, report  # noqa: E402

torch.set_num_threads(1)
COMMANDS = {"bench": bench.main, "ceiling": ceiling.main, "report": report.main}

USAGE = ("usage: python -m algorithms.egrl {bench,ceiling,report} [options]\n\n"
         "  bench    EGRL against its baselines (python -m algorithms.egrl bench --help for the options)\n"
         "  ceiling  the best placement's speedup (python -m algorithms.egrl ceiling --help for the options)\n"
         "  report   the Fig. 3 tables from bench runs (python -m algorithms.egrl report --help for the options)")

if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(USAGE)
        sys.exit(0)
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(USAGE)
    COMMANDS[sys.argv[1]](sys.argv[2:])
