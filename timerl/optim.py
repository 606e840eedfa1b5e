"""Optimizers: ``step()`` defines each parameter at the next point of its domain from its value and gradient
at the current one.

A parameter is a `trl.param`: a placeholder over its update dimensions whose value at the origin is its
initial value. Over one dimension ``(i,)``, ``step()`` adds ``param[i + 1] = update(param[i])``. Over several,
the points are visited in lexicographic order, like nested loops: PPO's ``(i, e, m)`` (iteration, epoch,
minibatch) steps ``m``, then carries the last minibatch's update to the next epoch, and the last epoch's
to the next iteration:

    param[i, e, m + 1] = update[i, e, m]
    param[i, e + 1, 0] = update[i, e, M - 1]
    param[i + 1, 0, 0] = update[i, E - 1, M - 1]

Updates are built from detached values, so no later ``backward()`` differentiates through them. The
learning rate is a float or a recurrent tensor (e.g. a schedule ``lr[i + 1] = lr[i] * 0.98``), read at the
current point. ``max_grad_norm`` rescales the gradients of all parameters together, like PyTorch's
``clip_grad_norm_``, before the update.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from timerl.errors import ArgumentError, TimeRLError, float_argument, user_location
from timerl.ops.registry import MERGE, is_float
from timerl.rt import functional as F
from timerl.rt.placeholder import placeholder
from timerl.rt.context import conjuncts
from timerl.symbolic import TRUE, Symbol, conjunction, negation
from timerl.rt.tensor import RecurrentTensor

RT = RecurrentTensor


class Optimizer:
    def __init__(self, params: Sequence[RT], lr: float | RT, max_grad_norm: float | None = None) -> None:
        if not isinstance(params, (list, tuple)) or not all(isinstance(p, RT) for p in params):
            raise ArgumentError(f"{user_location()}: params must be a list of trl.param tensors, got {params!r}")
        self.params = list(params)
        if not self.params:
            raise TimeRLError(f"{user_location()}: an optimizer needs at least one parameter")
        for param in self.params:
            if not (param.requires_grad and param.node.category is MERGE and param.is_plain() and param.domain):
                raise TimeRLError(f"{user_location()}: optimizers update trl.param tensors (placeholders over an "
                                  f"iteration dimension with requires_grad=True), got {param!r}")
            if not is_float(param.dtype):
                raise TimeRLError(f"{user_location()}: cannot optimize a {param.dtype} parameter")
        domains = {tuple(p.domain) for p in self.params}
        if len(domains) > 1:
            raise TimeRLError(f"{user_location()}: one optimizer steps parameters over one domain, got "
                              f"{sorted(tuple(d.name for d in domain) for domain in domains)}")
        self.lr = lr if isinstance(lr, RT) else float_argument("lr", lr)
        self.max_grad_norm = float_argument("max_grad_norm", max_grad_norm, optional=True)
        self._stepped = False
        self._gate = TRUE  # the `when` conditions step() is called under (set by step())

    def step(self) -> None:
        if self._stepped:
            raise TimeRLError(f"{user_location()}: step() was already called: it defines every parameter at "
                              "i + 1 for all i at once")
        self._stepped = True
        ctx = self.params[0].ctx
        dims = set(self.params[0].domain)
        self._gate = conjunction(TRUE, *(c for c in conjuncts(ctx.current_condition())
                                         if {s for s in c.symbols() if not s.is_bound} <= dims))
        inner = {s for s in self._gate.symbols() if not s.is_bound} - {self.params[0].domain[0]}
        if inner:
            # a step carried across an inner dimension's end reads the update at its last point, where
            # the branch's condition would be taken at its first: refused rather than wrong
            raise TimeRLError(f"{user_location()}: step() under a condition on "
                              f"{', '.join(sorted(d.name for d in inner))}: parameters over several dimensions "
                              f"take gated steps on their outermost one ({self.params[0].domain[0].name}) only")
        with ctx:
            grads = [F.detach(param.grad) for param in self.params]
            if self.max_grad_norm is not None:
                grads = _clip_norm(grads, self.max_grad_norm)
            for param, grad in zip(self.params, grads):
                self._advance(param, self.update(param, F.detach(param), grad))

    def _advance(self, state: RT, value: RT) -> None:
        """``state`` at the next point is ``value`` where the step runs (inside ``ctx.when(gate)``), and
        ``state`` itself, unchanged, where it does not."""
        _assign_next(state, value)
        if self._gate is TRUE:
            return
        ctx = state.ctx
        with ctx.outside_when(), ctx.when(negation(self._gate)):
            _assign_next(state, F.detach(state))

    def _state(self, shape: tuple, dtype: str, initial: RT | None = None) -> RT:
        """A placeholder over the parameters' domain that exists at every point, even when ``step()`` runs
        inside a `when` block; ``initial`` (default zeros) at the origin."""
        ctx = self.params[0].ctx
        with ctx.outside_when():
            target = placeholder(shape, dtype, self.params[0].domain)
            return _start_at_origin(target, F.tensor(np.zeros(shape), dtype) if initial is None else initial)

    def update(self, param: RT, value: RT, grad: RT) -> RT:
        raise NotImplementedError

    def learning_rate(self, like: RT) -> Any:
        if isinstance(self.lr, RT):
            return F.astype(F.detach(self.lr), like.dtype)
        return float(self.lr)


def _clip_norm(grads: list[RT], max_norm: float) -> list[RT]:
    """Scale all gradients by ``min(1, max_norm / (norm + 1e-6))``, ``norm`` taken over all of them."""
    total = None
    for grad in grads:
        squares = F.sum(grad * grad)
        total = squares if total is None else total + F.astype(squares, total.dtype)
    scale = F.minimum(max_norm / (F.sqrt(total) + 1e-6), 1.0)
    return [grad * F.astype(scale, grad.dtype) for grad in grads]


def _assign_next(param: RT, value: RT) -> None:
    """``param`` at the lexicographic successor of each point is ``value`` there (see the module docstring)."""
    ctx = param.ctx
    domain = tuple(param.domain)
    for level in range(len(domain) - 1, -1, -1):
        key = domain[:level] + (domain[level] + 1,) + (0,) * (len(domain) - level - 1)
        last = {d: ctx.bound_of(d) - 1 for d in domain[level + 1:]}
        read = value[tuple(last.get(d, d) for d in value.domain)] if last else value
        param[key if len(key) > 1 else key[0]] = read


class SGD(Optimizer):
    """``param[i + 1] = param[i] - lr * grad[i]``."""

    def update(self, param: RT, value: RT, grad: RT) -> RT:
        return value - self.learning_rate(value) * grad


class Adam(Optimizer):
    """Adam (Kingma & Ba), with PyTorch's bias correction and ``eps`` outside the square root.

    The moments are placeholders over the parameter's domain, zero at ``i = 0``; the bias corrections
    ``1 - beta**(i + 1)`` are computed per iteration in double precision, like PyTorch's."""

    def __init__(self, params: Sequence[RT], lr: float | RT = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, max_grad_norm: float | None = None) -> None:
        super().__init__(params, lr, max_grad_norm)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ArgumentError(f"{user_location()}: betas must be a pair of numbers, got {betas!r}")
        self.betas = (float_argument("betas[0]", betas[0]), float_argument("betas[1]", betas[1]))
        self.eps = float_argument("eps", eps)
        self._step_counts: dict[tuple[Symbol, ...], RT] = {}

    def update(self, param: RT, value: RT, grad: RT) -> RT:
        beta1, beta2 = self.betas
        first = self._state(tuple(param.shape), param.dtype)
        second = self._state(tuple(param.shape), param.dtype)
        first_now = first * beta1 + grad * (1.0 - beta1)
        second_now = second * beta2 + grad * grad * (1.0 - beta2)
        self._advance(first, first_now)
        self._advance(second, second_now)
        correction1, correction2 = (F.astype(c, value.dtype) for c in self._corrections(param))
        step = (first_now / correction1) / (F.sqrt(second_now / correction2) + self.eps)
        return value - self.learning_rate(value) * step

    def _corrections(self, param: RT) -> tuple[RT, RT]:
        """``1 - beta1**n`` and ``1 - beta2**n`` for the ``n``-th step, in float64."""
        domain = tuple(param.domain)
        if domain not in self._step_counts:
            # n counts the steps taken, along the same lexicographic order as the updates, however many
            # dimensions they have; a step gated off by `when` does not count
            count = self._state((), "float64", F.tensor(1.0, "float64"))
            self._advance(count, count + 1.0)
            self._step_counts[domain] = count
        count = self._step_counts[domain]
        return tuple(1.0 - F.pow(beta, count) for beta in self.betas)


def _start_at_origin(target: RT, value: RT) -> RT:
    key = (0,) * len(target.domain)
    target[key if len(key) > 1 else key[0]] = value
    return target


__all__ = ["SGD", "Adam", "Optimizer"]
