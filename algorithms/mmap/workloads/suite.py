"""More real JAX programs for the workload suite (the paper's 60 span 169-16,490 buffers): vision, language,
generative, graph, recommendation and RL updates, written like `programs.py` (jax.numpy, lax, hand-written
optimizers, abstract arguments, donated parameters and optimizer state).

`ALL_PROGRAMS` is every program of the suite: the ten of `programs.py`, the vision and generative ones of
`suite_vision.py` and the language, graph, science and RL ones here.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from algorithms.mmap.workloads.programs import (F32, PROGRAMS, Program, adam, adam_state, cross_entropy,
                                                dense_params, layer_norm, spec)
from algorithms.mmap.workloads.suite_layers import (I32, attention, block_params, encoder_block, lstm_cell,
                                                    lstm_params, mlp, trained)
from algorithms.mmap.workloads.suite_vision import (diffusion_sample, diffusion_train_adam, gan_step,
                                                    mobilenet_sgd, resnet18_momentum, resnet_bottleneck_adam,
                                                    unet_adam, vae_adam, vit_small_momentum, vit_tiny_adam)

# ----------------------------------------------------------------------------------------------- language


def gpt(name: str, depth: int, width: int, heads: int, seq: int, batch: int, vocab: int, clip: bool) -> Program:
    params = {"embed": spec(vocab, width), "pos": spec(seq, width), "blocks": [block_params(width, 4 * width)] * depth,
              "ln_f": {"scale": spec(width), "bias": spec(width)}}

    def loss(params, tokens):
        h = params["embed"][tokens[:, :-1]] + params["pos"]
        for p in params["blocks"]:
            h = encoder_block(h, p, heads, causal=True)
        h = layer_norm(h, params["ln_f"]["scale"], params["ln_f"]["bias"])
        return cross_entropy(h @ params["embed"].T, tokens[:, 1:])

    def step(params, opt_state, tokens):
        value, grads = jax.value_and_grad(loss)(params, tokens)
        if clip:
            norm = jnp.sqrt(sum(jnp.sum(g * g) for g in jax.tree_util.tree_leaves(grads)))
            grads = jax.tree_util.tree_map(lambda g: g * jnp.minimum(1.0, 1.0 / (norm + 1e-6)), grads)
        params, opt_state = adam(params, opt_state, grads)
        params = jax.tree_util.tree_map(lambda p: p * (1 - 1e-4), params)  # decoupled weight decay (AdamW)
        return params, opt_state, value

    extra = ", global-norm clipping" if clip else ""
    return Program(name, f"GPT-style decoder ({depth} causal blocks, width {width}, tied embeddings{extra}), "
                         "one AdamW training step.",
                   step, (params, adam_state(params), spec(batch, seq + 1, dtype=I32)), donate_argnums=(0, 1))


def gpt_small_adamw() -> Program:
    return gpt("gpt_small_adamw", 4, 128, 4, 64, 4, 512, clip=True)


def gpt_deep_adamw() -> Program:
    return gpt("gpt_deep_adamw", 16, 64, 4, 32, 2, 256, clip=True)


def bert_mlm_adam() -> Program:
    vocab, width, heads, seq, batch, depth, masked = 512, 128, 4, 64, 4, 4, 8
    params = {"embed": spec(vocab, width), "pos": spec(seq, width), "segment": spec(2, width),
              "blocks": [block_params(width, 4 * width)] * depth, "ln_f": {"scale": spec(width), "bias": spec(width)}}

    def loss(params, tokens, segments, positions, targets):
        h = params["embed"][tokens] + params["pos"] + params["segment"][segments]
        for p in params["blocks"]:
            h = encoder_block(h, p, heads, causal=False)
        picked = jnp.take_along_axis(h, positions[..., None], axis=1)
        picked = layer_norm(picked, params["ln_f"]["scale"], params["ln_f"]["bias"])
        return cross_entropy(picked @ params["embed"].T, targets)

    return trained("bert_mlm_adam", "BERT-style bidirectional encoder, masked-token loss at 8 positions, one Adam step.",
                   loss, params, (spec(batch, seq, dtype=I32), spec(batch, seq, dtype=I32),
                                  spec(batch, masked, dtype=I32), spec(batch, masked, dtype=I32)))


def lstm_lm_adam() -> Program:
    vocab, width, hidden, seq, batch = 1000, 64, 128, 20, 16
    params = {"embed": spec(vocab, width), "layers": [lstm_params(width, hidden), lstm_params(hidden, hidden)],
              "out": {"w": spec(hidden, vocab), "b": spec(vocab)}}

    def loss(params, tokens):
        h = params["embed"][tokens[:-1]]
        for layer in params["layers"]:
            zeros = jnp.zeros((batch, hidden), F32)
            _, h = lax.scan(lambda carry, x, layer=layer: lstm_cell(layer, carry, x), (zeros, zeros), h)
        return cross_entropy(h @ params["out"]["w"] + params["out"]["b"], tokens[1:])

    return trained("lstm_lm_adam", "Two-layer LSTM language model (embedding, lax.scan per layer, softmax over "
                   "1,000 words), one Adam step.", loss, params, (spec(seq + 1, batch, dtype=I32),))


def seq2seq_attention_adam() -> Program:
    vocab, hidden, src_len, tgt_len, batch = 200, 64, 12, 10, 16
    params = {"src_embed": spec(vocab, hidden), "tgt_embed": spec(vocab, hidden),
              "encoder": lstm_params(hidden, hidden), "decoder": lstm_params(2 * hidden, hidden),
              "attend": spec(hidden, hidden), "out": {"w": spec(2 * hidden, vocab), "b": spec(vocab)}}

    def loss(params, source, target):
        zeros = jnp.zeros((batch, hidden), F32)
        _, memory = lax.scan(lambda c, x: lstm_cell(params["encoder"], c, x), (zeros, zeros), params["src_embed"][source])

        def decode(carry, token):
            state, context = carry
            state, h = lstm_cell(params["decoder"], state, jnp.concatenate([params["tgt_embed"][token], context], -1))
            weights = jax.nn.softmax(jnp.einsum("bh,sbh->bs", h @ params["attend"], memory), axis=-1)
            context = jnp.einsum("bs,sbh->bh", weights, memory)
            return (state, context), jnp.concatenate([h, context], -1)

        _, outputs = lax.scan(decode, ((zeros, zeros), zeros), target[:-1])
        return cross_entropy(outputs @ params["out"]["w"] + params["out"]["b"], target[1:])

    return trained("seq2seq_attention_adam", "LSTM encoder-decoder with Luong attention, both as lax.scan, one Adam step.",
                   loss, params, (spec(src_len, batch, dtype=I32), spec(tgt_len + 1, batch, dtype=I32)))


def moe_transformer_adam() -> Program:
    vocab, width, heads, seq, batch, depth, experts = 256, 64, 4, 32, 4, 3, 4
    block = block_params(width, 2 * width)
    block.update({"router": spec(width, experts), "up": spec(experts, width, 2 * width),
                  "down": spec(experts, 2 * width, width)})
    params = {"embed": spec(vocab, width), "blocks": [block] * depth}

    def loss(params, tokens):
        h = params["embed"][tokens[:, :-1]]
        for p in params["blocks"]:
            h = h + attention(layer_norm(h, p["ln1"]["scale"], p["ln1"]["bias"]), p["qkv"], p["proj"], heads, True)
            x = layer_norm(h, p["ln2"]["scale"], p["ln2"]["bias"])
            gates = jax.nn.softmax(x @ p["router"], axis=-1)
            choice = jax.nn.one_hot(jnp.argmax(gates, axis=-1), experts) * gates
            hidden = jax.nn.gelu(jnp.einsum("bsw,ewh->bseh", x, p["up"]))
            h = h + jnp.einsum("bseh,ehw,bse->bsw", hidden, p["down"], choice)
        return cross_entropy(h @ params["embed"].T, tokens[:, 1:])

    return trained("moe_transformer_adam", "Transformer with top-1 mixture-of-experts MLPs (4 experts), one Adam step.",
                   loss, params, (spec(batch, seq + 1, dtype=I32),))


# ------------------------------------------------------------------------------- graphs, recsys, science


def graph_network_adam() -> Program:
    nodes, edges, features, hidden, rounds = 256, 1024, 16, 64, 3
    params = {"encode": dense_params([features, hidden]),
              "edge": [dense_params([3 * hidden, hidden, hidden])] * rounds,
              "node": [dense_params([2 * hidden, hidden, hidden])] * rounds, "decode": dense_params([hidden, 1])}

    def loss(params, x, senders, receivers, targets):
        h = mlp(params["encode"], x)
        for edge_mlp, node_mlp in zip(params["edge"], params["node"]):
            messages = mlp(edge_mlp, jnp.concatenate([h[senders], h[receivers], h[senders] - h[receivers]], -1))
            incoming = jax.ops.segment_sum(messages, receivers, num_segments=nodes)
            h = h + mlp(node_mlp, jnp.concatenate([h, incoming], -1))
        return jnp.mean(jnp.square(mlp(params["decode"], h)[:, 0] - targets))

    return trained("graph_network_adam", "Graph network: 3 rounds of edge and node MLPs with segment_sum message "
                   "passing (gather/scatter), one Adam step.",
                   loss, params, (spec(nodes, features), spec(edges, dtype=I32), spec(edges, dtype=I32), spec(nodes)))


def dlrm_sgd() -> Program:
    tables, rows, dim, dense, batch = 8, 5000, 16, 13, 128
    params = {"tables": [spec(rows, dim)] * tables, "bottom": dense_params([dense, 64, dim]),
              "top": dense_params([dim + (tables + 1) * tables // 2, 128, 64, 1])}

    def loss(params, dense_features, sparse_ids, clicks):
        embedded = [table[sparse_ids[:, t]] for t, table in enumerate(params["tables"])]
        features = jnp.stack([jax.nn.relu(mlp(params["bottom"], dense_features))] + embedded, axis=1)
        interactions = jnp.einsum("bid,bjd->bij", features, features)
        upper = jnp.triu_indices(tables + 1, k=1)
        x = jnp.concatenate([features[:, 0], interactions[:, upper[0], upper[1]]], -1)
        logits = mlp(params["top"], x)[:, 0]
        return jnp.mean(jnp.logaddexp(0.0, logits) - clicks * logits)

    return trained("dlrm_sgd", "DLRM-style recommender: 8 embedding tables (gather, scatter-add gradients), "
                   "bottom/top MLPs, pairwise dot interactions, one SGD step.",
                   loss, params, (spec(batch, dense), spec(batch, tables, dtype=I32), spec(batch)), "sgd")


def neural_ode_adam() -> Program:
    dim, hidden, steps, batch = 16, 64, 8, 32
    params = dense_params([dim + 1, hidden, hidden, dim])

    def loss(params, x0, target):
        field = lambda x, t: mlp(params, jnp.concatenate([x, jnp.full((batch, 1), t)], -1), jnp.tanh)
        dt = 1.0 / steps

        def rk4(index, x):
            t = index * dt
            k1 = field(x, t)
            k2 = field(x + dt / 2 * k1, t + dt / 2)
            k3 = field(x + dt / 2 * k2, t + dt / 2)
            k4 = field(x + dt * k3, t + dt)
            return x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

        return jnp.mean(jnp.square(lax.fori_loop(0, steps, rk4, x0) - target))

    return trained("neural_ode_adam", "Neural ODE: 8 RK4 steps of an MLP vector field in a fori_loop, differentiated "
                   "through the loop, one Adam step.", loss, params, (spec(batch, dim), spec(batch, dim)))


def rnn_cond_scan_sgd() -> Program:
    inputs, hidden, length, batch = 16, 64, 12, 8
    params = {"wx": spec(inputs, hidden), "wh": spec(hidden, hidden), "skip": spec(hidden, hidden),
              "out": spec(hidden, 1)}

    def loss(params, xs, flags, targets):
        def cell(h, step):
            x, flag = step
            h = lax.cond(flag > 0, lambda h: jnp.tanh(x @ params["wx"] + h @ params["wh"]),
                         lambda h: h @ params["skip"], h)
            return h, h

        _, hs = lax.scan(cell, jnp.zeros((batch, hidden), F32), (xs, flags))
        return jnp.mean(jnp.square(hs @ params["out"] - targets))

    return trained("rnn_cond_scan_sgd", "RNN whose cell is a lax.cond inside lax.scan (update or skip), "
                   "differentiated: conditionals inside loops under autodiff, one SGD step.",
                   loss, params, (spec(length, batch, inputs), spec(length, dtype=I32), spec(length, batch, 1)), "sgd")


# -------------------------------------------------------------------------------------------- RL updates


def ppo_update_adam() -> Program:
    obs, actions, rollout, minibatches, epochs = 8, 4, 512, 4, 2
    params = {"actor": dense_params([obs, 64, 64, actions]), "critic": dense_params([obs, 64, 64, 1])}
    size = rollout // minibatches

    def loss(params, batch):
        observations, taken, old_log_probs, advantages, returns = batch
        log_probs = jax.nn.log_softmax(mlp(params["actor"], observations, jnp.tanh))
        new = jnp.take_along_axis(log_probs, taken[:, None], -1)[:, 0]
        ratio = jnp.exp(new - old_log_probs)
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        surrogate = jnp.minimum(ratio * advantages, jnp.clip(ratio, 0.8, 1.2) * advantages)
        value = mlp(params["critic"], observations, jnp.tanh)[:, 0]
        entropy = -jnp.sum(jnp.exp(log_probs) * log_probs, -1)
        return -surrogate.mean() + 0.5 * jnp.mean(jnp.square(value - returns)) - 0.01 * entropy.mean()

    def update(params, opt_state, rollout_data, permutation):
        def minibatch(index, state):
            params, opt_state = state
            chosen = lax.dynamic_slice(permutation, (index % minibatches * size,), (size,))
            grads = jax.grad(loss)(params, [x[chosen] for x in rollout_data])
            return adam(params, opt_state, grads)

        return lax.fori_loop(0, epochs * minibatches, minibatch, (params, opt_state))

    data = [spec(rollout, obs), spec(rollout, dtype=I32), spec(rollout), spec(rollout), spec(rollout)]
    return Program("ppo_update_adam", "PPO update: 2 epochs x 4 minibatches of the clipped surrogate, value loss "
                   "and entropy, Adam inside a fori_loop over minibatches.",
                   update, (params, adam_state(params), data, spec(rollout, dtype=I32)), donate_argnums=(0, 1))


def dqn_update_adam() -> Program:
    obs, actions, batch = 32, 6, 128
    params = dense_params([obs, 256, 256, actions])

    def step(params, target_params, opt_state, observations, taken, rewards, next_observations, done):
        def loss(params):
            q = jnp.take_along_axis(mlp(params, observations), taken[:, None], -1)[:, 0]
            next_q = mlp(target_params, next_observations).max(-1)
            error = q - lax.stop_gradient(rewards + 0.99 * (1 - done) * next_q)
            return jnp.mean(jnp.where(jnp.abs(error) < 1, 0.5 * error**2, jnp.abs(error) - 0.5))

        value, grads = jax.value_and_grad(loss)(params)
        params, opt_state = adam(params, opt_state, grads)
        target_params = jax.tree_util.tree_map(lambda t, p: 0.995 * t + 0.005 * p, target_params, params)
        return params, target_params, opt_state, value

    return Program("dqn_update_adam", "DQN update: Huber TD loss against a target network, Adam, Polyak target update.",
                   step, (params, params, adam_state(params), spec(batch, obs), spec(batch, dtype=I32), spec(batch),
                          spec(batch, obs), spec(batch)), donate_argnums=(0, 1, 2))


def muzero_scan_adam() -> Program:
    obs, latent, actions, unroll, batch, support = 64, 128, 8, 5, 32, 21
    params = {"represent": dense_params([obs, 256, latent]), "dynamics": dense_params([latent + actions, 256, latent]),
              "reward": dense_params([latent, 64, support]), "policy": dense_params([latent, 128, actions]),
              "value": dense_params([latent, 128, support])}

    def scale(state):
        low, high = state.min(-1, keepdims=True), state.max(-1, keepdims=True)
        return (state - low) / (high - low + 1e-6)

    def predict(params, state):
        return jax.nn.log_softmax(mlp(params["policy"], state)), jax.nn.log_softmax(mlp(params["value"], state))

    def loss(params, observation, action_ids, target_policy, target_value, target_reward):
        state = scale(mlp(params["represent"], observation))
        policy, value = predict(params, state)
        first = -jnp.mean(jnp.sum(target_policy[0] * policy, -1) + jnp.sum(target_value[0] * value, -1))

        def unroll_step(state, step):
            action, tp, tv, tr = step
            state = scale(mlp(params["dynamics"], jnp.concatenate([state, jax.nn.one_hot(action, actions)], -1)))
            reward = jax.nn.log_softmax(mlp(params["reward"], state))
            policy, value = predict(params, state)
            terms = jnp.sum(tp * policy, -1) + jnp.sum(tv * value, -1) + jnp.sum(tr * reward, -1)
            return 0.5 * state + 0.5 * lax.stop_gradient(state), -jnp.mean(terms)

        _, losses = lax.scan(unroll_step, state, (action_ids, target_policy[1:], target_value[1:], target_reward))
        return first + jnp.sum(losses) / unroll

    data = (spec(batch, obs), spec(unroll, batch, dtype=I32), spec(unroll + 1, batch, actions),
            spec(unroll + 1, batch, support), spec(unroll, batch, support))
    return trained("muzero_scan_adam", "MuZero update with categorical value/reward supports and the unroll as "
                   "lax.scan (loop forward and backward), one Adam step.", loss, params, data)


def alphatensor_adam() -> Program:
    size, width, heads, depth, factors, batch = 4, 64, 4, 3, 3, 8
    tokens = size * size
    params = {"embed": spec(size, width), "pos": spec(tokens, width),
              "axial": [[block_params(width, 2 * width)] * 2] * depth,
              "policy": {"w": spec(width, factors * size * 3), "b": spec(factors * size * 3)},
              "value": dense_params([width, 64, 1])}

    def loss(params, tensor, target_factors, target_value):
        h = tensor[..., None] * params["embed"][None, None, None]  # (batch, i, j, k, width) -> sum over k
        h = h.sum(3).reshape(batch, tokens, width) + params["pos"]
        for row_block, column_block in params["axial"]:
            grid = h.reshape(batch, size, size, width)
            rows = encoder_block(grid.reshape(batch * size, size, width), row_block, heads, causal=False)
            grid = rows.reshape(batch, size, size, width).transpose(0, 2, 1, 3)
            columns = encoder_block(grid.reshape(batch * size, size, width), column_block, heads, causal=False)
            h = columns.reshape(batch, size, size, width).transpose(0, 2, 1, 3).reshape(batch, tokens, width)
        pooled = h.mean(1)
        logits = (pooled @ params["policy"]["w"] + params["policy"]["b"]).reshape(batch, factors * size, 3)
        value = mlp(params["value"], pooled)[:, 0]
        return cross_entropy(logits, target_factors) + jnp.mean(jnp.square(value - target_value))

    return trained("alphatensor_adam", "AlphaTensor-like torso: axial attention over a 4x4x4 tensor's rows and "
                   "columns, factor-logit policy head and value head, one Adam step.",
                   loss, params, (spec(batch, size, size, size), spec(batch, factors * size, dtype=I32), spec(batch)))


MORE_PROGRAMS: dict[str, object] = {
    factory.__name__: factory
    for factory in (resnet18_momentum, resnet_bottleneck_adam, vit_tiny_adam, vit_small_momentum, mobilenet_sgd,
                    unet_adam, diffusion_sample, diffusion_train_adam, vae_adam, gan_step, gpt_small_adamw,
                    gpt_deep_adamw, bert_mlm_adam, lstm_lm_adam, seq2seq_attention_adam, moe_transformer_adam,
                    graph_network_adam, dlrm_sgd, neural_ode_adam, rnn_cond_scan_sgd, ppo_update_adam,
                    dqn_update_adam, muzero_scan_adam, alphatensor_adam)
}
ALL_PROGRAMS: dict[str, object] = {**PROGRAMS, **MORE_PROGRAMS}
