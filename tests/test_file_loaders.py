"""Every loader of a file a user can hand timerl refuses a bad file with a `TimeRLError` naming it and what is
wrong (never a raw exception; checkpoints too), never allocates what a header claims before checking it, and a name built from
a user's string stays inside its folder."""

from __future__ import annotations

import gzip
import io
import json
import struct
import time
import zipfile

import numpy as np
import pytest

import timerl as trl
from algorithms.egrl.report import read_runs, report
from algorithms.egrl.spec import ChipSpecError, load_spec
from algorithms.mmap.workloads import hlo, list_workloads, read_workload, workload_path, xla_dump
from algorithms.regal import train
from algorithms.regal.policy import Layout, Sizes, init_weights
from timerl.errors import ArgumentError, FileFormatError
from timerl.files import read_npy
from timerl.runlog import RunLog, read_events

DEEP = "[" * 100_000 + "]" * 100_000  # json.loads recurses once per level


# ---- weights (.npy) ----

def _npy_header(shape: tuple, descr: str = "<f4") -> bytes:
    header = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def test_weights_files_that_are_not_the_policy(tmp_path):
    sizes = Sizes(hidden=8, edge_hidden=4, rounds=1)
    size = Layout.of(init_weights(sizes)).size
    cases = {
        "empty.npy": b"",
        "text.npy": b"hello, not an array\n",
        "huge.npy": _npy_header((10**12,)) + b"\0" * 64,  # claims 4 TB
        "huge_right_shape.npy": _npy_header((size,)) + b"\0" * 8,  # the right shape, truncated data
        "objects.npy": _npy_header((size,), "|O"),
        "bad_header.npy": b"\x93NUMPY\x01\x00" + struct.pack("<H", 16) + b"{'descr': )))  \n",
    }
    np.savez(tmp_path / "archive.npz", weights=np.zeros(size, np.float32))
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    for name in [*cases, "archive.npz", "absent.npy"]:
        started = time.perf_counter()
        with pytest.raises(trl.TimeRLError, match=name.replace(".", r"\.")) as raised:
            train.load(tmp_path / name, sizes, nodes=4)
        assert isinstance(raised.value, train.WeightsError), (name, raised.value)
        assert time.perf_counter() - started < 5.0, name  # nothing of the claimed size was allocated
    assert "archive" in str(pytest.raises(FileFormatError, read_npy, tmp_path / "archive.npz", "w", (size,)).value)


def test_read_npy_reads_what_np_save_wrote(tmp_path):
    for values in (np.arange(6, dtype=np.float64).reshape(2, 3), np.asfortranarray(np.ones((3, 2), np.int32))):
        np.save(tmp_path / "v.npy", values)
        np.testing.assert_array_equal(read_npy(tmp_path / "v.npy", "values", values.shape), values)


# ---- run logs and event files ----

@pytest.mark.parametrize("name", ["..", "../escape", "/tmp/absolute", "a/../../b", "", ".", "x\0y", 7])
def test_run_names_stay_in_their_folder(tmp_path, name):
    with pytest.raises(ArgumentError, match="run_name"):
        RunLog(tmp_path / "logs", name)
    assert not (tmp_path / "escape").exists() and not (tmp_path / "b").exists()


def test_run_names_may_name_a_subfolder(tmp_path):
    with RunLog(tmp_path, "ALE/Pong-v5") as log:
        log.write({"x": 1.0}, step=0)
    assert log.directory.parent.parent == tmp_path


def test_a_truncated_or_corrupt_event_file(tmp_path):
    with RunLog(tmp_path, "run") as log:
        for step in range(3):
            log.write({"mean_return": float(step)}, step=step)
    data = log.events_path.read_bytes()
    whole = read_events(log.events_path)
    broken = tmp_path / "broken"
    for cut in range(len(data)):
        broken.write_bytes(data[:cut])
        try:
            events = read_events(broken)
        except FileFormatError as error:
            assert str(broken) in str(error)
        else:
            assert events == whole[:len(events)]  # cut at a record boundary: the records before it
    broken.write_bytes(data[:20] + bytes([data[20] ^ 0xFF]) + data[21:])
    with pytest.raises(FileFormatError, match="corrupt"):
        read_events(broken)
    with pytest.raises(FileFormatError, match="absent"):
        read_events(tmp_path / "absent")


# ---- workload JSON, XLA dumps and HLO text ----

def test_workload_files_that_are_not_workloads(tmp_path):
    good = read_workload(workload_path(list_workloads()[0]))
    record = json.loads(gzip.decompress(workload_path(good.name).read_bytes())
                        if workload_path(good.name).suffix == ".gz" else workload_path(good.name).read_bytes())
    missing = dict(record)
    del missing["buffers"]
    broken_invariant = dict(record, num_instructions=record["num_instructions"] + 1)
    cases = {"deep.json": DEEP, "text.json": "not json", "list.json": "[1, 2]", "missing.json": json.dumps(missing),
             "invariant.json": json.dumps(broken_invariant), "latin1.json": b"\xff\xfe{}", "bad.json.gz": b"\x1f\x8b"}
    for name, text in cases.items():
        (tmp_path / name).write_bytes(text if isinstance(text, bytes) else text.encode())
        with pytest.raises(FileFormatError, match=name.replace(".", r"\.")):
            read_workload(tmp_path / name)
    (tmp_path / "good.json").write_text(json.dumps(record))
    again = read_workload(tmp_path / "good.json")
    assert (again.instructions, again.buffers) == (good.instructions, good.buffers)


