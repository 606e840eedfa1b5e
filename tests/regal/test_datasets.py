"""The data sets of the paper's size: the committed synthetic splits (sizes, disjoint topologies, the room
for improvement filter) and the real programs' split."""

import numpy as np
import pytest

from algorithms.regal import datasets
from algorithms.regal.perfmodel import OBJECTIVES


@pytest.mark.parametrize("kind", OBJECTIVES)
def test_committed_splits(kind):
    splits = datasets.paper_splits(kind)
    for name, count in datasets.SIZES.items():
        graphs = getattr(splits, name)
        assert len(graphs) == count
        assert all(datasets.PAPER_OPS[0] <= graph.num_ops <= datasets.PAPER_OPS[1] for graph in graphs)
        assert all(np.isfinite(graph.memory_limit) for graph in graphs)
    topologies = [{graph.topology for graph in getattr(splits, name)} for name in datasets.SIZES]
    assert not (topologies[0] & topologies[1] or topologies[0] & topologies[2] or topologies[1] & topologies[2])


def test_the_filter_kept_what_it_keeps():
    """The smallest test graph of each objective passes the filter again (the build is deterministic)."""
    for kind in OBJECTIVES:
        graph = min(datasets.paper_splits(kind).test, key=lambda graph: graph.num_ops)
        number = int(graph.topology.split("-")[-1])
        assert datasets.room_for_improvement(graph, kind, seed=number)


def test_save_and_load_round_trip(tmp_path):
    splits = datasets.paper_splits("runtime")
    small = type(splits)(splits.train[:2], [], splits.test[:1])
    datasets.save(small, tmp_path / "small.npz")
    again = datasets.load(tmp_path / "small.npz")
    for before, after in zip(small.train + small.test, again.train + again.test):
        np.testing.assert_array_equal(before.uses, after.uses)
        np.testing.assert_array_equal(before.runtimes, after.runtimes)
        assert (before.name, before.topology, before.memory_limit) == (after.name, after.topology, after.memory_limit)


def test_real_programs_split():
    names = datasets.real_programs()
    assert len(names) == 34 and set(datasets.REAL_TEST) <= set(names) and len(datasets.REAL_TEST) == 12
