"""The bench's statistics against hand-computed values, and REGAL with all-uniform actions equal to BRKGA."""

import numpy as np
import pytest

from algorithms.regal import bench, features
from algorithms.regal.__main__ import TRAIN_SEED, main as regal_main
from algorithms.regal.data import generate


def test_summary_by_hand():
    outcome = bench.Outcome("runtime", ["a", "b", "c", "d"], brkga=np.array([100.0, 100.0, 50.0, 10.0]),
                            regal=np.array([90.0, 100.0, 55.0, 10.0]), brkga_big=np.array([95.0, 99.0, 50.0, 9.0]),
                            budget=500, big_budget=5000)
    summary = outcome.summary()
    assert summary["match_or_beat"] == 75.0
    assert summary["mean_improvement"] == pytest.approx((10.0 + 0.0 - 10.0 + 0.0) / 4)
    assert summary["best"] == pytest.approx(10.0) and summary["worst"] == pytest.approx(-10.0)
    assert summary["brkga_big_improvement"] == pytest.approx((5.0 + 1.0 + 0.0 + 10.0) / 4)
    assert summary["regal_vs_big"] == 25.0  # only graph a: 90 <= 95
    table = bench.markdown([outcome])
    assert "REGAL-500 matches or beats BRKGA-500" in table and "| runtime | 4 | 75.0% |" in table


def test_uniform_actions_reproduce_brkga_and_plot(tmp_path):
    graphs = generate(2, 1, ops=(8, 10), seed=6)
    actions = [np.full((g.num_ops, features.HEADS), features.UNIFORM) for g in graphs]
    outcome = bench.evaluate(graphs, actions, "peak_memory", budget=120, big_budget=240)
    np.testing.assert_array_equal(outcome.regal, outcome.brkga)
    assert (outcome.brkga_big <= outcome.brkga).all()  # a longer run of the same seed extends the shorter one
    bench.plot([outcome], str(tmp_path / "fig2.png"))
    assert (tmp_path / "fig2.png").stat().st_size > 1000


def test_bench_distils_search_without_reinforce(tmp_path, capsys):
    """``bench --distil B``: the runtime policy imitates BRKGA-B's solutions of the training graphs and is
    evaluated as it is (no REINFORCE fine-tune unless --fine-tune asks), its weights saved for --reuse."""
    regal_main(["bench", "--objectives", "runtime", "--distil", "200", "--train-topologies", "3", "--valid-topologies",
          "1", "--test-topologies", "1", "--variants", "1", "--imitate", "3", "--budget", "40", "--big-budget", "80",
          "--eval-seeds", "1", "--weights", str(tmp_path), "--out", str(tmp_path / "fig2.png")])
    printed = capsys.readouterr().out
    assert "imitated BRKGA-200's solutions (1 per graph)" in printed and "trained in" not in printed
    assert (tmp_path / "runtime.npy").exists() and (tmp_path / "fig2.png").exists()


def test_bench_anchors_distilled_affinities_on_the_longest_paths(tmp_path, monkeypatch):
    """The bench's distilled runtime targets have their affinities anchored on the two longest paths
    (`features.anchored_actions`); ``--no-distil-anchor`` leaves them uniform, and so does the eleventh
    pass's name for it, ``--no-distil-critical-path``."""
    from algorithms.regal import train

    seen = []
    imitate = train.imitate

    def spy(graphs, targets, config, *args, **kwargs):
        seen.append((graphs, targets))
        return imitate(graphs, targets, config, *args, **kwargs)

    monkeypatch.setattr(train, "imitate", spy)
    common = ["bench", "--objectives", "runtime", "--distil", "100", "--train-topologies", "3", "--valid-topologies",
              "1", "--test-topologies", "1", "--variants", "1", "--imitate", "2", "--budget", "20", "--big-budget",
              "40", "--eval-seeds", "1", "--out", str(tmp_path / "fig2.png")]
    regal_main(common)
    regal_main(common + ["--no-distil-anchor"])
    regal_main(common + ["--no-distil-critical-path"])
    (graphs, anchored), (_, uniform), (_, alias) = seen
    assert all(np.array_equal(a, b) for a, b in zip(uniform, alias))
    assert any((target[:, :features.DEVICES] != features.UNIFORM).any() for target in anchored)
    for graph, target, plain in zip(graphs, anchored, uniform):
        np.testing.assert_array_equal(target, features.anchored_actions(graph, plain))
        assert (plain[:, :features.DEVICES] == features.UNIFORM).all()


