"""Optimizers: ``step()`` defines each parameter at ``i + 1`` from its value and gradient at ``i``.

A parameter is a `trl.param`: a placeholder over its iteration dimension (the first of its domain) whose
value at ``i = 0`` is its initial value. ``step()`` adds the branch ``param[i + 1] = update(param[i])``.
Updates are built from detached values, so no later ``backward()`` differentiates through them. The
learning rate is a float or a recurrent tensor (e.g. a schedule ``lr[i + 1] = lr[i] * 0.98``), read at ``i``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from timerl.errors import TimeRLError, user_location
from timerl.ops.registry import is_float
from timerl.rt import functional as F
from timerl.rt.placeholder import placeholder
from timerl.rt.symbolic import Symbol
from timerl.rt.tensor import RecurrentTensor

RT = RecurrentTensor


class Optimizer:
    def __init__(self, params: Sequence[RT], lr: float | RT) -> None:
        self.params = list(params)
        if not self.params:
            raise TimeRLError(f"{user_location()}: an optimizer needs at least one parameter")
        for param in self.params:
            if not (param.requires_grad and param.node.op == "merge" and param.is_plain() and param.domain):
                raise TimeRLError(f"{user_location()}: optimizers update trl.param tensors (placeholders over an "
                                  f"iteration dimension with requires_grad=True), got {param!r}")
            if not is_float(param.dtype):
                raise TimeRLError(f"{user_location()}: cannot optimize a {param.dtype} parameter")
        self.lr = lr
        self._stepped = False

    def step(self) -> None:
        if self._stepped:
            raise TimeRLError(f"{user_location()}: step() was already called: it defines every parameter at "
                              "i + 1 for all i at once")
        self._stepped = True
        with self.params[0].ctx:
            for param in self.params:
                grad = param.grad
                if grad is None:
                    raise TimeRLError(f"{user_location()}: parameter {param!r} has no gradient")
                update = self.update(param, F.detach(param), F.detach(grad))
                _assign_next(param, update)

    def update(self, param: RT, value: RT, grad: RT) -> RT:
        raise NotImplementedError

    def learning_rate(self, like: RT) -> Any:
        if isinstance(self.lr, RT):
            return F.astype(F.detach(self.lr), like.dtype)
        return float(self.lr)


def _iteration_dim(param: RT) -> Symbol:
    return param.domain[0]


def _assign_next(param: RT, value: RT) -> None:
    """``param[i + 1] = value`` (``value`` read at ``i``)."""
    dim = _iteration_dim(param)
    key = tuple(d + 1 if d is dim else d for d in param.domain)
    param[key if len(key) > 1 else key[0]] = value


class SGD(Optimizer):
    """``param[i + 1] = param[i] - lr * grad[i]``."""

    def update(self, param: RT, value: RT, grad: RT) -> RT:
        return value - self.learning_rate(value) * grad


class Adam(Optimizer):
    """Adam (Kingma & Ba), with PyTorch's bias correction and ``eps`` outside the square root.

    The moments are placeholders over the parameter's domain, zero at ``i = 0``; the bias corrections
    ``1 - beta**(i + 1)`` are computed per iteration in double precision, like PyTorch's."""

    def __init__(self, params: Sequence[RT], lr: float | RT = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        super().__init__(params, lr)
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = float(eps)
        self._bias_corrections: dict[Symbol, tuple[RT, ...]] = {}

    def update(self, param: RT, value: RT, grad: RT) -> RT:
        beta1, beta2 = self.betas
        first = _moment(param)
        second = _moment(param)
        first_now = first * beta1 + grad * (1.0 - beta1)
        second_now = second * beta2 + grad * grad * (1.0 - beta2)
        _assign_next(first, first_now)
        _assign_next(second, second_now)
        correction1, correction2 = (F.astype(c, value.dtype) for c in self._corrections(param))
        step = (first_now / correction1) / (F.sqrt(second_now / correction2) + self.eps)
        return value - self.learning_rate(value) * step

    def _corrections(self, param: RT) -> tuple[RT, RT]:
        """``1 - beta1**(i + 1)`` and ``1 - beta2**(i + 1)`` over the iteration dimension, in float64."""
        dim = _iteration_dim(param)
        if dim not in self._bias_corrections:
            self._bias_corrections[dim] = tuple(
                F.source(lambda p, beta=beta: 1.0 - beta ** (p[dim.name] + 1), (), "float64", (dim,))
                for beta in self.betas)
        return self._bias_corrections[dim]


def _moment(param: RT) -> RT:
    moment = placeholder(tuple(param.shape), param.dtype, param.domain)
    dim = _iteration_dim(param)
    key = tuple(0 if d is dim else d for d in param.domain)
    moment[key if len(key) > 1 else key[0]] = F.tensor(np.zeros(tuple(param.shape)), param.dtype)
    return moment


__all__ = ["SGD", "Adam", "Optimizer"]
