"""The suite's vision and generative programs (ResNets, ViTs, MobileNet, U-Net, diffusion, VAE, GAN); see `suite.py`."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax import lax

from algorithms.mmap.workloads.programs import (F32, Program, adam, adam_state, batch_norm, conv2d,
                                                cross_entropy, dense_params, layer_norm, max_pool, spec)
from algorithms.mmap.workloads.suite_layers import I32, block_params, encoder_block, mlp, trained


def resnet(name: str, stages: tuple, channels: tuple, bottleneck: bool, optimizer: str, batch: int) -> Program:
    def block(c_in, c_out):
        if bottleneck:
            mid = c_out // 4
            convs = [spec(1, 1, c_in, mid), spec(3, 3, mid, mid), spec(1, 1, mid, c_out)]
        else:
            convs = [spec(3, 3, c_in, c_out), spec(3, 3, c_out, c_out)]
        block = {"convs": convs, "norms": [{"scale": spec(k.shape[-1]), "bias": spec(k.shape[-1])} for k in convs]}
        if c_in != c_out:
            block["project"] = spec(1, 1, c_in, c_out)
        return block

    blocks, c_in = [], channels[0]
    for count, c_out in zip(stages, channels):
        for _ in range(count):
            blocks.append(block(c_in, c_out))
            c_in = c_out
    params = {"stem": spec(3, 3, 3, channels[0]), "blocks": blocks,
              "head": {"w": spec(channels[-1], 10), "b": spec(10)}}
    first_of_stage = {sum(stages[:s]) for s in range(1, len(stages))}

    def loss(params, images, labels):
        h = jax.nn.relu(conv2d(images, params["stem"]))
        for number, p in enumerate(params["blocks"]):
            stride = 2 if number in first_of_stage else 1
            r = h
            for index, (kernel, norm) in enumerate(zip(p["convs"], p["norms"])):
                r = batch_norm(conv2d(r, kernel, stride if index == len(p["convs"]) // 2 else 1),
                               norm["scale"], norm["bias"])
                r = jax.nn.relu(r) if index < len(p["convs"]) - 1 else r
            shortcut = conv2d(h, p["project"], stride) if "project" in p else h[:, ::stride, ::stride, :]
            h = jax.nn.relu(shortcut + r)
        pooled = jnp.mean(h, axis=(1, 2))
        return cross_entropy(pooled @ params["head"]["w"] + params["head"]["b"], labels)

    kind = "bottleneck" if bottleneck else "basic"
    return trained(name, f"ResNet with {kind} blocks, stages {stages}, widths {channels}, one {optimizer} step.",
                   loss, params, (spec(batch, 32, 32, 3), spec(batch, dtype=I32)), optimizer)


def resnet18_momentum() -> Program:
    return resnet("resnet18_momentum", (2, 2, 2, 2), (16, 32, 64, 128), False, "momentum", 8)


def resnet_bottleneck_adam() -> Program:
    return resnet("resnet_bottleneck_adam", (3, 4, 6), (64, 128, 256), True, "adam", 4)


def vit(name: str, depth: int, width: int, heads: int, patch: int, optimizer: str) -> Program:
    tokens = (32 // patch) ** 2
    params = {"patch": spec(patch, patch, 3, width), "cls": spec(1, 1, width), "pos": spec(1, tokens + 1, width),
              "blocks": [block_params(width, 4 * width)] * depth,
              "ln_f": {"scale": spec(width), "bias": spec(width)}, "head": {"w": spec(width, 10), "b": spec(10)}}

    def loss(params, images, labels):
        patches = lax.conv_general_dilated(images, params["patch"], (patch, patch), "VALID",
                                           dimension_numbers=("NHWC", "HWIO", "NHWC"))
        h = patches.reshape(images.shape[0], tokens, width)
        h = jnp.concatenate([jnp.broadcast_to(params["cls"], (images.shape[0], 1, width)), h], axis=1)
        h = h + params["pos"]
        for p in params["blocks"]:
            h = encoder_block(h, p, heads, causal=False)
        h = layer_norm(h[:, 0], params["ln_f"]["scale"], params["ln_f"]["bias"])
        return cross_entropy(h @ params["head"]["w"] + params["head"]["b"], labels)

    return trained(name, f"Vision transformer, {depth} blocks of width {width}, {patch}x{patch} patches, "
                         f"one {optimizer} step.", loss, params, (spec(8, 32, 32, 3), spec(8, dtype=I32)), optimizer)


def vit_tiny_adam() -> Program:
    return vit("vit_tiny_adam", 4, 64, 4, 8, "adam")


def vit_small_momentum() -> Program:
    return vit("vit_small_momentum", 8, 96, 6, 4, "momentum")


def mobilenet_sgd() -> Program:
    widths = (32, 64, 128, 128, 256)
    layers = [{"depthwise": spec(3, 3, 1, c_in), "pointwise": spec(1, 1, c_in, c_out),
               "scale": spec(c_out), "bias": spec(c_out)} for c_in, c_out in zip(widths[:-1], widths[1:])]
    params = {"stem": spec(3, 3, 3, widths[0]), "layers": layers, "head": {"w": spec(widths[-1], 10), "b": spec(10)}}

    def loss(params, images, labels):
        h = jax.nn.relu(conv2d(images, params["stem"], 2))
        for number, p in enumerate(params["layers"]):
            stride = 2 if number % 2 else 1
            h = lax.conv_general_dilated(h, p["depthwise"], (stride, stride), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                         feature_group_count=h.shape[-1])
            h = jax.nn.relu6(batch_norm(conv2d(jax.nn.relu6(h), p["pointwise"]), p["scale"], p["bias"]))
        return cross_entropy(jnp.mean(h, axis=(1, 2)) @ params["head"]["w"] + params["head"]["b"], labels)

    return trained("mobilenet_sgd", "MobileNet-style depthwise-separable convolutions, one SGD step.",
                   loss, params, (spec(16, 32, 32, 3), spec(16, dtype=I32)), "sgd")


def unet_params(channels: tuple, in_channels: int, time_features: int = 0) -> dict:
    down, c_in = [], in_channels
    for c in channels:
        down.append({"a": spec(3, 3, c_in, c), "b": spec(3, 3, c, c)})
        c_in = c
    up = []
    for c_skip, c in zip(channels[-2::-1], channels[:0:-1]):
        up.append({"up": spec(2, 2, c, c_skip), "a": spec(3, 3, 2 * c_skip, c_skip), "b": spec(3, 3, c_skip, c_skip)})
    params = {"down": down, "up": up, "out": spec(1, 1, channels[0], in_channels)}
    if time_features:
        params["time"] = [spec(time_features, c) for c in channels]
    return params


def unet(params, x, time_embedding=None):
    skips, h = [], x
    for level, p in enumerate(params["down"]):
        if level:
            h = max_pool(h)
        h = jax.nn.relu(conv2d(h, p["a"]))
        if time_embedding is not None:
            h = h + (time_embedding @ params["time"][level])[:, None, None, :]
        h = jax.nn.relu(conv2d(h, p["b"]))
        skips.append(h)
    for p, skip in zip(params["up"], skips[-2::-1]):
        h = lax.conv_transpose(h, p["up"], (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        h = jnp.concatenate([h, skip], axis=-1)
        h = jax.nn.relu(conv2d(jax.nn.relu(conv2d(h, p["a"])), p["b"]))
    return conv2d(h, params["out"])


def unet_adam() -> Program:
    params = unet_params((16, 32, 64, 128), 1)

    def loss(params, images, masks):
        logits = unet(params, images)
        return jnp.mean(jnp.logaddexp(0.0, logits) - masks * logits)

    return trained("unet_adam", "U-Net segmentation (4 levels, skip connections, transposed convs), one Adam step.",
                   loss, params, (spec(4, 64, 64, 1), spec(4, 64, 64, 1)))


def time_features(t, count: int = 16):
    frequencies = jnp.exp(-math.log(1000.0) * jnp.arange(count // 2) / (count // 2))
    angles = t[:, None].astype(F32) * frequencies
    return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)


def diffusion_sample() -> Program:
    steps, batch = 10, 4
    params = unet_params((16, 32, 64), 1, time_features=16)

    def sample(params, noise, key):
        betas = jnp.linspace(1e-4, 0.02, steps)
        alphas = jnp.cumprod(1 - betas)

        def one_step(index, state):
            x, key = state
            t = steps - 1 - index
            key, draw = jax.random.split(key)
            epsilon = unet(params, x, time_features(jnp.full((batch,), t)))
            mean = (x - betas[t] / jnp.sqrt(1 - alphas[t]) * epsilon) / jnp.sqrt(1 - betas[t])
            x = mean + jnp.where(t > 0, jnp.sqrt(betas[t]), 0.0) * jax.random.normal(draw, x.shape)
            return x, key

        return lax.fori_loop(0, steps, one_step, (noise, key))[0]

    return Program("diffusion_sample", "DDPM ancestral sampling: 10 denoising steps of a 3-level U-Net with time "
                   "embedding inside a fori_loop, fresh noise per step.",
                   sample, (params, spec(batch, 32, 32, 1), spec(2, dtype=jnp.uint32)), donate_argnums=(1,))


def diffusion_train_adam() -> Program:
    params = unet_params((16, 32, 64), 1, time_features=16)

    def loss(params, images, t, noise, alpha_bar):
        a = alpha_bar[t][:, None, None, None]
        noisy = jnp.sqrt(a) * images + jnp.sqrt(1 - a) * noise
        return jnp.mean(jnp.square(unet(params, noisy, time_features(t)) - noise))

    return trained("diffusion_train_adam", "Denoising-diffusion training step (epsilon prediction, 3-level U-Net), Adam.",
                   loss, params, (spec(8, 32, 32, 1), spec(8, dtype=I32), spec(8, 32, 32, 1), spec(1000)))


def vae_adam() -> Program:
    params = {"enc": [spec(3, 3, 1, 32), spec(3, 3, 32, 64)], "mu": dense_params([7 * 7 * 64, 16])[0],
              "logvar": dense_params([7 * 7 * 64, 16])[0], "dec": dense_params([16, 256, 784])}

    def loss(params, images, key):
        h = images
        for kernel in params["enc"]:
            h = jax.nn.relu(conv2d(h, kernel, 2))
        h = h.reshape(h.shape[0], -1)
        mu = h @ params["mu"]["w"] + params["mu"]["b"]
        logvar = h @ params["logvar"]["w"] + params["logvar"]["b"]
        z = mu + jnp.exp(0.5 * logvar) * jax.random.normal(key, mu.shape)
        logits = mlp(params["dec"], z).reshape(images.shape)
        reconstruction = jnp.sum(jnp.logaddexp(0.0, logits) - images * logits, axis=(1, 2, 3))
        kl = -0.5 * jnp.sum(1 + logvar - mu**2 - jnp.exp(logvar), axis=-1)
        return jnp.mean(reconstruction + kl)

    return trained("vae_adam", "Convolutional VAE on 28x28 images (reparameterised sample), one Adam step.",
                   loss, params, (spec(32, 28, 28, 1), spec(2, dtype=jnp.uint32)))


def gan_step() -> Program:
    generator, discriminator = dense_params([32, 256, 512, 784]), dense_params([784, 512, 256, 1])

    def step(params, opt_state, real, noise):
        def d_loss(d, fake):
            real_logits, fake_logits = mlp(d, real, jax.nn.leaky_relu), mlp(d, fake, jax.nn.leaky_relu)
            return jnp.mean(jax.nn.softplus(-real_logits) + jax.nn.softplus(fake_logits))

        def g_loss(g, d):
            return jnp.mean(jax.nn.softplus(-mlp(d, jnp.tanh(mlp(g, noise)), jax.nn.leaky_relu)))

        fake = jnp.tanh(mlp(params["g"], noise))
        d_value, d_grads = jax.value_and_grad(d_loss)(params["d"], lax.stop_gradient(fake))
        g_value, g_grads = jax.value_and_grad(g_loss)(params["g"], params["d"])
        params, opt_state = adam(params, opt_state, {"g": g_grads, "d": d_grads})
        return params, opt_state, d_value + g_value

    params = {"g": generator, "d": discriminator}
    return Program("gan_step", "GAN: discriminator and generator losses and gradients, one joint Adam step.",
                   step, (params, adam_state(params), spec(64, 784), spec(64, 32)), donate_argnums=(0, 1))