def test_distil_objectives_choose_which_policies_learn_from_search(tmp_path, capsys):
    """``--distil-objectives``: only the objectives named distil BRKGA's solutions; by default peak memory
    imitates its heuristic even with ``--distil`` set (the default, 50000: not run here)."""
    common = ["bench", "--objectives", "peak_memory", "--train-topologies", "3", "--valid-topologies", "1",
              "--test-topologies", "1", "--variants", "1", "--imitate", "3", "--budget", "40", "--big-budget", "80",
              "--eval-seeds", "1", "--out", str(tmp_path / "fig2.png")]
    regal_main(common)
    assert "peak_memory: imitated the heuristic proposal" in capsys.readouterr().out
    regal_main(common + ["--distil", "200", "--distil-objectives", "peak_memory"])
    assert "peak_memory: imitated BRKGA-200's solutions (1 per graph)" in capsys.readouterr().out


def test_full_uniform_share_reproduces_brkga():
    """A proposal hedged with share 1 draws every chromosome uniform: REGAL's runs are uniform BRKGA's."""
    graphs = generate(2, 1, ops=(8, 10), seed=6)
    actions = [np.random.default_rng(g).integers(0, features.CHOICES, (graph.num_ops, features.HEADS))
               for g, graph in enumerate(graphs)]
    outcome = bench.evaluate(graphs, actions, "runtime", budget=120, big_budget=240, uniform_share=1.0)
    np.testing.assert_array_equal(outcome.regal, outcome.brkga)


def test_bench_passes_the_uniform_share(tmp_path, capsys):
    """``--uniform-share 1`` reaches the evaluation (REGAL ties uniform BRKGA on every case); a share outside
    [0, 1] is refused with a message naming the flag."""
    common = ["bench", "--objectives", "runtime", "--distil", "0", "--train-topologies", "3", "--valid-topologies",
              "1", "--test-topologies", "1", "--variants", "1", "--imitate", "3", "--fine-tune", "0", "--budget", "40",
              "--big-budget", "80", "--eval-seeds", "2", "--out", str(tmp_path / "fig2.png")]
    regal_main(common + ["--uniform-share", "1"])
    assert "| runtime | 2 | 100.0% | +0.00% | +0.00% | +0.00% |" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        regal_main(common + ["--uniform-share", "1.5"])
    assert "--uniform-share 1.5: need a fraction in [0, 1]" in capsys.readouterr().err


@pytest.mark.parametrize("flag, value, least", [("--more-valid", "-3", 0), ("--fresh-test", "-1", 0),
                                                ("--more-train", "-2", 0), ("--eval-seeds", "0", 1),
                                                ("--budget", "0", 1)])
def test_counts_below_their_least_value_are_refused_by_name(flag, value, least, capsys):
    """A negative topology count used to be read as none; every count flag now gets a message naming it,
    before any graph is drawn or trained on (the diagnose command's flags too)."""
    with pytest.raises(SystemExit):
        regal_main(["bench", flag, value])
    assert f"{flag} {value}: need a count >= {least}" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        regal_main(["diagnose", "--seeds", "0"])
    assert "--seeds 0: need a count >= 1" in capsys.readouterr().err


def test_default_training_seeds_are_the_shipped_ones(tmp_path):
    """Without --train-seed each policy trains with seed --seed + `TRAIN_SEED` (4 for runtime and 0 for peak
    memory; what algorithms/regal/weights holds): the same weights as naming that
    seed, others than seed 1's."""
    common = ["bench", "--distil", "0", "--train-topologies", "3", "--valid-topologies", "1", "--test-topologies", "1",
              "--variants", "1", "--imitate", "3", "--fine-tune", "0", "--budget", "40", "--big-budget", "80",
              "--eval-seeds", "1", "--out", str(tmp_path / "fig2.png")]
    weights = {}
    for name, extra in (("default", []), ("one", ["--train-seed", "1"]), ("zero", ["--train-seed", "0"]),
                        ("four", ["--train-seed", "4"])):
        regal_main(common + extra + ["--weights", str(tmp_path / name)])
        weights[name] = {kind: np.load(tmp_path / name / f"{kind}.npy") for kind in ("runtime", "peak_memory")}
    assert TRAIN_SEED == {"runtime": 4, "peak_memory": 0}
    for kind, seed in (("runtime", "four"), ("peak_memory", "zero")):
        np.testing.assert_array_equal(weights["default"][kind], weights[seed][kind])
        assert not np.array_equal(weights["default"][kind], weights["one"][kind])
