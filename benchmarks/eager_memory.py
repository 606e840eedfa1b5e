"""Peak memory of eager PyTorch measured the way timerl's pool counts it: bytes of live tensors.

`LiveTensorBytes` is a `TorchDispatchMode`: every tensor an op reads or writes is looked up by its storage,
and each storage is counted from the first op that touches it until a finalizer sees it die (views share
their storage and count once). Parameters, gradients, optimizer state, activations kept for the backward
pass and tensors made from NumPy arrays are all counted; NumPy arrays no tensor op touches are not (an
environment's rewards kept in Python lists, as host memory). On a GPU this is what would sit in device memory.

    python -m benchmarks.eager_memory [--steps 100 200 400] [--iterations 3]

Prints a Markdown table: REINFORCE (Monte Carlo and 8-step) on CartPole, 16 environments, eager PyTorch
(`benchmarks.eager_reinforce`) against timerl on torch, peak bytes by each one's own count.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from benchmarks.eager_reinforce import train_eager
from benchmarks.reinforce_memory import arguments, measure


class LiveTensorBytes(TorchDispatchMode):
    """``bytes``: storages alive now; ``peak``: the most at once, checked after every op."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0
        self.peak = 0
        self._sizes: dict[int, int] = {}  # id of a live storage -> its bytes

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        result = func(*args, **(kwargs or {}))
        for value in tree_flatten((args, kwargs, result))[0]:
            if isinstance(value, torch.Tensor):
                self._count(value)
        if self.bytes > self.peak:
            self.peak = self.bytes
        return result

    def _count(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        key = id(storage)
        if key in self._sizes:
            return
        size = storage.nbytes()
        self._sizes[key] = size
        self.bytes += size
        weakref.finalize(storage, self._release, key)

    def _release(self, key: int) -> None:
        self.bytes -= self._sizes.pop(key, 0)


def eager_peak(steps: int, n_step: int | None, iterations: int, num_envs: int) -> int:
    with LiveTensorBytes() as meter:
        train_eager(iterations=iterations, num_envs=num_envs, steps=steps, n_step=n_step)
    return meter.peak


SETTINGS = (
    ("timerl, running sums (incrementalize=True, vectorize=False)", dict(incrementalize=True, vectorize=False)),
    ("timerl, default (vectorized)", dict()),
)


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv, __doc__.split("\n\n")[0])
    print("| returns | run | " + " | ".join(f"T = {t}" for t in args.steps) + " |")
    print("|---|---|" + "---|" * len(args.steps))
    for n_step in (None, 8):
        returns = "Monte Carlo" if n_step is None else f"{n_step}-step"
        cells = [eager_peak(t, n_step, args.iterations, args.num_envs) for t in args.steps]
        print(f"| {returns} | eager PyTorch (live tensor bytes) | "
              + " | ".join(f"{c / 1e6:.3f} MB" for c in cells) + " |", flush=True)
        for name, options in SETTINGS:
            cells = [measure(t, n_step, args.iterations, args.num_envs, options)[0] for t in args.steps]
            print(f"| {returns} | {name} | " + " | ".join(f"{c / 1e6:.3f} MB" for c in cells) + " |", flush=True)


if __name__ == "__main__":
    main()
