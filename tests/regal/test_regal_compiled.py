"""The compiled decoder against the NumPy decoder (the oracle): makespans equal bit for bit, peaks to the
last bits, on random graphs (several outputs per op, several readers per tensor), synthetic graphs of the
paper's size, a real XLA program, and chromosomes with tied keys; and whole BRKGA runs alike."""

import numpy as np
import pytest

from algorithms.regal import brkga, data
from algorithms.regal.graph import CompGraph, from_edges
from algorithms.regal.perfmodel import chromosome_length, evaluate, objective
from algorithms.regal.workloads import from_workload

PEAK_RTOL = 1e-14  # a few units in the last place: the oracle sums an op's freed tensors in BLAS's order


def random_graph(rng: np.random.Generator, ops: int, extra_tensors: int) -> CompGraph:
    tensors = ops + extra_tensors
    producer = np.concatenate([np.arange(ops), rng.integers(0, ops, extra_tensors)])
    uses = np.zeros((ops, tensors), bool)
    for k in range(tensors):
        later = np.arange(producer[k] + 1, ops)
        if later.size:
            uses[rng.choice(later, size=min(later.size, int(rng.integers(0, 4))), replace=False), k] = True
    return CompGraph(rng.uniform(1, 3, ops).round(1), rng.uniform(1, 5, tensors), producer, uses,
                     memory_limit=3.0 * ops)


def chromosomes(rng: np.random.Generator, graph: CompGraph, count: int = 64) -> np.ndarray:
    genes = rng.random((count, chromosome_length(graph)))
    genes[count // 4:count // 2] = np.round(genes[count // 4:count // 2] * 3) / 3  # tied keys everywhere
    genes[count // 2:3 * count // 4] = np.where(genes[count // 2:3 * count // 4] < 0.5, 0.0, 1.0)
    return genes


def assert_same(graph: CompGraph, genes: np.ndarray) -> None:
    runtime, peak = evaluate(graph, genes)
    oracle_runtime, oracle_peak = evaluate(graph, genes, engine="numpy")
    np.testing.assert_array_equal(runtime, oracle_runtime)
    np.testing.assert_allclose(peak, oracle_peak, rtol=PEAK_RTOL, atol=0)


@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_with_several_outputs_per_op(seed):
    rng = np.random.default_rng(seed)
    graph = random_graph(rng, int(rng.integers(2, 60)), int(rng.integers(0, 30)))
    assert_same(graph, chromosomes(rng, graph))


def test_graphs_of_the_papers_size_and_a_real_program():
    rng = np.random.default_rng(7)
    for graph in data.generate(3, 1, (100, 300), seed=11) + [from_workload("cnn_sgd")]:
        assert_same(graph, chromosomes(rng, graph, 32))


def test_single_op_and_isolated_ops():
    graph = from_edges([2.0, 3.0, 1.0], [], [1.0, 2.0, 4.0])
    genes = chromosomes(np.random.default_rng(0), graph, 16)
    assert_same(graph, genes)
    assert_same(from_edges([1.5], [], [2.0]), np.random.default_rng(1).random((4, 5)))


def test_objective_and_whole_brkga_runs_match():
    graph = data.generate(1, 1, (60, 60), seed=3)[0]
    genes = chromosomes(np.random.default_rng(2), graph)
    np.testing.assert_array_equal(objective(graph, genes, "runtime"),
                                  objective(graph, genes, "runtime", engine="numpy"))
    for kind in ("runtime", "peak_memory"):
        def oracle(population, kind=kind):
            return objective(graph, population, kind, engine="numpy")
        fast = brkga.optimize(graph, kind, budget=600, seed=5)
        slow = brkga.run(oracle, chromosome_length(graph), budget=600, seed=5)
        np.testing.assert_array_equal(fast.best, slow.best)
        np.testing.assert_allclose(fast.curve, slow.curve, rtol=PEAK_RTOL, atol=0)


def test_unknown_engine_is_refused():
    graph = from_edges([1.0, 1.0], [(0, 1)], [1.0, 1.0])
    with pytest.raises(ValueError, match="decoder"):
        evaluate(graph, np.zeros((1, chromosome_length(graph))), engine="fortran")
