"""Layers and training-step helpers shared by the suite's programs (`suite_vision.py`, `suite.py`)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from algorithms.mmap.workloads.programs import Program, adam, adam_state, layer_norm, momentum_sgd, sgd, spec

I32 = jnp.int32


def train_step(loss, optimizer: str = "adam"):
    """One step of `loss(params, *data)`: value_and_grad, then the optimizer; state is donated by the caller."""
    if optimizer == "adam":
        def step(params, opt_state, *data):
            value, grads = jax.value_and_grad(loss)(params, *data)
            params, opt_state = adam(params, opt_state, grads)
            return params, opt_state, value
    elif optimizer == "momentum":
        def step(params, velocity, *data):
            value, grads = jax.value_and_grad(loss)(params, *data)
            params, velocity = momentum_sgd(params, velocity, grads)
            return params, velocity, value
    else:
        def step(params, *data):
            value, grads = jax.value_and_grad(loss)(params, *data)
            return sgd(params, grads), value
    return step


def trained(name: str, description: str, loss, params, data: tuple, optimizer: str = "adam") -> Program:
    state = {"adam": (adam_state(params),), "momentum": (params,), "sgd": ()}[optimizer]
    donated = tuple(range(1 + len(state)))
    return Program(name, description, train_step(loss, optimizer), (params, *state, *data), donate_argnums=donated)


def mlp(layers, x, activation=jax.nn.relu):
    for layer in layers[:-1]:
        x = activation(x @ layer["w"] + layer["b"])
    return x @ layers[-1]["w"] + layers[-1]["b"]


def attention(x, qkv, proj, heads: int, causal: bool):
    batch, length, width = x.shape
    q, k, v = jnp.split(x @ qkv, 3, axis=-1)
    split = lambda t: t.reshape(batch, length, heads, width // heads)
    scores = jnp.einsum("bqhd,bkhd->bhqk", split(q), split(k)) / math.sqrt(width // heads)
    if causal:
        scores = jnp.where(jnp.tril(jnp.ones((length, length), bool)), scores, -1e9)
    out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, axis=-1), split(v))
    return out.reshape(batch, length, width) @ proj


def block_params(width: int, hidden: int) -> dict:
    norm = {"scale": spec(width), "bias": spec(width)}
    return {"ln1": norm, "qkv": spec(width, 3 * width), "proj": spec(width, width), "ln2": norm,
            "up": spec(width, hidden), "down": spec(hidden, width)}


def encoder_block(h, p, heads: int, causal: bool):
    h = h + attention(layer_norm(h, p["ln1"]["scale"], p["ln1"]["bias"]), p["qkv"], p["proj"], heads, causal)
    return h + jax.nn.gelu(layer_norm(h, p["ln2"]["scale"], p["ln2"]["bias"]) @ p["up"]) @ p["down"]


def lstm_cell(params, carry, x):
    h, c = carry
    i, f, g, o = jnp.split(x @ params["wx"] + h @ params["wh"] + params["b"], 4, axis=-1)
    c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return (h, c), h


def lstm_params(inputs: int, hidden: int) -> dict:
    return {"wx": spec(inputs, 4 * hidden), "wh": spec(hidden, 4 * hidden), "b": spec(4 * hidden)}


