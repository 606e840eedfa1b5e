"""The REGAL networks written as RTs against the same equations in NumPy, and the action encoding."""

import dataclasses

import numpy as np
import pytest

import timerl as trl
from algorithms.regal import brkga, features, train
from algorithms.regal.data import generate
from algorithms.regal.graph import CompGraph, from_edges
from algorithms.regal.perfmodel import DEVICES, chromosome_length, evaluate
from algorithms.regal.policy import GraphInputs, Layout, Sizes, baseline, init_weights, policy_logits


def numpy_gnn(w, net, data, rounds):
    """The GNN's equations, one edge at a time over each graph's edge list."""
    def affine(name, v, bias=True):
        y = v @ w[f"{net}.{name}.w"]
        return y + w[f"{net}.{name}.b"] if bias else y

    def mlp(first, second, v):
        return affine(second, np.tanh(affine(first, v)))

    h, edge = mlp("node_in", "node_out", data.nodes), mlp("edge_in", "edge_out", data.edges)
    for _ in range(rounds):
        fwd = np.zeros_like(h)
        rev = np.zeros_like(h)
        for b in range(h.shape[0]):
            for k in np.flatnonzero(data.edge_mask[b]):
                u, v = data.source[b, k], data.target[b, k]
                forward = np.tanh(affine("fwd_node", h[b, u], False) + affine("fwd_edge", edge[b, k]))
                reverse = np.tanh(affine("rev_node", h[b, v], False) + affine("rev_edge", edge[b, k]))
                fwd[b, v] += affine("fwd_out", forward)
                rev[b, u] += affine("rev_out", reverse)
        h = h + mlp("update_in", "update_out", np.concatenate([h, fwd, rev], axis=-1))
    return h, mlp


def multigraph():
    """Ops with several outputs, read by the same op twice (parallel edges u -> v)."""
    uses = np.zeros((5, 7), bool)
    for v, k in ((1, 0), (2, 0), (2, 5), (3, 1), (3, 6), (4, 2), (4, 3), (4, 1)):
        uses[v, k] = True
    return CompGraph(np.array([1.0, 2.0, 1.5, 3.0, 1.0]), np.arange(1.0, 8.0), np.array([0, 1, 2, 3, 4, 0, 1]),
                     uses, name="multigraph", memory_limit=20.0)


@pytest.fixture(scope="module")
def setting():
    graphs = generate(3, 1, ops=(5, 8), seed=4) + [multigraph()]
    data = features.batch(graphs, 8)
    sizes = Sizes(hidden=8, edge_hidden=4, rounds=2)
    weights = init_weights(sizes, seed=3, head_scale=1.0)  # not the near-zero init, so the comparison has signal
    return graphs, data, sizes, weights


def test_networks_match_numpy(setting):
    graphs, data, sizes, weights = setting
    layout = Layout.of(weights)
    got = {}
    ctx = trl.Context("i")
    with ctx:
        flat = trl.tensor(layout.pack(weights))
        graph = GraphInputs(*(trl.tensor(getattr(data, field.name)) for field in dataclasses.fields(GraphInputs)))
        keep = lambda name: lambda point, value: got.__setitem__(name, np.asarray(value).copy())  # noqa: E731
        policy_logits(flat, layout, graph, sizes).sink(keep("logits"))
        baseline(flat, layout, graph, sizes).sink(keep("value"))
    ctx.compile(bounds={ctx.bounds[0]: 1}, backend="torch").execute()

    w = {k: v.astype(np.float64) for k, v in weights.items()}
    h, mlp = numpy_gnn(w, "policy", data, sizes.rounds)
    logits = mlp("head_hidden", "head_out", h).reshape(len(graphs), 8, features.HEADS, features.CHOICES)
    np.testing.assert_allclose(got["logits"], logits, rtol=1e-4, atol=1e-5)
    h, mlp = numpy_gnn(w, "baseline", data, sizes.rounds)
    pooled = (h * data.mask[..., None]).sum(1) / data.mask.sum(1, keepdims=True)
    np.testing.assert_allclose(got["value"], mlp("head_hidden", "head_out", pooled)[:, 0], rtol=1e-4, atol=1e-5)


def test_padding_and_features(setting):
    graphs, data, _, _ = setting
    for b, graph in enumerate(graphs):
        assert data.mask[b].sum() == graph.num_ops and not data.nodes[b, graph.num_ops:].any()
        edges = graph.edges()
        assert data.edge_mask[b].sum() == len(edges) == graph.uses.sum()
        np.testing.assert_array_equal(np.stack([data.source[b], data.target[b]], 1)[:len(edges)], edges[:, :2])
        assert not data.edges[b, len(edges):].any()
        depth, height = features.path_lengths(graph)
        assert depth.max() == height.max()  # both are the longest path's op count


