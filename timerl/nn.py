"""Networks as recurrent tensors: layers whose weights are `trl.param`s (one value per training iteration).

Initial weights are drawn with NumPy when the layer is defined, PyTorch-style: uniform in
``(-1/sqrt(n_in), 1/sqrt(n_in))`` for both the weight and the bias, or, with ``gain=``, orthogonal with that
gain and a zero bias (the initialization PPO implementations use). Without a ``seed``, a layer takes the
number of nodes recorded so far as its seed, so layers differ and a program built twice is the same.

``MLP(..., flat=True)`` keeps all of its weights in one parameter vector, the layers' weights being views
of it: one tensor for the optimizer to update instead of two per layer, so the program has far fewer
statements for the scheduler (whose cost grows quickly with the number of recurrences).

``module.frozen(*key)`` is the same network with every parameter read at ``key`` and detached: the weights
a rollout acts with while the parameters themselves move on along other dimensions (PPO's epochs).
``module.using(*weights)`` computes with any tensors of the parameters' shapes (a target network whose
weights are a Polyak average, a recurrence of the program's own).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from timerl.errors import ArgumentError, ShapeError, TimeRLError, bool_argument, int_argument, user_location
from timerl.rt import functional as F
from timerl.rt.context import current_context
from timerl.rt.placeholder import load_initial, param
from timerl.symbolic import Symbol
from timerl.rt.tensor import RecurrentTensor

RT = RecurrentTensor

ACTIVATIONS: dict[str, Callable[[RT], RT]] = {"tanh": F.tanh, "relu": F.relu, "sigmoid": F.sigmoid}


class Module:
    def parameters(self) -> list[RT]:
        raise NotImplementedError

    def __call__(self, x: RT) -> RT:
        raise NotImplementedError

    def using(self, *weights: RT) -> Module:
        """The same network computing with ``weights`` instead of its parameters: one tensor per entry of
        ``parameters()``, of the same shape, over any domain (a target network, a Polyak average)."""
        location = user_location()
        own = self.parameters()
        if len(weights) != len(own):
            raise ArgumentError(f"{location}: using() takes {len(own)} tensor(s), one per parameter, got "
                                f"{len(weights)}")
        for k, (weight, param) in enumerate(zip(weights, own)):
            if not isinstance(weight, RT):
                raise ArgumentError(f"{location}: using(): weight {k} must be a recurrent tensor, got {weight!r}")
            if tuple(weight.shape) != tuple(param.shape):
                raise ShapeError(f"{location}: using(): weight {k} has shape {tuple(weight.shape)}; the "
                                 f"parameter it replaces has {tuple(param.shape)}")
        return self._with(list(weights))

    def frozen(self, *key) -> Module:
        """`using` the parameters read at ``key``, detached."""
        return self._with([F.detach(param[key]) for param in self.parameters()])

    def _with(self, weights: list[RT]) -> Module:
        raise NotImplementedError

    def load_parameters(self, values: Sequence[Any]) -> None:
        """Start every parameter from ``values`` (arrays in the order of ``parameters()``) instead of its
        initialization: weights a training run produced, loaded into an evaluation or fine-tuning program."""
        parameters = self.parameters()
        if not isinstance(values, (list, tuple)) or len(values) != len(parameters):
            raise ArgumentError(f"{user_location()}: load_parameters takes a list of {len(parameters)} arrays (one "
                                f"per parameter), got {type(values).__name__}")
        for parameter, value in zip(parameters, values):
            load_initial(parameter, value)


class Linear(Module):
    """``y = x @ weight.T + bias`` on inputs of shape ``(..., n_in)``; ``weight`` is ``(n_out, n_in)``."""

    def __init__(self, n_in: int, n_out: int, domain: Sequence[Symbol] | None = None, seed: int | None = None,
                 bias: bool = True, dtype: str = "float32", gain: float | None = None) -> None:
        n_in, n_out = int_argument("n_in", n_in, minimum=1), int_argument("n_out", n_out, minimum=1)
        seed = None if seed is None else int_argument("seed", seed)
        bias, dtype = bool_argument("bias", bias), F.check_dtype(dtype)
        ctx = current_context()
        weight, offset = _initial(np.random.default_rng(ctx.draw_stream() if seed is None else seed), n_in, n_out,
                                  gain)
        self.n_in, self.n_out = n_in, n_out
        self.weight = param(weight, domain=domain, dtype=dtype)
        self.bias = param(offset, domain=domain, dtype=dtype) if bias else None

    @classmethod
    def of(cls, weight: RT, bias: RT | None) -> Linear:
        """A layer computing with given tensors (views of a flat parameter, or frozen copies)."""
        layer = cls.__new__(cls)
        layer.n_out, layer.n_in = (int(n) for n in weight.shape)
        layer.weight, layer.bias = weight, bias
        return layer

    def __call__(self, x: RT) -> RT:
        if not isinstance(x, RT):
            raise ArgumentError(f"{user_location()}: a layer's input x must be a recurrent tensor, got {x!r}")
        if not x.shape or not _fits(x.shape[-1], self.n_in):
            raise TimeRLError(f"{user_location()}: Linear({self.n_in}, {self.n_out}) applied to shape "
                              f"{tuple(x.shape)}")
        y = F.matmul(x, F.transpose(self.weight, 0, 1))
        return y if self.bias is None else y + self.bias

    def parameters(self) -> list[RT]:
        return [self.weight] + ([self.bias] if self.bias is not None else [])

    def _with(self, weights: list[RT]) -> Linear:
        return Linear.of(weights[0], weights[1] if self.bias is not None else None)


class MLP(Module):
    """``MLP([n_in, 64, 64, n_out])``: Linear layers with ``activation`` between them (none after the last)."""

    def __init__(self, sizes: Sequence[int], activation: str | Callable[[RT], RT] = "tanh",
                 domain: Sequence[Symbol] | None = None, seed: int | None = None, dtype: str = "float32",
                 gains: tuple[float, float] | None = None, flat: bool = False) -> None:
        """``gains=(hidden, output)``: orthogonal initialization with these gains (e.g. ``(sqrt(2), 0.01)``
        for a PPO policy); default PyTorch's uniform one. ``flat``: one parameter vector (module docstring)."""
        if not isinstance(sizes, (list, tuple)):
            raise ArgumentError(f"{user_location()}: sizes must be a list of layer widths, got {sizes!r}")
        sizes = [int_argument("sizes", size, minimum=1) for size in sizes]
        seed = None if seed is None else int_argument("seed", seed)
        dtype = F.check_dtype(dtype)
        if len(sizes) < 2:
            raise TimeRLError(f"{user_location()}: MLP needs at least an input and an output size, got {sizes}")
        if not isinstance(activation, str) and not callable(activation):
            raise ArgumentError(f"{user_location()}: activation must be a name or a callable, got {activation!r}")
        if isinstance(activation, str):
            if activation not in ACTIVATIONS:
                raise TimeRLError(f"{user_location()}: unknown activation {activation!r}; choose one of "
                                  f"{', '.join(ACTIVATIONS)} or pass a callable")
            activation = ACTIVATIONS[activation]
        self.activation = activation
        pairs = list(itertools.pairwise(sizes))
        layer_gains = [None if gains is None else gains[k == len(pairs) - 1] for k in range(len(pairs))]
        self.flat: RT | None = None
        if not flat:
            self.layers = [Linear(n_in, n_out, domain, None if seed is None else seed + k, dtype=dtype,
                                  gain=layer_gains[k]) for k, (n_in, n_out) in enumerate(pairs)]
            return
        first_seed = current_context().draw_stream() if seed is None else seed
        initial = [_initial(np.random.default_rng(first_seed + k), n_in, n_out, layer_gains[k])
                   for k, (n_in, n_out) in enumerate(pairs)]
        self.flat = param(np.concatenate([a.ravel() for pair in initial for a in pair]), domain=domain, dtype=dtype)
        self._shapes = [((n_out, n_in), (n_out,)) for n_in, n_out in pairs]
        self.layers = self._views(self.flat)

    def _views(self, vector: RT) -> list[Linear]:
        layers, offset = [], 0
        for weight_shape, bias_shape in self._shapes:
            size = weight_shape[0] * weight_shape[1]
            weight = F.reshape(F.spatial(vector, slice(offset, offset + size)), weight_shape)
            bias = F.spatial(vector, slice(offset + size, offset + size + bias_shape[0]))
            layers.append(Linear.of(weight, bias))
            offset += size + bias_shape[0]
        return layers

    def __call__(self, x: RT) -> RT:
        for k, layer in enumerate(self.layers):
            x = layer(x)
            if k < len(self.layers) - 1:
                x = self.activation(x)
        return x

    def parameters(self) -> list[RT]:
        if self.flat is not None:
            return [self.flat]
        return [p for layer in self.layers for p in layer.parameters()]

    def _with(self, weights: list[RT]) -> MLP:
        network = copy.copy(self)
        if self.flat is None:
            network.layers, rest = [], list(weights)
            for layer in self.layers:
                count = len(layer.parameters())
                network.layers.append(layer._with(rest[:count]))
                rest = rest[count:]
        else:
            (network.flat,) = weights
            network.layers = self._views(network.flat)
        return network


