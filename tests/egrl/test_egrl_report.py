"""The Fig. 3 report against numbers computed here from the same runs and optimum."""

from __future__ import annotations

import json

from algorithms.egrl.report import report


def test_report_rows_are_speedups_and_fractions_per_baseline(tmp_path):
    optimum = {"workloads": {"resnet50": {"optimum": 100.0, "baselines": {
        "liveness": {"latency": 120.0}, "static": {"latency": 150.0}, "layerwise": {"latency": 200.0}}}}}
    (tmp_path / "optimum.json").write_text(json.dumps(optimum))
    runs = [{"method": "egrl", "workload": "resnet50", "seed": 0, "latency": 110.0},
            {"method": "egrl", "workload": "resnet50", "seed": 1, "latency": 102.0},
            {"method": "ea", "workload": "resnet50", "seed": 0, "latency": 115.0},
            {"method": "egrl@fast", "workload": "resnet50", "seed": 0, "latency": 100.0}]
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    text = report([str(tmp_path / "runs.jsonl")], str(tmp_path / "optimum.json"), ["egrl", "ea", "egrl@fast"])
    egrl = next(line for line in text.splitlines() if line.startswith("| EGRL | 2"))
    # liveness: speedups 120/110, 120/102 -> 1.134 ± 0.043; fractions 0.5, 0.9 -> 0.70 ± 0.20
    assert "1.13 ± 0.04 | 0.70 ± 0.20" in egrl
    # static: 150/110, 150/102 -> 1.417 ± 0.053; fractions 0.8, 0.96 -> 0.88 ± 0.08; paper 1.28 (ResNet-50)
    assert "1.42 ± 0.05 | 0.88 ± 0.08" in egrl and egrl.endswith("| 1.28 |")
    assert any(line.startswith("| EGRL (fast) | 1 | 1.20 ± 0.00 | 1.00 ± 0.00") for line in text.splitlines())
    targets = next(line for line in text.splitlines() if line.startswith("| ResNet-50 | yes"))
    assert "**0.70**" in targets  # below 0.9: marked as not met
