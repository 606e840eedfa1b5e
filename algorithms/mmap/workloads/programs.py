"""Real JAX programs whose compiled, scheduled HLO becomes MMapGame workloads.

Each program is one training (or inference) step written with jax.numpy, jax.lax and jax.nn's activations
only (no flax, no optax): the optimizers are a few lines by hand. Arguments are abstract (`jax.ShapeDtypeStruct`), because a workload needs the
compiled program, never its values. Parameters and optimizer state are donated where a real training loop
would donate them, which gives XLA's input/output aliasing.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax import lax

F32 = jnp.float32


@dataclasses.dataclass(frozen=True)
class Program:
    name: str
    description: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    donate_argnums: tuple[int, ...] = ()


def spec(*shape: int, dtype: Any = F32) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype)


# ---------------------------------------------------------------------------------------------- optimizers


def sgd(params: Any, grads: Any, learning_rate: float = 1e-2) -> Any:
    return jax.tree_util.tree_map(lambda p, g: p - learning_rate * g, params, grads)


def momentum_sgd(params: Any, velocity: Any, grads: Any, learning_rate: float = 1e-2, beta: float = 0.9):
    velocity = jax.tree_util.tree_map(lambda v, g: beta * v + g, velocity, grads)
    params = jax.tree_util.tree_map(lambda p, v: p - learning_rate * v, params, velocity)
    return params, velocity


def adam_state(params: Any) -> dict[str, Any]:
    return {"step": spec(dtype=jnp.int32), "mu": params, "nu": params}


def adam(params: Any, state: dict[str, Any], grads: Any, learning_rate: float = 1e-3,
         b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8):
    step = state["step"] + 1
    mu = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, state["mu"], grads)
    nu = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, state["nu"], grads)
    t = step.astype(F32)
    scale = learning_rate * jnp.sqrt(1 - b2**t) / (1 - b1**t)
    params = jax.tree_util.tree_map(lambda p, m, v: p - scale * m / (jnp.sqrt(v) + eps), params, mu, nu)
    return params, {"step": step, "mu": mu, "nu": nu}


# ------------------------------------------------------------------------------------------------- layers


def dense_params(sizes: list[int]) -> list[dict[str, Any]]:
    return [{"w": spec(n_in, n_out), "b": spec(n_out)} for n_in, n_out in zip(sizes[:-1], sizes[1:])]


def cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    log_probs = logits - jax.nn.logsumexp(logits, axis=-1, keepdims=True)
    picked = jnp.take_along_axis(log_probs, labels[..., None], axis=-1)
    return -jnp.mean(picked)


def conv2d(x: jax.Array, kernel: jax.Array, stride: int = 1) -> jax.Array:
    return lax.conv_general_dilated(x, kernel, (stride, stride), "SAME",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))


def max_pool(x: jax.Array) -> jax.Array:
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def batch_norm(x: jax.Array, scale: jax.Array, bias: jax.Array) -> jax.Array:
    mean = jnp.mean(x, axis=(0, 1, 2))
    var = jnp.mean(jnp.square(x - mean), axis=(0, 1, 2))
    return (x - mean) * lax.rsqrt(var + 1e-5) * scale + bias


def layer_norm(x: jax.Array, scale: jax.Array, bias: jax.Array) -> jax.Array:
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-5) * scale + bias


# ----------------------------------------------------------------------------------------------- programs


def mlp_sgd() -> Program:
    params = dense_params([784, 1024, 512, 256, 10])

    def loss(params, images, labels):
        h = images
        for layer in params[:-1]:
            h = jax.nn.relu(h @ layer["w"] + layer["b"])
        return cross_entropy(h @ params[-1]["w"] + params[-1]["b"], labels)

    def step(params, images, labels):
        value, grads = jax.value_and_grad(loss)(params, images, labels)
        return sgd(params, grads), value

    return Program("mlp_sgd", "4-layer MLP classifier, one SGD training step (batch 256).",
                   step, (params, spec(256, 784), spec(256, dtype=jnp.int32)), donate_argnums=(0,))


def autoencoder_momentum() -> Program:
    params = dense_params([784, 256, 64, 256, 784])

    def loss(params, images):
        h = images
        for index, layer in enumerate(params):
            h = h @ layer["w"] + layer["b"]
            h = jax.nn.sigmoid(h) if index == len(params) - 1 else jnp.tanh(h)
        return jnp.mean(jnp.square(h - images))

    def step(params, velocity, images):
        value, grads = jax.value_and_grad(loss)(params, images)
        params, velocity = momentum_sgd(params, velocity, grads)
        return params, velocity, value

    return Program("autoencoder_momentum", "Dense autoencoder 784-256-64-256-784, one momentum-SGD step.",
                   step, (params, params, spec(128, 784)), donate_argnums=(0, 1))


def cnn_sgd() -> Program:
    params = {"conv1": spec(3, 3, 3, 32), "conv2": spec(3, 3, 32, 64),
              "dense": {"w": spec(8 * 8 * 64, 128), "b": spec(128)},
              "out": {"w": spec(128, 10), "b": spec(10)}}

    def loss(params, images, labels):
        h = max_pool(jax.nn.relu(conv2d(images, params["conv1"])))
        h = max_pool(jax.nn.relu(conv2d(h, params["conv2"])))
        h = h.reshape(h.shape[0], -1)
        h = jax.nn.relu(h @ params["dense"]["w"] + params["dense"]["b"])
        return cross_entropy(h @ params["out"]["w"] + params["out"]["b"], labels)

    def step(params, images, labels):
        value, grads = jax.value_and_grad(loss)(params, images, labels)
        return sgd(params, grads), value

    return Program("cnn_sgd", "Two conv + max-pool layers and a dense head on 32x32 images, one SGD step.",
                   step, (params, spec(32, 32, 32, 3), spec(32, dtype=jnp.int32)), donate_argnums=(0,))


def resnet_adam() -> Program:
    channels, blocks = 32, 8
    block = {"conv_a": spec(3, 3, channels, channels), "scale_a": spec(channels), "bias_a": spec(channels),
             "conv_b": spec(3, 3, channels, channels), "scale_b": spec(channels), "bias_b": spec(channels)}
    params = {"stem": spec(3, 3, 3, channels), "blocks": [block] * blocks,
              "head": {"w": spec(channels, 10), "b": spec(10)}}

    def loss(params, images, labels):
        h = jax.nn.relu(conv2d(images, params["stem"]))
        for index, p in enumerate(params["blocks"]):
            stride = 2 if index == blocks // 2 else 1
            shortcut = h[:, ::stride, ::stride, :]
            r = jax.nn.relu(batch_norm(conv2d(h, p["conv_a"], stride), p["scale_a"], p["bias_a"]))
            r = batch_norm(conv2d(r, p["conv_b"]), p["scale_b"], p["bias_b"])
            h = jax.nn.relu(shortcut + r)
        pooled = jnp.mean(h, axis=(1, 2))
        return cross_entropy(pooled @ params["head"]["w"] + params["head"]["b"], labels)

    def step(params, opt_state, images, labels):
        value, grads = jax.value_and_grad(loss)(params, images, labels)
        params, opt_state = adam(params, opt_state, grads)
        return params, opt_state, value

    return Program("resnet_adam", "ResNet-style net: stem conv, 8 residual blocks with batch norm, one Adam step.",
                   step, (params, adam_state(params), spec(16, 32, 32, 3), spec(16, dtype=jnp.int32)),
                   donate_argnums=(0, 1))


def lstm_scan_adam() -> Program:
    inputs, hidden, length, batch = 32, 128, 16, 32
    params = {"wx": spec(inputs, 4 * hidden), "wh": spec(hidden, 4 * hidden), "b": spec(4 * hidden),
              "out": spec(hidden, 1)}

    def loss(params, xs, targets):
        def cell(carry, x):
            h, c = carry
            gates = x @ params["wx"] + h @ params["wh"] + params["b"]
            i, f, g, o = jnp.split(gates, 4, axis=-1)
            c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        zeros = jnp.zeros((batch, hidden), F32)
        _, hs = lax.scan(cell, (zeros, zeros), xs)
        return jnp.mean(jnp.square(hs @ params["out"] - targets))

    def step(params, opt_state, xs, targets):
        value, grads = jax.value_and_grad(loss)(params, xs, targets)
        params, opt_state = adam(params, opt_state, grads)
        return params, opt_state, value

    return Program("lstm_scan_adam", "LSTM over 16 steps via lax.scan (while loops forward and backward), one Adam step.",
                   step, (params, adam_state(params), spec(length, batch, inputs), spec(length, batch, 1)),
                   donate_argnums=(0, 1))


def gru_scan_sgd() -> Program:
    inputs, hidden, length, batch = 16, 64, 12, 16
    params = {"wx": spec(inputs, 3 * hidden), "wh": spec(hidden, 3 * hidden), "b": spec(3 * hidden),
              "out": spec(hidden, 4)}

    def loss(params, xs, labels):
        def cell(h, x):
            zx, rx, nx = jnp.split(x @ params["wx"] + params["b"], 3, axis=-1)
            zh, rh, nh = jnp.split(h @ params["wh"], 3, axis=-1)
            z, r = jax.nn.sigmoid(zx + zh), jax.nn.sigmoid(rx + rh)
            h = (1 - z) * jnp.tanh(nx + r * nh) + z * h
            return h, None

        h, _ = lax.scan(cell, jnp.zeros((batch, hidden), F32), xs)
        return cross_entropy(h @ params["out"], labels)

    def step(params, xs, labels):
        value, grads = jax.value_and_grad(loss)(params, xs, labels)
        return sgd(params, grads), value

    return Program("gru_scan_sgd", "GRU sequence classifier over 12 steps via lax.scan, one SGD step.",
                   step, (params, spec(length, batch, inputs), spec(batch, dtype=jnp.int32)),
                   donate_argnums=(0,))


def wavenet_adam() -> Program:
    channels, skip, dilations = 32, 32, (1, 2, 4, 8, 16, 32) * 2
    layer = {"filter": spec(2, channels, channels), "gate": spec(2, channels, channels),
             "residual": spec(1, channels, channels), "skip": spec(1, channels, skip)}
    params = {"embed": spec(1, 1, channels), "layers": [layer] * len(dilations),
              "head": spec(1, skip, 1)}

    def causal_conv(x, kernel, dilation):
        pad = (kernel.shape[0] - 1) * dilation
        return lax.conv_general_dilated(x, kernel, (1,), [(pad, 0)], rhs_dilation=(dilation,),
                                        dimension_numbers=("NWC", "WIO", "NWC"))

    def loss(params, audio):
        inputs, targets = audio[:, :-1, :], audio[:, 1:, :]
        h = causal_conv(inputs, params["embed"], 1)
        skips = 0.0
        for p, dilation in zip(params["layers"], dilations):
            z = jnp.tanh(causal_conv(h, p["filter"], dilation)) * jax.nn.sigmoid(causal_conv(h, p["gate"], dilation))
            h = h + causal_conv(z, p["residual"], 1)
            skips = skips + causal_conv(z, p["skip"], 1)
        prediction = causal_conv(jax.nn.relu(skips), params["head"], 1)
        return jnp.mean(jnp.square(prediction - targets))

    def step(params, opt_state, audio):
        value, grads = jax.value_and_grad(loss)(params, audio)
        params, opt_state = adam(params, opt_state, grads)
        return params, opt_state, value

    return Program("wavenet_adam", "WaveNet-style stack of 12 gated dilated causal convolutions, one Adam step.",
                   step, (params, adam_state(params), spec(4, 257, 1)), donate_argnums=(0, 1))


def transformer_adam() -> Program:
    vocab, width, heads, seq, batch, depth = 256, 128, 4, 64, 8, 6
    block = {"ln1": {"scale": spec(width), "bias": spec(width)}, "qkv": spec(width, 3 * width),
             "proj": spec(width, width), "ln2": {"scale": spec(width), "bias": spec(width)},
             "up": spec(width, 4 * width), "down": spec(4 * width, width)}
    params = {"embed": spec(vocab, width), "pos": spec(seq, width), "blocks": [block] * depth,
              "ln_f": {"scale": spec(width), "bias": spec(width)}}

    def attention(x, p):
        q, k, v = jnp.split(x @ p["qkv"], 3, axis=-1)
        split = lambda t: t.reshape(batch, seq, heads, width // heads)
        scores = jnp.einsum("bqhd,bkhd->bhqk", split(q), split(k)) / math.sqrt(width // heads)
        mask = jnp.tril(jnp.ones((seq, seq), bool))
        weights = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1)
        out = jnp.einsum("bhqk,bkhd->bqhd", weights, split(v)).reshape(batch, seq, width)
        return out @ p["proj"]

    def loss(params, tokens, targets):
        h = params["embed"][tokens] + params["pos"]
        for p in params["blocks"]:
            h = h + attention(layer_norm(h, p["ln1"]["scale"], p["ln1"]["bias"]), p)
            up = jax.nn.gelu(layer_norm(h, p["ln2"]["scale"], p["ln2"]["bias"]) @ p["up"])
            h = h + up @ p["down"]
        h = layer_norm(h, params["ln_f"]["scale"], params["ln_f"]["bias"])
        return cross_entropy(h @ params["embed"].T, targets)

    def step(params, opt_state, tokens, targets):
        value, grads = jax.value_and_grad(loss)(params, tokens, targets)
        params, opt_state = adam(params, opt_state, grads)
        return params, opt_state, value

    tokens = spec(batch, seq, dtype=jnp.int32)
    return Program("transformer_adam", "Six pre-norm transformer blocks (causal attention + MLP), one Adam step.",
                   step, (params, adam_state(params), tokens, tokens), donate_argnums=(0, 1))


def transformer_decode() -> Program:
    vocab, width, heads, max_len, batch, steps, depth = 128, 64, 4, 32, 4, 8, 2
    layer = {"qkv": spec(width, 3 * width), "proj": spec(width, width), "up": spec(width, 2 * width),
             "down": spec(2 * width, width)}
    params = {"embed": spec(vocab, width), "layers": [layer] * depth}
    cache = [{"k": spec(batch, max_len, width), "v": spec(batch, max_len, width)}] * depth
    split = lambda t: t.reshape(batch, -1, heads, width // heads)

    def attend(p, layer_cache, x, position):
        q, k, v = jnp.split(x @ p["qkv"], 3, axis=-1)
        keys = lax.dynamic_update_slice(layer_cache["k"], k[:, None, :], (0, position, 0))
        values = lax.dynamic_update_slice(layer_cache["v"], v[:, None, :], (0, position, 0))
        scores = jnp.einsum("bqhd,bkhd->bhqk", split(q[:, None, :]), split(keys))
        visible = jnp.arange(max_len) <= position
        weights = jax.nn.softmax(jnp.where(visible, scores, -1e9), axis=-1)
        attended = jnp.einsum("bhqk,bkhd->bqhd", weights, split(values)).reshape(batch, width)
        h = x + attended @ p["proj"]
        return h + jax.nn.relu(h @ p["up"]) @ p["down"], {"k": keys, "v": values}

    def decode(params, cache, tokens, start):
        def one_token(index, state):
            cache, token = state
            h, new_cache = params["embed"][token], []
            for p, layer_cache in zip(params["layers"], cache):
                h, layer_cache = attend(p, layer_cache, h, start + index)
                new_cache.append(layer_cache)
            return new_cache, jnp.argmax(h @ params["embed"].T, axis=-1).astype(jnp.int32)

        return lax.fori_loop(0, steps, one_token, (cache, tokens))

    return Program("transformer_decode",
                   "Greedy decoding of 8 tokens by a 2-layer transformer whose KV cache is updated in place "
                   "inside a fori_loop.",
                   decode, (params, cache, spec(batch, dtype=jnp.int32), spec(dtype=jnp.int32)),
                   donate_argnums=(1,))


def muzero_adam() -> Program:
    obs, latent, actions, unroll, batch = 64, 128, 8, 5, 32
    params = {"represent": dense_params([obs, 256, latent]), "dynamics": dense_params([latent + actions, 256, latent + 1]),
              "policy": dense_params([latent, 128, actions]), "value": dense_params([latent, 128, 1])}

    def mlp(layers, x):
        for layer in layers[:-1]:
            x = jax.nn.relu(x @ layer["w"] + layer["b"])
        return x @ layers[-1]["w"] + layers[-1]["b"]

    def loss(params, observation, action_ids, target_policy, target_value, target_reward):
        state = mlp(params["represent"], observation)
        total = 0.0
        for k in range(unroll + 1):
            logits = mlp(params["policy"], state)
            value = mlp(params["value"], state)[:, 0]
            total += -jnp.mean(jnp.sum(target_policy[k] * jax.nn.log_softmax(logits), axis=-1))
            total += jnp.mean(jnp.square(value - target_value[k]))
            if k < unroll:
                action = (action_ids[k][:, None] == jnp.arange(actions)).astype(F32)
                out = mlp(params["dynamics"], jnp.concatenate([state, action], axis=-1))
                state, reward = out[:, :latent], out[:, latent]
                total += jnp.mean(jnp.square(reward - target_reward[k]))
                state = 0.5 * lax.stop_gradient(state) + 0.5 * state
        return total

    def step(params, opt_state, *batch_data):
        value, grads = jax.value_and_grad(loss)(params, *batch_data)
        params, opt_state = adam(params, opt_state, grads)
        return params, opt_state, value

    data = (spec(batch, obs), spec(unroll, batch, dtype=jnp.int32), spec(unroll + 1, batch, actions),
            spec(unroll + 1, batch), spec(unroll, batch))
    return Program("muzero_adam", "MuZero-style representation/dynamics/prediction nets unrolled 5 steps, one Adam step.",
                   step, (params, adam_state(params), *data), donate_argnums=(0, 1))


PROGRAMS: dict[str, Callable[[], Program]] = {
    factory.__name__: factory
    for factory in (mlp_sgd, autoencoder_momentum, cnn_sgd, resnet_adam, lstm_scan_adam, gru_scan_sgd,
                    wavenet_adam, transformer_adam, transformer_decode, muzero_adam)
}
