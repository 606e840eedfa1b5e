"""Synthetic graphs: acyclic, the stated distributions, and splits that share no topology."""

import numpy as np
import pytest

from algorithms.mmap.workloads import load_workload
from algorithms.regal import data
from algorithms.regal.__main__ import main as regal_main
from algorithms.regal.workloads import SMALL, from_workload
from algorithms.regal.perfmodel import chromosome_length, evaluate


@pytest.mark.parametrize("model", data.MODELS)
def test_models_make_forward_edges(model):
    rng = np.random.default_rng(0)
    edges = data.topology(model, 30, rng)
    assert edges and all(u < v for u, v in edges)
    assert len(set(edges)) == len(edges)


def test_unknown_model():
    with pytest.raises(ValueError):
        data.topology("lattice", 10, np.random.default_rng(0))


def test_splits_share_no_topology():
    splits = data.splits(train=6, valid=3, test=3, variants=2, seed=1)
    topologies = [{g.topology for g in part} for part in (splits.train, splits.valid, splits.test)]
    assert [len(t) for t in topologies] == [6, 3, 3]
    assert not (topologies[0] & topologies[1] or topologies[0] & topologies[2] or topologies[1] & topologies[2])
    assert len(splits.train) == 12


def test_gaussian_attributes_and_binding_memory_limit():
    graphs = data.generate(12, 1, seed=2)
    runtimes = np.concatenate([g.runtimes for g in graphs])
    assert runtimes.min() >= 1.0 and 8.5 < runtimes.mean() < 11.5 and 2.0 < runtimes.std() < 4.5
    infeasible = []
    for graph in graphs:
        _, peak = evaluate(graph, np.random.default_rng(3).random((64, chromosome_length(graph))))
        infeasible.append((peak > graph.memory_limit).mean())
    assert 0.3 < np.mean(infeasible) < 0.7


def test_mmap_workloads_become_graphs():
    for name in SMALL[:2]:
        workload, graph = load_workload(name), from_workload(name)
        assert graph.num_tensors == workload.num_tensors
        assert graph.sizes.sum() * (1 << 20) == pytest.approx(
            sum({b.tensor_id: b.size for b in workload.buffers}.values()))
        for op, instruction in enumerate(workload.instructions):
            assert set(np.flatnonzero(graph.uses[op])) == set(instruction.operands)
            assert set(np.flatnonzero(graph.producer == op)) == set(instruction.outputs)
        # every op after the instructions is a zero-runtime parameter producing one undefined tensor
        assert (graph.runtimes[workload.num_instructions:] == 0).all()


@pytest.mark.parametrize("ops", [(12, 28), (40, 80)])
def test_graph_sizes_stay_in_the_range(ops):
    graphs = data.generate(9, 1, ops, seed=4)
    sizes = [g.num_ops for g in graphs]
    assert all(ops[0] <= n <= ops[1] for n in sizes)
    assert max(sizes) - min(sizes) >= (ops[1] - ops[0]) // 3  # drawn across the range, not one size
    assert all(g.num_tensors == g.num_ops for g in graphs)  # one output per op


def test_bad_size_range():
    with pytest.raises(ValueError, match="graph sizes"):
        data.generate(2, 1, (30, 20))


def test_larger_test_split_keeps_train_and_valid():
    plain = data.splits(train=4, valid=2, test=2, variants=1, seed=3)
    larger = data.splits(train=4, valid=2, test=2, variants=1, seed=3, test_ops=(60, 70))
    assert [g.name for g in larger.train] == [g.name for g in plain.train]
    assert [g.name for g in larger.valid] == [g.name for g in plain.valid]
    assert all(60 <= g.num_ops <= 70 for g in larger.test) and len(larger.test) == 2
    seen = {g.topology for g in plain.train + plain.valid + plain.test}
    assert not seen & {g.topology for g in larger.test}