def test_actions_are_quantized_betas():
    actions = np.arange(features.CHOICES)
    alpha, beta = features.beta_parameters(actions)
    means, concentration = alpha / (alpha + beta), alpha + beta
    assert len({(round(m, 6), round(c, 6)) for m, c in zip(means, concentration)}) == 16
    grid = slice(0, features.UNIFORM)
    assert set(np.round(means[grid], 6)) == set(features.MEANS)
    assert set(concentration[grid]) == set(features.CONCENTRATIONS)
    assert alpha[features.UNIFORM] == beta[features.UNIFORM] == 1.0


def test_proposal_layout():
    graph = generate(1, 1, ops=(6, 6), seed=0)[0]
    actions = np.zeros((6, 4), np.int64)
    actions[:, 0] = 14  # mean 0.9, concentration 30 for device 0's affinity
    actions[:, 1] = 2  # mean 0.1, concentration 30 for device 1's
    actions[:, 2] = 1  # mean 0.1, concentration 10 for the priority
    actions[:, 3] = features.UNIFORM  # transfers uniform
    proposal = features.proposal(graph, actions)
    assert proposal.alpha.size == chromosome_length(graph)
    affinity = (proposal.alpha / (proposal.alpha + proposal.beta))[:12].reshape(6, 2)
    np.testing.assert_allclose(affinity[:, 0], 0.9)
    np.testing.assert_allclose(affinity[:, 1], 0.1)
    np.testing.assert_allclose(proposal.alpha[12:18] + proposal.beta[12:18], 10.0)
    assert (proposal.alpha[18:] == 1).all() and (proposal.beta[18:] == 1).all()  # transfers stay uniform


def test_transfer_head_sets_every_transfer_key_of_the_ops_outputs_by_hand():
    """Ops a, b, c; a makes tensors 0 and 2, b makes tensor 1, c makes none; b reads 0, c reads 1 and 2.
    The chromosome is 3 x 2 affinities, 3 op priorities, then 3 tensors x 2 devices of transfer keys
    (tensor-major): a's transfer action (mean 0.7, concentration 10: Beta(7, 3)) lands on keys 9, 10
    (tensor 0) and 13, 14 (tensor 2), b's (mean 0.3, concentration 4: Beta(1.2, 2.8)) on 11, 12; c's
    action decodes nowhere. Affinities and priorities uniform here."""
    graph = CompGraph(np.ones(3), np.ones(3), np.array([0, 1, 0]),
                      np.array([[0, 0, 0], [1, 0, 0], [0, 1, 1]], bool))
    actions = np.full((3, features.HEADS), features.UNIFORM)
    actions[:, features.TRANSFER] = [3 * 3 + 1, 1 * 3 + 0, 4 * 3 + 2]
    proposal = features.proposal(graph, actions)
    assert proposal.alpha.size == chromosome_length(graph) == 15
    np.testing.assert_allclose(proposal.alpha, [1] * 9 + [7, 7, 1.2, 1.2, 7, 7])
    np.testing.assert_allclose(proposal.beta, [1] * 9 + [3, 3, 2.8, 2.8, 3, 3])


