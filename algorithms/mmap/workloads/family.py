"""A family of generated JAX programs that stress the parser where real programs rarely go: while loops, fori
loops, cond and switch nested up to three deep, tuple-shaped carries and results, in-place updates, donation,
and (in half of them) reverse-mode differentiation through loops and conditionals.

`family_program(seed)` is deterministic in `seed`. A program's state is a tuple of square matrices; each
statement reads and rewrites a few of them, so loop carries mix changed and passed-through elements.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from algorithms.mmap.workloads.programs import Program, spec

Block = Callable[[list, jax.Array], list]


def _statement(rng: np.random.Generator, depth: int, count: int, differentiable: bool) -> Block:
    simple = ["mix", "matmul", "update"]
    nested = ["fori", "cond", "switch"] + ([] if differentiable else ["while"])
    kind = str(rng.choice(simple + nested if depth < 3 else simple))
    i, j = (int(x) for x in rng.integers(count, size=2))
    if kind == "mix":
        unary = [jnp.tanh, jnp.sin, jax.nn.relu][int(rng.integers(3))]
        return lambda s, w: s[:i] + [unary(s[i] + 0.5 * s[j])] + s[i + 1:]
    if kind == "matmul":
        return lambda s, w: s[:i] + [jnp.tanh(s[j] @ w + s[i])] + s[i + 1:]
    if kind == "update":
        def update(s, w):
            row = jnp.argmax(jnp.sum(s[j], axis=1)).astype(jnp.int32)
            return s[:i] + [lax.dynamic_update_slice(s[i], jnp.cos(s[j][:1]), (row, 0))] + s[i + 1:]
        return update
    trips = int(rng.integers(2, 5))
    if kind in ("fori", "while"):
        body = _block(rng, depth + 1, count, differentiable)
        if kind == "fori":
            return lambda s, w: list(lax.fori_loop(0, trips, lambda k, c: tuple(body(list(c), w)), tuple(s)))
        return lambda s, w: list(lax.while_loop(lambda c: c[0] < trips, lambda c: (c[0] + 1, *body(list(c[1:]), w)),
                                                (jnp.int32(0), *s))[1:])
    branches = [_block(rng, depth + 1, count, differentiable) for _ in range(2 if kind == "cond" else 3)]
    if kind == "cond":
        return lambda s, w: list(lax.cond(jnp.sum(s[i]) > 0, lambda c: tuple(branches[0](list(c), w)),
                                          lambda c: tuple(branches[1](list(c), w)), tuple(s)))

    def switch(s, w):
        index = (jnp.abs(jnp.sum(s[i])) * 7).astype(jnp.int32) % 3
        return list(lax.switch(index, [lambda c, b=b: tuple(b(list(c), w)) for b in branches], tuple(s)))
    return switch


def _block(rng: np.random.Generator, depth: int, count: int, differentiable: bool) -> Block:
    statements = [_statement(rng, depth, count, differentiable) for _ in range(int(rng.integers(1, 4)))]

    def run(state: list, w: jax.Array) -> list:
        for statement in statements:
            state = statement(state, w)
        return state
    return run


def family_program(seed: int) -> Program:
    rng = np.random.default_rng(seed)
    count, width = int(rng.integers(2, 5)), int(rng.choice([8, 16, 32]))
    differentiable = bool(seed % 2)
    body = _block(rng, 0, count, differentiable)

    if differentiable:
        def fn(w, *state):
            def loss(w):
                final = body(list(state), w)
                return sum(jnp.sum(x * x) for x in final), tuple(final)
            (value, final), grad = jax.value_and_grad(loss, has_aux=True)(w)
            return w - 0.01 * grad, final, value
    else:
        def fn(w, *state):
            return w * 0.5, tuple(body(list(state), w))

    donated = tuple(1 + int(k) for k in np.flatnonzero(rng.random(count) < 0.5))
    return Program(f"family_{seed}", f"generated program {seed} ({'differentiated, ' if differentiable else ''}"
                   f"{count} state matrices of width {width})", fn,
                   (spec(width, width),) + (spec(width, width),) * count, donate_argnums=(0,) + donated)
