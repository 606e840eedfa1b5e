"""Probability distributions over recurrent tensors; sampling is per point, from `trl.rand` / `trl.randn`,
so it is fixed by the compile seed. ``sample()`` is not differentiable (like ``torch``'s); ``Normal.rsample()``
is, by reparameterization."""

from __future__ import annotations

import math
from typing import Any

from timerl.errors import ArgumentError, TimeRLError, float_argument, user_location
from timerl.ops.registry import broadcast_shapes
from timerl.rt import functional as F
from timerl.rt.tensor import RecurrentTensor

RT = RecurrentTensor
_TINY = 1e-20  # keeps log(-log(u)) finite at u = 0


class Categorical:
    """Over the last dimension of ``logits`` (or ``probs``); samples are int64 of the batch shape."""

    def __init__(self, logits: RT | None = None, probs: RT | None = None) -> None:
        if (logits is None) == (probs is None):
            raise TimeRLError(f"{user_location()}: Categorical takes exactly one of logits= or probs=")
        if logits is None:
            logits = F.log(probs)
        if not isinstance(logits, RT) or not logits.shape:
            raise TimeRLError(f"{user_location()}: Categorical needs a recurrent tensor with a class dimension")
        self._scores = logits  # unnormalized: what sampling needs (the argmax ignores a shift per row)
        self.logits = F.log_softmax(logits, -1)

    @property
    def probs(self) -> RT:
        return F.exp(self.logits)

    def sample(self) -> RT:
        """Gumbel-max: ``argmax(logits + g)`` with ``g = -log(-log(u))``, ``u`` uniform per point; the logits as
        given, since normalizing them shifts every class of a row alike (one op less per sample)."""
        shape = tuple(int(s) for s in self.logits.shape)
        with self.logits.ctx:
            uniform = F.rand(shape, self.logits.dtype, self.logits.domain)
        gumbel = -F.log(-F.log(F.clip(uniform, min=_TINY)))
        return F.argmax(F.detach(self._scores) + gumbel, dim=-1)

    def log_prob(self, value: RT) -> RT:
        if not isinstance(value, RT):
            raise ArgumentError(f"{user_location()}: value must be a recurrent tensor of categories, got {value!r}")
        index = F.unsqueeze(F.astype(value, "int64"), -1)
        batch = tuple(self.logits.shape[:-1])
        if len(index.shape) - 1 != len(batch):
            raise TimeRLError(f"{user_location()}: log_prob of values of shape {tuple(value.shape)} under a "
                              f"distribution with batch shape {batch}")
        return F.squeeze(F.gather(self.logits, -1, index), -1)

    def entropy(self) -> RT:
        return -F.sum(self.probs * self.logits, dim=-1)


class Normal:
    """Independent normals with ``mean`` and ``std`` (RTs or floats, broadcast together)."""

    def __init__(self, mean: Any, std: Any) -> None:
        for name, value in (("mean", mean), ("std", std)):
            if not isinstance(value, RT):
                float_argument(name, value)  # a recurrent tensor or a number
        tensors = [v for v in (mean, std) if isinstance(v, RT)]
        if not tensors:
            raise TimeRLError(f"{user_location()}: Normal needs a recurrent tensor mean or std")
        self.mean, self.std = mean, std
        self._like = tensors[0]

    def _shape_and_domain(self) -> tuple[tuple[int, ...], tuple]:
        shapes = [tuple(v.shape) for v in (self.mean, self.std) if isinstance(v, RT)]
        domains = set().union(*(v.domain for v in (self.mean, self.std) if isinstance(v, RT)))
        shape = tuple(int(s) for s in broadcast_shapes(*shapes))
        return shape, self._like.ctx.order_dims(domains)

    def rsample(self) -> RT:
        shape, domain = self._shape_and_domain()
        dtype = self._like.dtype
        with self._like.ctx:
            noise = F.randn(shape, dtype, domain)
        return noise * self.std + self.mean

    def sample(self) -> RT:
        return F.detach(self.rsample())

    def log_prob(self, value: Any) -> RT:
        standardized = (value - self.mean) / self.std
        return standardized * standardized * -0.5 - F.log(_as_rt(self.std, self._like)) - 0.5 * math.log(2 * math.pi)

    def entropy(self) -> RT:
        return F.log(_as_rt(self.std, self._like)) + (0.5 + 0.5 * math.log(2 * math.pi))


def _as_rt(value: Any, like: RT) -> RT:
    if isinstance(value, RT):
        return value
    with like.ctx:
        return F.tensor(float(value), like.dtype)


__all__ = ["Categorical", "Normal"]
