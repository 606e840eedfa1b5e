"""Networks as recurrent tensors: layers whose weights are `trl.param`s (one value per training iteration).

Initial weights are drawn with NumPy when the layer is defined, PyTorch-style: uniform in
``(-1/sqrt(n_in), 1/sqrt(n_in))`` for both the weight and the bias. Without a ``seed``, a layer takes the
number of nodes recorded so far as its seed, so layers differ and a program built twice is the same.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np

from timerl.errors import TimeRLError, user_location
from timerl.rt import functional as F
from timerl.rt.context import current_context
from timerl.rt.placeholder import param
from timerl.rt.symbolic import Symbol
from timerl.rt.tensor import RecurrentTensor

RT = RecurrentTensor

ACTIVATIONS: dict[str, Callable[[RT], RT]] = {"tanh": F.tanh, "relu": F.relu, "sigmoid": F.sigmoid}


class Module:
    def parameters(self) -> list[RT]:
        raise NotImplementedError

    def __call__(self, x: RT) -> RT:
        raise NotImplementedError


class Linear(Module):
    """``y = x @ weight.T + bias`` on inputs of shape ``(..., n_in)``; ``weight`` is ``(n_out, n_in)``."""

    def __init__(self, n_in: int, n_out: int, domain: Sequence[Symbol] | None = None, seed: int | None = None,
                 bias: bool = True, dtype: str = "float32") -> None:
        if n_in < 1 or n_out < 1:
            raise TimeRLError(f"{user_location()}: Linear({n_in}, {n_out}) needs positive sizes")
        ctx = current_context()
        rng = np.random.default_rng(len(ctx.nodes) if seed is None else seed)
        limit = 1.0 / np.sqrt(n_in)
        self.n_in, self.n_out = n_in, n_out
        self.weight = param(rng.uniform(-limit, limit, size=(n_out, n_in)).astype(dtype), domain=domain)
        self.bias = param(rng.uniform(-limit, limit, size=(n_out,)).astype(dtype), domain=domain) if bias else None

    def __call__(self, x: RT) -> RT:
        if not x.shape or not _fits(x.shape[-1], self.n_in):
            raise TimeRLError(f"{user_location()}: Linear({self.n_in}, {self.n_out}) applied to shape "
                              f"{tuple(x.shape)}")
        y = F.matmul(x, F.transpose(self.weight, 0, 1))
        return y if self.bias is None else y + self.bias

    def parameters(self) -> list[RT]:
        return [self.weight] + ([self.bias] if self.bias is not None else [])


class MLP(Module):
    """``MLP([n_in, 64, 64, n_out])``: Linear layers with ``activation`` between them (none after the last)."""

    def __init__(self, sizes: Sequence[int], activation: str | Callable[[RT], RT] = "tanh",
                 domain: Sequence[Symbol] | None = None, seed: int | None = None, dtype: str = "float32") -> None:
        if len(sizes) < 2:
            raise TimeRLError(f"{user_location()}: MLP needs at least an input and an output size, got {sizes}")
        if isinstance(activation, str):
            if activation not in ACTIVATIONS:
                raise TimeRLError(f"{user_location()}: unknown activation {activation!r}; choose one of "
                                  f"{', '.join(ACTIVATIONS)} or pass a callable")
            activation = ACTIVATIONS[activation]
        self.activation = activation
        self.layers = [Linear(n_in, n_out, domain, None if seed is None else seed + k, dtype=dtype)
                       for k, (n_in, n_out) in enumerate(itertools.pairwise(sizes))]

    def __call__(self, x: RT) -> RT:
        for k, layer in enumerate(self.layers):
            x = layer(x)
            if k < len(self.layers) - 1:
                x = self.activation(x)
        return x

    def parameters(self) -> list[RT]:
        return [p for layer in self.layers for p in layer.parameters()]


def _fits(size, expected: int) -> bool:
    return not isinstance(size, int) or size == expected


__all__ = ["MLP", "Linear", "Module"]