def test_solution_actions_by_hand():
    """A chain a -> b (runtimes 2, 1) and c alone (1): the list schedule puts a, b on device 0 and c on 1.
    A solution with affinities (0.2, 0.8), (0.4, 0.55), (0.7, 0.1) places a, b on 1 and c on 0: none agrees
    with the list schedule, so the devices are renamed (a, b on 0, c on 1: affinity means 0.9 / 0.1). Op
    priorities 0.05, 0.45, 0.62 round to 0.1, 0.5, 0.7. Transfer keys (tensor, device) (0.33, 0.81),
    (0.15, 0.95), (0.52, 0.28): the solution copies a's and b's outputs to device 0 and c's to device 1, so
    it reads 0.33, 0.15, 0.28, which round to 0.3, 0.1, 0.3 (indices 1, 0, 1). Concentration 10 is column
    1 of the grid: action = 3 * mean index + 1."""
    graph = from_edges([2.0, 1.0, 1.0], [(0, 1)], [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(features.list_schedule(graph).device, [0, 0, 1])
    keys = np.array([0.2, 0.8, 0.4, 0.55, 0.7, 0.1, 0.05, 0.45, 0.62, 0.33, 0.81, 0.15, 0.95, 0.52, 0.28])
    expected = [[13, 1, 1, 4], [13, 1, 7, 1], [1, 13, 10, 4]]
    np.testing.assert_array_equal(features.solution_actions(graph, keys, concentration=10.0), expected)
    # the mirror image (devices swapped, each transfer key moved with its device) is the same target
    swap = [keys[:6].reshape(3, 2)[:, ::-1].ravel(), keys[6:9], keys[9:].reshape(3, 2)[:, ::-1].ravel()]
    mirror = np.concatenate(swap)
    np.testing.assert_array_equal(features.solution_actions(graph, mirror, concentration=10.0), expected)
    # concentration 30 (column 2), affinity means 0.7 / 0.3 (indices 3 / 1)
    np.testing.assert_array_equal(features.solution_actions(graph, keys, concentration=30.0, affinity=0.7)[0],
                                  [3 * 3 + 2, 1 * 3 + 2, 0 * 3 + 2, 1 * 3 + 2])


def test_canonical_keys_by_hand():
    """a -> b, a on device 0, b on device 1: decoded order a, the copy X(a's output, device 1), b; three
    nodes scheduled, so their priorities become 1 - 0.5 / 3, 1 - 1.5 / 3, 1 - 2.5 / 3. Affinities and the
    unused transfer keys stay; the decoded schedule (and so the cost) is the same."""
    graph = from_edges([1.0, 1.0], [(0, 1)], [1.0, 1.0])
    keys = np.array([0.9, 0.1, 0.2, 0.8, 0.3, 0.6, 0.11, 0.44, 0.77, 0.99])
    canonical = features.canonical_keys(graph, keys)
    np.testing.assert_allclose(canonical, [0.9, 0.1, 0.2, 0.8, 5 / 6, 1 / 6, 0.11, 0.5, 0.77, 0.99])
    np.testing.assert_array_equal(evaluate(graph, canonical), evaluate(graph, keys))
    # as a target: a's transfer head reads 0.5 (mean index 2), b's its unused key 0.77 (index 3)
    np.testing.assert_array_equal(features.solution_actions(graph, keys, 4.0, canonical=True)[:, features.TRANSFER],
                                  [2 * 3, 3 * 3])


def test_list_schedule_by_hand():
    """Ops a..e with runtimes 1, 3, 2, 1, 4.5; a -> b, a -> c, b -> d, c -> d; e alone. Upward ranks 5, 4, 3,
    1, 4.5, so the order is a, e, b, c, d; each op goes where it starts first (ties: device 0): a on 0 at 0,
    e on 1 at 0, b on 0 at 1 (after a), c on 0 at 4 (device 1 is busy until 4.5), d on 0 at max(4, 6)."""
    graph = from_edges([1.0, 3.0, 2.0, 1.0, 4.5], [(0, 1), (0, 2), (1, 3), (2, 3)], [1.0] * 5)
    schedule = features.list_schedule(graph)
    np.testing.assert_array_equal(schedule.device, [0, 0, 0, 0, 1])
    np.testing.assert_allclose(schedule.start, [0.0, 1.0, 4.0, 6.0, 0.0])
    np.testing.assert_allclose(schedule.upward_rank, [5.0, 4.0, 3.0, 1.0, 4.5])
    assert schedule.makespan == 7.0
    x = features.node_features(graph)
    np.testing.assert_allclose(x[:, 7:11], np.stack([[0, 0, 0, 0, 1], np.array([0, 1, 4, 6, 0]) / 7.0,
                                                   np.array([5, 4, 3, 1, 4.5]) / 5.0, [1] * 5], axis=1))


def test_the_two_longest_paths_and_their_anchored_affinities_by_hand():
    """The list schedule's graph: a -> b, a -> c, b -> d, c -> d, and e alone, runtimes 1, 3, 2, 1, 4.5. The
    longest path by runtime is a, b, d (5; a, c, d takes 4, e 4.5), the 14th node feature; of the other ops
    (c, 2, and e, 4.5) the longest path is e alone, the 15th. Anchored, a, b, d get affinity mean 0.9 for
    device 0 and 0.1 for device 1 (concentration 4: actions 12 and 0), e the other way round, c uniform, the
    other heads untouched. With c's runtime 3 both paths through a take 5: a, b, c, d."""
    graph = from_edges([1.0, 3.0, 2.0, 1.0, 4.5], [(0, 1), (0, 2), (1, 3), (2, 3)], [1.0] * 5)
    np.testing.assert_array_equal(features.critical_path(graph), [True, True, False, True, False])
    np.testing.assert_array_equal(features.second_path(graph), [False, False, False, False, True])
    np.testing.assert_array_equal(features.node_features(graph)[:, 13:], [[1, 0], [1, 0], [0, 0], [1, 0], [0, 1]])
    given = np.arange(5 * features.HEADS).reshape(5, features.HEADS) % features.CHOICES
    anchored = features.anchored_actions(graph, given)
    np.testing.assert_array_equal(anchored[:, 0], [12, 12, features.UNIFORM, 12, 0])
    np.testing.assert_array_equal(anchored[:, 1], [0, 0, features.UNIFORM, 0, 12])
    np.testing.assert_array_equal(anchored[:, DEVICES:], given[:, DEVICES:])
    alpha, beta = features.beta_parameters(np.array([12, 0, 9, 3]))
    np.testing.assert_allclose(alpha / (alpha + beta), [0.9, 0.1, 0.7, 0.3])
    np.testing.assert_allclose(alpha + beta, 4.0)
    np.testing.assert_array_equal(features.anchored_actions(graph, given, affinity=0.7)[:, 0],
                                  [9, 9, features.UNIFORM, 9, 3])
    tie = from_edges([1.0, 3.0, 3.0, 1.0, 4.5], [(0, 1), (0, 2), (1, 3), (2, 3)], [1.0] * 5)
    np.testing.assert_array_equal(features.critical_path(tie), [True, True, True, True, False])
    np.testing.assert_array_equal(features.second_path(tie), [False, False, False, False, True])


def test_the_second_path_follows_the_longest_chain_off_the_critical_one():
    """Ops 0 -> 1 -> 2 (runtime 5 each) are the critical path (15). Off it: 3 -> 4 -> 6 (2 + 2 + 1 = 5), 3 -> 5
    (2 + 2.5 = 4.5) and 7 alone (4), with 1 -> 4 an edge into the second path from the critical one (not a
    path through off ops). The second path is 3, 4, 6. Two equal ops alone tie: the first in order wins;
    a graph that is all one path has no second."""
    edges = [(0, 1), (1, 2), (3, 4), (4, 6), (3, 5), (1, 4)]
    graph = from_edges([5.0, 5.0, 5.0, 2.0, 2.0, 2.5, 1.0, 4.0], edges, [1.0] * 8)
    np.testing.assert_array_equal(features.critical_path(graph), [True] * 3 + [False] * 5)
    np.testing.assert_array_equal(features.second_path(graph), [False] * 3 + [True, True, False, True, False])
    pair = from_edges([5.0, 3.0, 3.0], [], [1.0] * 3)
    np.testing.assert_array_equal(features.second_path(pair), [False, True, False])
    chain = from_edges([1.0, 2.0], [(0, 1)], [1.0] * 2)
    assert not features.second_path(chain).any()


def test_the_path_anchor_lets_brkga_find_an_unsplit_chain():
    """A chain of 10 ops of runtime 10 (the critical path, 100) beside 5 independent pairs of ops of runtime
    9 (90 in all), no memory limit: the optimum keeps the chain on one device (makespan 100), and a chain
    split over the two devices waits on the side ops there (transfers stall both devices). With the chain
    anchored (one side pair, the second path, anchored to the other device; the other side ops and heads
    uniform) BRKGA-400 reaches 100 on most of 8 seeds; uniform BRKGA with the same seeds never does
    (measured: 100.0 on all 8 at mean 0.9, 101.375 at mean 0.7, against 121.75)."""
    edges = [(k, k + 1) for k in range(9)] + [(j, j + 1) for j in range(10, 20, 2)]
    graph = from_edges([10.0] * 10 + [9.0] * 10, edges, [1.0] * 20)
    np.testing.assert_array_equal(features.critical_path(graph), [True] * 10 + [False] * 10)
    plain = np.full((20, features.HEADS), features.UNIFORM)
    anchored = features.proposal(graph, features.anchored_actions(graph, plain))
    uniform = np.array([brkga.optimize(graph, "runtime", 400, None, seed).best_cost for seed in range(8)])
    chained = np.array([brkga.optimize(graph, "runtime", 400, anchored, seed).best_cost for seed in range(8)])
    assert uniform.min() > 100.0 and (chained == 100.0).sum() >= 5
    assert chained.mean() < uniform.mean() - 10.0


def test_list_schedule_fits_the_memory_limit_by_hand():
    """A chain a -> b -> c of sizes 2, 3, 4 (runtimes 1): the list schedule runs it on device 0, where b
    needs a and b live (5) and c needs b and c (7), so its peak is 7. It fits a limit of 7, not one of 6.5;
    no memory limit (runtime without one) always fits. The imitation target follows: the list schedule's
    proposal where it fits, uniform Beta(1, 1) where not; for peak memory a chain is not wide, so uniform."""
    chain = from_edges([1.0, 1.0, 1.0], [(0, 1), (1, 2)], [2.0, 3.0, 4.0])
    np.testing.assert_array_equal(features.list_schedule(chain).device, [0, 0, 0])
    assert features.list_schedule_fits(chain)
    assert features.list_schedule_fits(dataclasses.replace(chain, memory_limit=7.0))
    tight = dataclasses.replace(chain, memory_limit=6.5)
    assert not features.list_schedule_fits(tight)
    assert features.node_features(tight)[:, 10].tolist() == [0.0] * 3
    np.testing.assert_array_equal(features.imitation_target(chain, "runtime"), features.list_schedule_actions(chain))
    assert (features.imitation_target(tight, "runtime") == features.UNIFORM).all()
    assert (features.imitation_target(chain, "peak_memory") == features.UNIFORM).all()


def test_depth_first_target_on_wide_graphs_by_hand():
    """a -> b, c, d, e (a fan-out of four at depth 2), b -> f: depths 1, 2, 2, 2, 2, 3, so the graph is wide
    (a level of 4 ops) and the peak-memory target gives uniform affinities and op priorities rising with
    depth: mean 0.1 for a (rank 0 of 2), 0.5 for b..e (rank 1 of 2: bin 2 of 5), 0.9 for f, concentration
    10. Without e the widest level holds 3: not wide, so the target is uniform Beta(1, 1) everywhere. The
    12th node feature says which; the 13th is the bin of the depth rank over 4: 0, 2/4 (x4), 4/4."""
    wide = from_edges([1.0] * 6, [(0, 1), (0, 2), (0, 3), (0, 4), (1, 5)], [1.0] * 6)
    narrow = from_edges([1.0] * 5, [(0, 1), (0, 2), (0, 3), (1, 4)], [1.0] * 5)
    assert features.is_wide(wide) and not features.is_wide(narrow)
    np.testing.assert_array_equal(features.node_features(wide)[:, 11], [1.0] * 6)
    np.testing.assert_array_equal(features.node_features(narrow)[:, 11], [0.0] * 5)
    np.testing.assert_allclose(features.node_features(wide)[:, 12], [0.0, 0.5, 0.5, 0.5, 0.5, 1.0])
    target = features.imitation_target(wide, "peak_memory")
    assert (target[:, :DEVICES] == features.UNIFORM).all()
    proposal = features.proposal(wide, target)
    priority = slice(DEVICES * 6, 3 * 6)
    np.testing.assert_allclose(proposal.alpha[priority] + proposal.beta[priority], 10.0)
    np.testing.assert_allclose(proposal.alpha[priority] / 10.0, [0.1, 0.5, 0.5, 0.5, 0.5, 0.9])
    assert (features.imitation_target(narrow, "peak_memory") == features.UNIFORM).all()


def test_head_scale_scales_only_the_last_policy_weight_matrix():
    small, full = init_weights(Sizes(), seed=5), init_weights(Sizes(), seed=5, head_scale=1.0)
    assert set(small) == set(full)
    for name in small:
        factor = 100.0 if name == "policy.head_out.w" else 1.0
        np.testing.assert_allclose(small[name] * factor, full[name], rtol=1e-5, err_msg=name)


def test_saved_weights_load_and_another_layout_is_a_clear_error(tmp_path):
    sizes = Sizes(hidden=8, edge_hidden=4, rounds=1)
    packed = Layout.of(init_weights(sizes, seed=2)).pack(init_weights(sizes, seed=2))
    np.save(tmp_path / "runtime.npy", packed)
    loaded = train.load(tmp_path / "runtime.npy", sizes, nodes=9)
    np.testing.assert_array_equal(loaded.weights, packed)
    assert loaded.layout.size == packed.size and loaded.nodes == 9
    np.save(tmp_path / "old.npy", packed[:-40])  # as weights saved with fewer node features
    with pytest.raises(train.WeightsError, match=r"old\.npy: .*saved by another version"):
        train.load(tmp_path / "old.npy", sizes, nodes=9)
    three_heads = packed.size - (sizes.hidden + 1) * features.CHOICES  # the layout of d + 1 heads (until pass 8)
    np.save(tmp_path / "three_heads.npy", packed[:three_heads])
    with pytest.raises(train.WeightsError, match=r"three_heads\.npy: .* 4 Beta heads per op .*saved by another"):
        train.load(tmp_path / "three_heads.npy", sizes, nodes=9)
    with pytest.raises(train.WeightsError, match=r"missing\.npy: cannot read"):
        train.load(tmp_path / "missing.npy", sizes, nodes=9)
