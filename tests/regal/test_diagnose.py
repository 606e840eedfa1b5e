"""The diagnostic proposals encode what they claim, and the reward compares a graph's samples on shared seeds."""

import numpy as np

from algorithms.regal import brkga, diagnose, features, train
from algorithms.regal.data import generate
from algorithms.regal.perfmodel import DEVICES, chromosome_length


def beta_means(graph, actions):
    proposal = features.proposal(graph, actions)
    return proposal.alpha / (proposal.alpha + proposal.beta)


def test_quantized_oracle_is_the_solutions_actions():
    """The quantized oracle centres every head on the solution (`features.solution_actions`, tested by hand
    in test_policy): its placement decodes to the solution's (up to renaming the devices), its priorities
    and the transfer keys it reads round to the nearest mean."""
    graph = generate(1, 1, ops=(9, 9), seed=2)[0]
    keys = np.random.default_rng(0).random(chromosome_length(graph))
    actions = diagnose.quantized_actions(graph, keys)
    np.testing.assert_array_equal(actions, features.solution_actions(graph, keys, 10.0))
    means = beta_means(graph, actions)
    ops = graph.num_ops
    grid = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
    place = keys[:2 * ops].reshape(ops, 2).argmax(axis=1)
    decoded = means[:2 * ops].reshape(ops, 2).argmax(axis=1)
    assert (decoded == place).all() or (decoded == 1 - place).all()
    np.testing.assert_allclose(means[2 * ops:3 * ops], grid[np.abs(keys[2 * ops:3 * ops, None] - grid).argmin(axis=1)])
    read = keys[3 * ops:].reshape(ops, 2)[np.arange(ops), 1 - place]  # one output tensor per op here
    nearest = grid[np.abs(read[:, None] - grid).argmin(axis=1)]
    np.testing.assert_allclose(means[3 * ops:].reshape(ops, 2), nearest[:, None].repeat(2, axis=1))


def test_placement_rows_keep_only_the_solutions_devices():
    """The placement rows' proposal decodes to the solution's placement (up to renaming the devices) with
    affinity means 0.9 / 0.1, and leaves every priority and transfer gene uniform Beta(1, 1)."""
    graph = generate(1, 1, ops=(10, 10), seed=9)[0]
    ops = graph.num_ops
    keys = np.random.default_rng(1).random(chromosome_length(graph))
    proposal = features.proposal(graph, diagnose.placement_actions(graph, keys))
    np.testing.assert_array_equal(proposal.alpha[DEVICES * ops:], 1.0)
    np.testing.assert_array_equal(proposal.beta[DEVICES * ops:], 1.0)
    means = (proposal.alpha / (proposal.alpha + proposal.beta))[:DEVICES * ops].reshape(ops, DEVICES)
    np.testing.assert_allclose(np.sort(means, axis=1), np.tile([0.1, 0.9], (ops, 1)))
    np.testing.assert_allclose(proposal.alpha[:DEVICES * ops] + proposal.beta[:DEVICES * ops], 4.0)
    place = keys[:DEVICES * ops].reshape(ops, DEVICES).argmax(axis=1)
    decoded = means.argmax(axis=1)
    assert (decoded == place).all() or (decoded == 1 - place).all()


def test_gaps_measure_every_row_against_uniform_brkga():
    """One row per proposal; the oracle-placement row is BRKGA with that proposal against uniform BRKGA with
    the same seed, recomputed here by hand for one graph and seed."""
    graph = generate(1, 1, ops=(8, 8), seed=10)[0]
    rows = diagnose.gaps([graph], "peak_memory", budget=40, seeds=1)
    names = [row.name for row in rows]
    assert names[:5] == ["uniform, other seed", "oracle", "oracle, quantized", "oracle placement",
                         "placement of a same-budget search"] and len(names) == 11
    best = brkga.optimize(graph, "peak_memory", 400, seed=1_000_003).best
    uniform = brkga.optimize(graph, "peak_memory", 40, seed=0).best_cost
    placed = brkga.optimize(graph, "peak_memory", 40, features.proposal(graph, diagnose.placement_actions(graph, best)),
                            seed=0).best_cost
    np.testing.assert_allclose(rows[3].improvement, [[(uniform - placed) / uniform * 100.0]])


def test_rank_rule_raises_priority_with_the_score():
    graph = generate(1, 1, ops=(12, 12), seed=3)[0]
    _, height = features.path_lengths(graph)
    means = beta_means(graph, diagnose.rank_actions(graph, height))[DEVICES * graph.num_ops:3 * graph.num_ops]
    order = np.argsort(height, kind="stable")
    assert (np.diff(means[order]) >= 0).all() and means[height.argmax()] == 0.9 and means[height.argmin()] == 0.1


