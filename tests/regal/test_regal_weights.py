"""The weights shipped in algorithms/regal/weights (the bench's defaults, training seed 4 for runtime and 0 for
peak memory, `__main__.TRAIN_SEED`; what the README's tables evaluate with ``bench --reuse --weights
algorithms/regal/weights``): they load with the current layout and propose what they were trained to,
checked against the targets computed here."""

from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

import algorithms.regal
from algorithms.regal import data, features, train
from algorithms.regal.policy import Sizes

WEIGHTS = Path(algorithms.regal.__file__).parent / "weights"
SIZES = Sizes(rounds=2, uniform_logit=2.0)  # the bench's defaults


def _policy(kind: str, splits: data.Splits) -> train.Trained:
    return train.load(WEIGHTS / f"{kind}.npy", SIZES, max(graph.num_ops for graph in splits.train))


def test_shipped_policies_propose_what_they_learned():
    """Validation graphs (never trained on). Peak memory: the heuristic's actions exactly (a depth-first
    order on wide graphs, uniform elsewhere). Runtime (distilled from BRKGA-50K's solutions, the affinities
    anchored on the two longest paths): the critical path's ops on device 0 and the second path's on device 1
    (mean 0.9), every other op's affinity uniform (241 of the 388 ops of the validation graphs anchored),
    concentration 4 on the priority and transfer heads, and op priorities that fall with depth (measured for
    training seed 4 on every validation graph: Spearman 0.90 on average against shallow-first, 0.77 at least;
    a level order; training seed 0: 0.95 and 0.90)."""
    splits = data.splits(48, 10, 10, variants=2, seed=0)
    graphs = splits.valid[::4]
    memory = train.propose(_policy("peak_memory", splits), graphs)
    for graph, actions in zip(graphs, memory):
        np.testing.assert_array_equal(actions, features.imitation_target(graph, "peak_memory"))
    runtime = train.propose(_policy("runtime", splits), graphs)
    for graph, actions in zip(graphs, runtime):
        np.testing.assert_array_equal(actions, features.anchored_actions(graph, actions))
        assert (actions[:, features.PRIORITY:] % features.CONCENTRATIONS.size == 0).all()  # concentration 4
        mean = actions[:, features.PRIORITY] // features.CONCENTRATIONS.size
        assert spearmanr(mean, -features.path_lengths(graph)[0]).correlation > 0.7
