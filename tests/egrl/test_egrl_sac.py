"""The SAC-discrete learner written as RTs against the same update derived in eager PyTorch (autograd and
torch.optim.Adam on the independent network of `egrl_torch_reference`): the actor the udf sees after two steps."""

from __future__ import annotations

import numpy as np
import torch
from egrl_torch_reference import torch_unet

from algorithms.egrl import sac
from algorithms.egrl.policy import Architecture, coarsen, dram_bias, init_weights
from algorithms.egrl.workloads import load


def torch_sac_steps(features, edges, arch, seed, actions, rewards, config, steps):
    biases = (dram_bias(len(features)), np.zeros(6), np.zeros(6))
    nets = [{name: torch.tensor(value, dtype=torch.float64, requires_grad=True)
             for name, value in init_weights(arch, seed + k, biases[k]).items()} for k in range(3)]
    optimizer = torch.optim.Adam([p for net in nets for p in net.values()], lr=config.lr)
    nodes = features.shape[0]
    index = torch.as_tensor(actions)[..., None]
    target = torch.as_tensor(rewards, dtype=torch.float64) * config.reward_scale
    for _ in range(steps):
        logits, q1, q2 = (torch_unet(net, features, edges, arch).reshape(nodes, 2, 3) for net in nets)
        critic_loss = sum(((torch.gather(q.expand(len(rewards), nodes, 2, 3), -1, index)[..., 0]
                            .mean(dim=(1, 2)) - target) ** 2).mean() for q in (q1, q2))
        log_pi = torch.log_softmax(logits, -1)
        actor_loss = (log_pi.exp() * (config.alpha * log_pi - torch.minimum(q1, q2).detach())).sum(-1).mean()
        optimizer.zero_grad()
        (critic_loss + actor_loss).backward()
        optimizer.step()
    return {name: value.detach().numpy() for name, value in nets[0].items()}


def test_two_sac_steps_match_torch():
    graph = load("resnet50")
    arch = Architecture(hidden=8, heads=2, depth=1)
    config = sac.SACConfig(batch=6)
    features, edges, nodes = graph.normalized_features(), graph.workload.edges, graph.workload.size
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 3, (config.batch, nodes, 2))
    rewards = rng.uniform(-1, 2, config.batch).astype(np.float32)
    seen = []

    def experience(iteration, logits, weights):
        seen.append(weights)
        return actions, rewards

    hierarchy = coarsen(edges, nodes, arch.depth)
    sac.build(features, hierarchy, experience, 3, config, arch, seed=7, backend="reference").execute()
    assert len(seen) == 3
    expected = torch_sac_steps(features, edges, arch, 7, actions, rewards, config, steps=2)
    for name, value in expected.items():
        np.testing.assert_allclose(seen[2][name], value, atol=2e-5, err_msg=name)
    assert any(np.abs(seen[2][name] - seen[0][name]).max() > 1e-4 for name in expected)  # it did learn


def test_one_compiled_learner_serves_several_seeds():
    """`Learner.run` with a new seed starts from that seed's initial weights (a udf, not constants baked in at
    compile), so a reused program gives the same steps as torch does for each seed."""
    graph = load("resnet50")
    arch = Architecture(hidden=8, heads=2, depth=1)
    config = sac.SACConfig(batch=6)
    features, edges, nodes = graph.normalized_features(), graph.workload.edges, graph.workload.size
    rng = np.random.default_rng(1)
    actions = rng.integers(0, 3, (config.batch, nodes, 2))
    rewards = rng.uniform(-1, 2, config.batch).astype(np.float32)
    learner = sac.Learner(features, coarsen(edges, nodes, arch.depth), 2, config, arch, backend="reference")
    for seed in (7, 3):
        seen = []
        log = learner.run(lambda iteration, logits, weights: (seen.append(weights), (actions, rewards))[1], seed)
        assert len(seen) == 2 and len(log) == 2
        np.testing.assert_allclose(seen[0]["out.b"], init_weights(arch, seed, dram_bias(nodes))["out.b"])
        expected = torch_sac_steps(features, edges, arch, seed, actions, rewards, config, steps=1)
        for name, value in expected.items():
            np.testing.assert_allclose(seen[1][name], value, atol=2e-5, err_msg=f"seed {seed}: {name}")