def test_chip_files(tmp_path):
    for name, data in {"deep.json": DEEP.encode(), "binary.json": b"\xff\xfe\x00"}.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ChipSpecError, match=name.replace(".", r"\.")):
            load_spec(str(tmp_path / name))


def test_dump_names_stay_in_their_folder(tmp_path):
    for name in ("../escape", "/tmp/x", ".."):
        with pytest.raises(ArgumentError):
            xla_dump.load(name, tmp_path)
        with pytest.raises(ArgumentError):
            xla_dump.save(name, {}, tmp_path)
    (tmp_path / "bad.json.gz").write_bytes(b"\x1f\x8b\x08 truncated")
    with pytest.raises(FileFormatError, match=r"bad\.json\.gz"):
        xla_dump.load("bad", tmp_path)
    (tmp_path / "short.json.gz").write_bytes(gzip.compress(json.dumps({"hlo": "HloModule m"}).encode()))
    with pytest.raises(FileFormatError, match=r"short\.json\.gz"):
        xla_dump.load("short", tmp_path)


def test_truncated_hlo_text_is_a_parse_error():
    """A stored module cut after every line (and inside lines): parsed and analysed whole, or refused with
    `HloParseError` (a TimeRLError), never a StopIteration, KeyError or IndexError from inside."""
    smallest = min(xla_dump.stored_names(), key=lambda n: (xla_dump.DUMP_DIR / f"{n}.json.gz").stat().st_size)
    text = xla_dump.load(smallest).hlo_text
    lines = text.splitlines(keepends=True)
    cuts = [sum(len(line) for line in lines[:k]) for k in range(len(lines))]
    cuts += [c + len(lines[k]) // 2 for k, c in enumerate(cuts)]
    cuts = sorted(cuts)[::max(1, len(cuts) // 150)] + [len(text)]
    outcomes = set()
    for cut in cuts:
        try:
            module = hlo.parse_module(text[:cut])
            hlo.to_workload(module, "cut", "", "")
            outcomes.add("parsed")
        except hlo.HloParseError as error:
            assert isinstance(error, trl.TimeRLError)
            outcomes.add("refused")
    assert outcomes == {"parsed", "refused"}


# ---- checkpoints ----

def _counter():
    ctx = trl.Context("i")
    (i,), (I,) = ctx.dims, ctx.bounds
    with ctx:
        w = trl.placeholder((3,), domain=(i,))
        w[0] = trl.zeros((3,))
        w[i + 1] = w[i] + 1.0
        w.sink(lambda p, v: None)
    return ctx.compile(bounds={I: 6}, backend="torch")


def _npz(path, members: dict) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def test_checkpoints_that_are_not_checkpoints(tmp_path):
    exe = _counter()
    exe.execute(iterations=3)
    good = tmp_path / "good.npz"
    exe.save(str(good))
    data = good.read_bytes()
    header = io.BytesIO()
    np.save(header, np.frombuffer(b'{"format": "timerl checkpoint 1"}', np.uint8))
    cases = {"empty.npz": b"", "truncated.npz": data[:len(data) // 2], "text.npz": b"not a zip"}
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
    _npz(tmp_path / "huge.npz", {"header.npy": header.getvalue(), "a0.npy": _npy_header((10**12,)) + b"\0" * 64})
    _npz(tmp_path / "no_header.npz", {"a0.npy": header.getvalue()})
    _npz(tmp_path / "short_header.npz", {"header.npy": header.getvalue()})
    bad_json = io.BytesIO()
    np.save(bad_json, np.frombuffer(b"{not json", np.uint8))
    _npz(tmp_path / "bad_json.npz", {"header.npy": bad_json.getvalue()})
    for name in [*cases, "huge.npz", "no_header.npz", "short_header.npz", "bad_json.npz", "absent.npz"]:
        started = time.perf_counter()
        with pytest.raises(FileFormatError, match=name.replace(".", r"\.")):
            _counter().load(str(tmp_path / name))
        assert time.perf_counter() - started < 5.0, name
    resumed = _counter()
    resumed.load(str(good))
    resumed.execute(resume=True)
    assert resumed.finished


def test_egrl_result_files(tmp_path):
    runs = tmp_path / "runs.jsonl"
    runs.write_text('{"method": "egrl", "workload": "bert", "seed": 0, "latency": 1.0}\n{"method": \n')
    with pytest.raises(FileFormatError, match=r"runs\.jsonl:2"):
        read_runs([str(runs)])
    runs.write_text('{"method": "egrl", "workload": "bert", "seed": 0, "latency": 1.0}\n')
    assert read_runs([str(runs)]) == {("egrl", "bert"): {0: 1.0}}
    (tmp_path / "ceiling.json").write_text(DEEP)
    with pytest.raises(FileFormatError, match=r"ceiling\.json"):
        report([str(runs)], str(tmp_path / "ceiling.json"), ["egrl"])
