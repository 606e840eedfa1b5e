"""The window program of issue 9: ``x`` a source of 1 KiB points, ``y = x * 2.0 + 1.0`` (or ``y = x + 1.0``,
without the constant factor), ``g = y[t:min(t + 4, T)].sum(0)`` read by a sink. Its peak device bytes should
not grow with ``T``: every ``x`` and ``y`` can be freed four steps after it is made.

    python -m benchmarks.window_memory [--steps 64 256 1024]

Prints a Markdown table: peak device bytes (torch, ``device_memory`` unset and set) at each ``T`` and the ratio
of the last to the first (target: within 1.5x). On a GPU a second row per setting gives the most CUDA memory
torch's allocator held at once during the run (`cuda_peak`), beyond what it held before: the pool's count is of
stored points; the allocator's adds an op's temporaries and its rounding (blocks of 512 B).
"""

from __future__ import annotations

import argparse

from typing import Any, Callable

import numpy as np
import torch

import timerl as trl

POINT = 256  # float32 values: 1 KiB per point


def cuda_peak(run: Callable[[], Any]) -> tuple[Any, int | None]:
    """``run()``'s result and, on a GPU, the most memory torch's CUDA allocator held at once while it ran, beyond
    what it held before (None without a GPU)."""
    if not torch.cuda.is_available():
        return run(), None
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    result = run()
    torch.cuda.synchronize()
    return result, torch.cuda.max_memory_allocated() - before


def window_peak(steps: int, constant: bool, options: dict) -> int:
    ctx = trl.Context("t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.full(POINT, float(p["t"]), np.float32), shape=(POINT,), dtype="float32",
                       domain=(t,))
        y = x * 2.0 + 1.0 if constant else x + 1.0
        g = y[t:trl.min(t + 4, T)].sum(0)
        g.sink(lambda p, v: None)
    executable = ctx.compile(bounds={T: steps}, backend="torch", **options)
    executable.execute()
    return executable.stats["peak_device_bytes"]


SETTINGS = (
    ("default", dict()),
    ("device_memory = 1 MiB", dict(device_memory=1 << 20)),
)


def main(argv: list[str] | None = None) -> list[tuple[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[64, 256, 1024])
    args = parser.parse_args(argv)
    print("| program | compile options | " + " | ".join(f"T = {t}" for t in args.steps) + " | last / first |")
    print("|---|---|" + "---|" * len(args.steps) + "---|")
    ratios = []
    for constant in (True, False):
        program = "y = x * 2.0 + 1.0" if constant else "y = x + 1.0"
        for name, options in SETTINGS:
            runs = [cuda_peak(lambda: window_peak(steps, constant, options)) for steps in args.steps]
            peaks = [peak for peak, _ in runs]
            ratio = peaks[-1] / peaks[0]
            ratios.append((f"{program}, {name}", ratio))
            print(f"| `{program}` | {name} | " + " | ".join(f"{p:,} B" for p in peaks) + f" | {ratio:.2f} |",
                  flush=True)
            if runs[0][1] is not None:
                allocated = [held for _, held in runs]
                print(f"| `{program}` | {name}, CUDA allocator | " + " | ".join(f"{p:,} B" for p in allocated)
                      + f" | {allocated[-1] / allocated[0]:.2f} |", flush=True)
    return ratios


if __name__ == "__main__":
    main()