def test_more_training_graphs_keep_valid_and_test():
    """``more_train``: separately drawn training topologies (of their own size range) appended to train;
    valid and test are the same graphs as without them, and no topology is shared."""
    plain = data.splits(train=4, valid=2, test=2, variants=2, seed=3, test_ops=(30, 34))
    more = data.splits(train=4, valid=2, test=2, variants=2, seed=3, test_ops=(30, 34), more_train=3,
                       more_train_ops=(40, 44))
    assert [g.name for g in more.train[:8]] == [g.name for g in plain.train] and len(more.train) == 8 + 6
    assert [g.name for g in more.valid] == [g.name for g in plain.valid]
    assert [g.name for g in more.test] == [g.name for g in plain.test]
    assert all(40 <= g.num_ops <= 44 for g in more.train[8:])
    added = {g.topology for g in more.train[8:]}
    assert len(added) == 3 and not added & {g.topology for g in plain.train + plain.valid + plain.test}


def test_more_validation_graphs_keep_train_and_test():
    """``more_valid``: separately drawn validation topologies appended to valid; train and test are the same
    graphs as without them, and no topology is shared."""
    plain = data.splits(train=4, valid=2, test=2, variants=2, seed=3, more_train=1)
    more = data.splits(train=4, valid=2, test=2, variants=2, seed=3, more_train=1, more_valid=3)
    assert [g.name for g in more.train] == [g.name for g in plain.train]
    assert [g.name for g in more.test] == [g.name for g in plain.test]
    assert [g.name for g in more.valid[:4]] == [g.name for g in plain.valid] and len(more.valid) == 4 + 6
    assert all(12 <= g.num_ops <= 28 for g in more.valid[4:])
    added = {g.topology for g in more.valid[4:]}
    assert len(added) == 3 and not added & {g.topology for g in plain.train + plain.valid + plain.test}


def test_a_fresh_test_split_replaces_test_and_keeps_train_and_valid():
    """``fresh_test``: the test split is N separately drawn topologies (of ``test_ops`` ops when given);
    train and valid are the same graphs as without it, and no topology is shared."""
    plain = data.splits(train=4, valid=2, test=2, variants=2, seed=3, more_valid=1)
    fresh = data.splits(train=4, valid=2, test=2, variants=2, seed=3, more_valid=1, fresh_test=3)
    larger = data.splits(train=4, valid=2, test=2, variants=2, seed=3, fresh_test=2, test_ops=(30, 32))
    assert [g.name for g in fresh.train] == [g.name for g in plain.train]
    assert [g.name for g in fresh.valid] == [g.name for g in plain.valid]
    assert len(fresh.test) == 6 and all(12 <= g.num_ops <= 28 for g in fresh.test)
    assert len(larger.test) == 4 and all(30 <= g.num_ops <= 32 for g in larger.test)
    added = {g.topology for g in fresh.test}
    assert len(added) == 3 and not added & {g.topology for g in plain.train + plain.valid + plain.test}


@pytest.mark.parametrize("flag", ["--ops", "--test-ops", "--more-train-ops"])
def test_bench_rejects_a_bad_size_range(flag, capsys):
    with pytest.raises(SystemExit):
        regal_main(["bench", flag, "30", "20"])
    assert f"{flag} 30 20: need 2 <= LO <= HI" in capsys.readouterr().err


def test_split_options_compose_each_touching_only_its_split():
    """The options draw their parts separately, so all of them together give each split exactly what the
    option for that split gives alone, and the options that leave a split alone keep it as drawn without
    any (the splits every earlier measurement used stay the same graphs)."""
    def names(**options):
        drawn = data.splits(train=3, valid=2, test=2, variants=2, seed=5, **options)
        return [[g.name for g in part] + [float(g.runtimes.sum()) for g in part]
                for part in (drawn.train, drawn.valid, drawn.test)]

    plain = names()
    alone = {"train": names(more_train=2, more_train_ops=(8, 10)), "valid": names(more_valid=2),
             "test_ops": names(test_ops=(30, 34)), "fresh": names(fresh_test=2, test_ops=(30, 34))}
    assert alone["train"][1:] == plain[1:] and alone["valid"][::2] == plain[::2]
    assert alone["test_ops"][:2] == plain[:2] and alone["fresh"][:2] == plain[:2]
    assert alone["fresh"][2] != alone["test_ops"][2]
    assert names(more_train=2, more_train_ops=(8, 10), more_valid=2, test_ops=(30, 34)) == \
        [alone["train"][0], alone["valid"][1], alone["test_ops"][2]]
    assert names(more_train=2, more_train_ops=(8, 10), more_valid=2, test_ops=(30, 34), fresh_test=2) == \
        [alone["train"][0], alone["valid"][1], alone["fresh"][2]]
