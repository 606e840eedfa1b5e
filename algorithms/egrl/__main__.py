"""``python -m algorithms.egrl bench [--seeds 5 --budget 4000 ...]``: see `algorithms.egrl.bench`.

The kernels here are small (tens to hundreds of nodes), so BLAS and torch thread pools only add contention:
both are pinned to one thread, BLAS through its environment variable before NumPy first loads.
"""

import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402  (after the thread settings above)

from algorithms.egrl import bench  # noqa: E402

torch.set_num_threads(1)

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] != "bench":
        sys.exit("usage: python -m algorithms.egrl bench [options]  (--help for the options)")
    bench.main(sys.argv[2:])