def test_transfers_first_keeps_the_ops_order():
    """One Beta on every op priority is a monotone map of the same uniform draws: the ops' order is that of
    uniform BRKGA, and every op priority lies below the transfers' median."""
    graph = generate(1, 1, ops=(10, 10), seed=4)[0]
    ops = graph.num_ops
    proposal = features.proposal(graph, diagnose.transfers_first(graph))
    skewed = proposal.sample(np.random.default_rng(5), 50)[:, DEVICES * ops:3 * ops]
    plain = brkga.Proposal.uniform(proposal.alpha.size).sample(np.random.default_rng(5), 50)[:, DEVICES * ops:3 * ops]
    np.testing.assert_array_equal(np.argsort(skewed, axis=1), np.argsort(plain, axis=1))
    assert skewed.max() < 0.5


def test_reward_shares_seeds_between_the_samples_of_a_graph():
    graphs = generate(2, 1, ops=(8, 8), seed=6)
    config = train.Config(kind="runtime", batch=4, samples=2, seeds=2, train_budget=60)
    reward = train._Reward(graphs, np.array([[0, 0, 1, 1]]), config)
    rng = np.random.default_rng(0)
    skewed = rng.integers(0, features.UNIFORM, (8, features.HEADS))
    uniform = np.full((8, features.HEADS), features.UNIFORM)
    (rewards,) = reward({"i": 0}, np.stack([skewed, skewed, uniform, uniform]))
    assert rewards[0] == rewards[1]  # same action, same seeds: the same reward
    np.testing.assert_array_equal(rewards[2:], -1.0)  # uniform proposals reproduce uniform BRKGA exactly
    expected = -np.mean([brkga.optimize(graphs[0], "runtime", 60, features.proposal(graphs[0], skewed), s).best_cost
                         / brkga.optimize(graphs[0], "runtime", 60, seed=s).best_cost for s in reward.seeds(0, 0)])
    assert rewards[0] == np.float32(expected)


def test_list_schedule_proposal_follows_the_schedule():
    graph = generate(1, 1, ops=(12, 12), seed=8)[0]
    schedule = features.list_schedule(graph)
    ops = graph.num_ops
    means = beta_means(graph, diagnose.list_schedule_actions(graph))
    affinity, priority = means[:DEVICES * ops].reshape(ops, DEVICES), means[DEVICES * ops:3 * ops]
    np.testing.assert_allclose(affinity[np.arange(ops), schedule.device], 0.9)
    np.testing.assert_allclose(affinity[np.arange(ops), 1 - schedule.device], 0.1)
    order = np.argsort(schedule.start, kind="stable")
    assert (np.diff(priority[order]) <= 0).all() and priority[order[0]] == 0.9


def test_distillation_data_centres_targets_on_each_searchs_best():
    """One example per (seed, graph): the graph, and the actions of the best chromosome of uniform BRKGA with
    the seed ``DISTIL_SEED + 1000 s + g`` (graphs in order, seed-major). By default (the bench's) the
    priorities are respaced by the decoded order, the concentration is 4 and the affinities are uniform; with
    ``anchor`` (the bench's default) they are anchored on the two longest paths, the rest the same."""
    graphs = generate(2, 1, ops=(7, 9), seed=8)
    examples, targets = train.distillation_data(graphs, "runtime", budget=60, seeds=2)
    _, placed = train.distillation_data(graphs, "runtime", budget=60, seeds=2, concentration=30.0, canonical=False,
                                        placement=True)
    _, anchored = train.distillation_data(graphs, "runtime", budget=60, seeds=2, anchor=True)
    assert [g.name for g in examples] == [g.name for g in graphs] * 2
    for k, graph in enumerate(examples):
        seed = train.DISTIL_SEED + 1000 * (k // 2) + k % 2
        best = brkga.optimize(graph, "runtime", 60, seed=seed).best
        np.testing.assert_array_equal(targets[k], features.solution_actions(graph, best, 4.0, canonical=True,
                                                                            placement=False))
        assert targets[k].shape == (graph.num_ops, features.HEADS)
        assert (targets[k][:, :DEVICES] == features.UNIFORM).all()
        np.testing.assert_array_equal(placed[k], features.solution_actions(graph, best, 30.0))
        np.testing.assert_array_equal(anchored[k], features.anchored_actions(graph, targets[k]))