class PatchEmbedding(Module):
    """A convolution whose kernel and stride are both ``patch`` (a vision transformer's patch embedding): an
    image ``(..., channels, H, W)`` is cut into ``(H / patch) * (W / patch)`` patches, each flattened and
    mapped by one shared `Linear` layer to ``n_out`` features; the result is ``(..., patches * n_out)``.
    The weights grow with the patch, not with the number of patches, and the gradient of the weight reads
    every patch: the whole image is needed for learning, as with any convolution."""

    def __init__(self, image_shape: Sequence[int], patch: int, n_out: int, domain: Sequence[Symbol] | None = None,
                 seed: int | None = None, dtype: str = "float32") -> None:
        if not isinstance(image_shape, (list, tuple)) or len(image_shape) != 3:
            raise ArgumentError(f"{user_location()}: image_shape must be (channels, H, W), got {image_shape!r}")
        channels, height, width = (int_argument("image_shape", n, minimum=1) for n in image_shape)
        patch = int_argument("patch", patch, minimum=1)
        if height % patch or width % patch:
            raise TimeRLError(f"{user_location()}: patch {patch} does not divide the image's {height} x {width}")
        self.image_shape, self.patch = (channels, height, width), patch
        self.grid = (height // patch, width // patch)
        self.linear = Linear(channels * patch * patch, n_out, domain, seed, dtype=dtype)
        self.n_out = self.grid[0] * self.grid[1] * n_out

    def __call__(self, x: RT) -> RT:
        if not isinstance(x, RT) or x.ndim < 3 or not all(_fits(a, b) for a, b in zip(x.shape[-3:], self.image_shape)):
            raise TimeRLError(f"{user_location()}: PatchEmbedding for images {self.image_shape} applied to "
                              f"{x!r}")
        batch = tuple(x.shape[:-3])
        (channels, _, _), patch, (rows, cols) = self.image_shape, self.patch, self.grid
        patches = F.reshape(x, *batch, channels, rows, patch, cols, patch)
        b = len(batch)
        patches = F.permute(patches, *range(b), b + 1, b + 3, b, b + 2, b + 4)
        patches = F.reshape(patches, *batch, rows * cols, channels * patch * patch)
        return F.reshape(self.linear(patches), *batch, self.n_out)

    def parameters(self) -> list[RT]:
        return self.linear.parameters()

    def _with(self, weights: list[RT]) -> PatchEmbedding:
        embedding = copy.copy(self)
        embedding.linear = self.linear._with(weights)
        return embedding


def _initial(rng: np.random.Generator, n_in: int, n_out: int, gain: float | None) -> tuple[np.ndarray, ...]:
    """(weight, bias): PyTorch's uniform initialization, or orthogonal with ``gain`` and a zero bias."""
    if gain is None:
        limit = 1.0 / np.sqrt(n_in)
        weight = rng.uniform(-limit, limit, size=(n_out, n_in))
        return weight, rng.uniform(-limit, limit, size=n_out)
    return gain * _orthogonal(rng, n_out, n_in), np.zeros(n_out)


def _orthogonal(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """A (semi-)orthogonal matrix: Q of the QR decomposition of a Gaussian one, signs fixed by R's diagonal."""
    gaussian = rng.normal(size=(max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(gaussian)
    q = q * np.sign(np.diag(r))
    return q if rows >= cols else q.T


def _fits(size, expected: int) -> bool:
    return not isinstance(size, int) or size == expected


__all__ = ["MLP", "Linear", "Module", "PatchEmbedding"]
