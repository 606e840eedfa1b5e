"""The `materialize` op: the value as it is on every backend; on jax an optimization barrier inside the jit
(so that XLA computes its input once instead of fusing it into each consumer's loop)."""

import jax
import numpy as np
from conftest import assert_values, collect, run

import timerl as trl
from timerl.backends.jax_backend import JaxBackend
from timerl.rt import functional as F
from timerl.runtime.evaluate import op_kernel


def test_materialize_returns_its_input(backend):
    value = np.arange(12, dtype=np.int64).reshape(3, 4)
    ctx = trl.Context(dims="t")
    with ctx:
        store = collect(F.apply("materialize", trl.tensor(value)) * 2)
    run(ctx, {}, backend)
    assert_values(store, {(): value * 2})


def test_materialize_is_an_optimization_barrier_in_jax():
    kernel = op_kernel("materialize", {}, "float32", JaxBackend())
    jaxpr = jax.make_jaxpr(kernel)(np.ones((2, 3), np.float32))
    assert "optimization_barrier" in str(jaxpr)
