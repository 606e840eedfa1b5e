"""The user path: a graph file in, the placement, schedule and plots out; `place.trace` replays the
performance model event by event (its makespan and peak are the model's)."""

import json

import numpy as np
import pytest

from algorithms.regal import data, place
from algorithms.regal.__main__ import main
from algorithms.regal.perfmodel import chromosome_length, evaluate

OPS = [{"name": "load", "runtime": 1, "output_size": 4, "inputs": []},
       {"name": "left", "runtime": 3, "output_size": 2, "inputs": ["load"]},
       {"name": "right", "runtime": 2, "output_size": 3, "inputs": ["load"]},
       {"name": "join", "runtime": 1, "output_size": 1, "inputs": ["left", "right"]}]


@pytest.mark.parametrize("seed", range(3))
def test_trace_is_the_models_schedule(seed):
    rng = np.random.default_rng(seed)
    graph = data.generate(1, 1, (30, 60), seed=seed)[0]
    for genes in rng.random((8, chromosome_length(graph))):
        schedule = place.trace(graph, genes)
        runtime, peak = evaluate(graph, genes[None], engine="numpy")
        assert schedule.makespan == runtime[0]
        assert schedule.peak == pytest.approx(peak[0], rel=1e-12)
        assert sorted(v for ops in schedule.order for v in ops) == list(range(graph.num_ops))
        for u, v, _ in graph.edges():  # an op starts after the ops it reads finish
            assert schedule.start[v] >= schedule.finish[u]
        for ops in schedule.order:  # a device runs one op at a time, in its schedule's order
            assert all(schedule.finish[a] <= schedule.start[b] for a, b in zip(ops, ops[1:]))


def test_place_prints_the_schedule_and_writes_plots(tmp_path, capsys):
    path = tmp_path / "fork.json"
    path.write_text(json.dumps({"name": "fork", "memory_limit": 20, "ops": OPS}))
    main(["place", str(path), "--no-policy", "--budget", "200", "--out", str(tmp_path / "fork")])
    out = capsys.readouterr().out
    assert "uniform BRKGA-200" in out and "| join |" in out and "device 0:" in out
    # two devices run the branches side by side: load (1), then left (3) and right (2) at once, then join (1)
    assert "makespan 5" in out
    assert (tmp_path / "fork_gantt.png").stat().st_size > 0 and (tmp_path / "fork_memory.png").stat().st_size > 0


@pytest.mark.parametrize("text, message", [
    ("{\"ops\": [", ":1: not JSON"),
    ("{\"ops\": []}", "non-empty list"),
    (json.dumps({"ops": [{"name": "a", "runtime": -1, "output_size": 1}]}), "non-negative number \"runtime\""),
    (json.dumps({"ops": [{"name": "a", "runtime": 1, "output_size": 1, "inputs": ["b"]}]}), "not an op"),
    (json.dumps({"ops": [{"name": "a", "runtime": 1, "output_size": 1, "inputs": ["b"]},
                         {"name": "b", "runtime": 1, "output_size": 1, "inputs": ["a"]}]}), "cycle"),
    (json.dumps({"ops": OPS, "memory_limit": "big"}), "memory_limit"),
])
def test_bad_graph_files_name_the_file(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(place.GraphFileError, match=message) as error:
        place.read_graph(path)
    assert str(path) in str(error.value)
