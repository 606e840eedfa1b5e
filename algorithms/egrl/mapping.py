"""A network's memory map out: JSON with each layer's name and the level of its weights and of its activation,
and the Fig. 6 picture; `map_network` maps a user's own PyTorch model end to end.

    from algorithms.egrl.mapping import map_network
    record = map_network(model, example_input, method="egrl", budget=4000, out="my_map")
    # my_map/mapping.json, my_map/mapping.png; record["speedup"]["liveness"], record["layers"][k]["weights"], ...
"""

from __future__ import annotations

import json
import os

import numpy as np
from torch import nn

from algorithms.egrl.chip import BASELINES, Chip, compiler_mapping
from algorithms.egrl.learners import Settings, run
from algorithms.egrl.plot import plot_mapping
from algorithms.egrl.spec import LEVELS, NNPI, ChipSpec
from algorithms.egrl.workloads import WorkloadGraph, workload_from_torch


def mapping_record(graph: WorkloadGraph, mapping: np.ndarray, chip: Chip, found_by: str) -> dict:
    """``mapping`` ((N, 2) levels: weights, activation) as a JSON-ready dict: per layer its name, kind, bytes and
    levels, the map's noise-free latency, and its speedup over every declared compiler baseline."""
    weights, acts = mapping[:, 0], mapping[:, 1]
    latency = chip.latency(weights, acts, noisy=False)
    w = chip.workload
    layers = [{"name": name, "kind": kind, "weights": LEVELS[int(weights[k])], "activation": LEVELS[int(acts[k])],
               "weight_bytes": float(w.weight_bytes[k]), "activation_bytes": float(w.act_bytes[k])}
              for k, (name, kind) in enumerate(zip(graph.names, graph.kinds))]
    baselines = {name: chip.latency(*compiler_mapping(chip, name), noisy=False) for name in BASELINES}
    return {"workload": w.name, "chip": chip.spec.to_json(), "found_by": found_by,
            "valid": chip.repair(weights, acts).valid, "latency_seconds": latency,
            "baseline_latency_seconds": baselines,
            "speedup": {name: base / latency for name, base in baselines.items()}, "layers": layers}


def write_mapping(graph: WorkloadGraph, mapping: np.ndarray, chip: Chip, found_by: str, out: str) -> dict:
    """``out/mapping.json`` and ``out/mapping.png`` (the map beside the liveness compiler's); returns the record."""
    os.makedirs(out, exist_ok=True)
    record = mapping_record(graph, mapping, chip, found_by)
    with open(os.path.join(out, "mapping.json"), "w") as handle:
        json.dump(record, handle, indent=1)
    weights, acts = compiler_mapping(chip)
    plot_mapping(mapping, np.stack([weights, acts], axis=1), graph.names,
                 f"{graph.workload.name}: {found_by} (speedup {record['speedup']['liveness']:.2f}) and the compiler's",
                 os.path.join(out, "mapping.png"))
    return record


def map_network(model: nn.Module, example_input, method: str = "egrl", budget: int = 4000, seed: int = 0,
                out: str | None = None, chip: ChipSpec = NNPI, settings: Settings | None = None) -> dict:
    """Maps a user's network onto ``chip``: traces it (`workload_from_torch`), runs ``method`` (one of
    `learners.METHODS`) for ``budget`` simulator evaluations, and returns the best map's `mapping_record`
    (written with its picture to ``out`` when given). ``settings`` overrides the learner's (its budget and chip
    are replaced by ``budget`` and ``chip``)."""
    graph = workload_from_torch(model, example_input)
    base = settings or Settings()
    settings = Settings(**{**base.__dict__, "budget": budget, "chip": chip})
    result = run(method, graph, seed, settings)
    if result.mapping is None:
        raise RuntimeError(f"{method} found no valid map of {graph.workload.name} in {budget} evaluations")
    noiseless = Chip(graph.workload, noise=0.0, spec=chip)
    found_by = f"{method}, seed {seed}, {budget} evaluations"
    if out is None:
        return mapping_record(graph, result.mapping, noiseless, found_by)
    return write_mapping(graph, result.mapping, noiseless, found_by, out)
