"""What only the scheduled backends have: deallocation, the memory pool, swapping, the printed schedule,
and errors found at compile time by the polyhedral analysis."""

from __future__ import annotations

import re

import numpy as np
import pytest

import timerl as trl

COMPILED = ["torch", "jax"]
POINT = 256  # float32 elements: 1 KiB per point


def window_program(values: dict):
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        y = trl.source(lambda p: np.full(POINT, p["t"], np.float32), shape=(POINT,), domain=(t,))
        g = y[t:trl.min(t + 4, T)].sum(0)
        g.sink(lambda p, v: values.__setitem__(p["t"], np.asarray(v).copy()))
    return ctx, T


def run_window(steps: int, backend: str, **options):
    values: dict = {}
    ctx, T = window_program(values)
    exe = ctx.compile({T: steps}, backend=backend, **options)
    exe.execute()
    expected = {t: np.full(POINT, sum(range(t, min(t + 4, steps))), np.float32) for t in range(steps)}
    assert sorted(values) == sorted(expected)
    for t in expected:
        np.testing.assert_allclose(values[t], expected[t])
    return exe


@pytest.mark.parametrize("backend", COMPILED)
def test_window_peak_memory_is_flat_in_sequence_length(backend):
    short = run_window(64, backend).stats["peak_device_bytes"]
    long = run_window(1024, backend).stats["peak_device_bytes"]
    assert short >= 5 * POINT * 4  # the four window points and the sum are live together
    assert long <= 1.5 * short, (short, long)


@pytest.mark.parametrize("backend", COMPILED)
def test_every_point_is_freed_and_only_after_its_last_reader(backend):
    exe = run_window(40, backend)
    assert exe.stats["leaked_points"] == 0
    text = str(exe.schedule)
    assert "free" in text and "for" in text


def run_mirror(steps: int, backend: str, **options):
    """out[t] = x[t] + x[T-1-t]: half of x must wait for its mirror, while each op needs only 3 KiB."""
    values: dict = {}
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: np.full(POINT, p["t"], np.float32), shape=(POINT,), domain=(t,))
        out = x + x[T - 1 - t]
        out.sink(lambda p, v: values.__setitem__(p["t"], np.asarray(v).copy()))
    exe = ctx.compile({T: steps}, backend=backend, **options)
    exe.execute()
    assert sorted(values) == list(range(steps))
    for t in range(steps):
        np.testing.assert_allclose(values[t], np.full(POINT, steps - 1, np.float32))
    return exe


@pytest.mark.parametrize("backend", COMPILED)
def test_device_memory_too_small_is_an_error_that_says_how_much_is_needed(backend):
    assert run_mirror(16, backend).stats["peak_device_bytes"] > 4 * POINT * 4
    with pytest.raises(trl.DeviceOutOfMemoryError, match=r"needs at least \d+ bytes"):
        run_mirror(16, backend, device_memory=4 * POINT * 4)
    with pytest.raises(trl.DeviceOutOfMemoryError, match=r"needs at least \d+ bytes"):
        run_window(16, backend, device_memory=3 * POINT * 4, swap=True)  # one op alone needs 5 KiB


@pytest.mark.parametrize("backend", COMPILED)
def test_swapping_to_host_fits_a_small_device(backend):
    exe = run_mirror(16, backend, device_memory=4 * POINT * 4, swap=True)
    assert exe.stats["peak_device_bytes"] <= 4 * POINT * 4
    assert exe.stats["bytes_offloaded"] > 0 and exe.stats["bytes_fetched"] > 0
    assert exe.stats["peak_host_bytes"] > 0


@pytest.mark.parametrize("backend", COMPILED)
def test_out_of_range_read_is_found_at_compile_time(backend):
    calls = []
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.source(lambda p: float(p["t"]), domain=(t,))
        ahead = x[t + 1] * 2.0
        ahead.sink(lambda p, v: calls.append(p))
    with pytest.raises(trl.DomainError, match=r"test_compiled.py:\d+.*t=9"):
        ctx.compile({T: 10}, backend=backend)
    assert calls == []


@pytest.mark.parametrize("backend", COMPILED)
def test_same_point_cycle_is_a_schedule_error_naming_the_tensors(backend):
    ctx = trl.Context(dims="t")
    (t,), (T,) = ctx.dims, ctx.bounds
    with ctx:
        x = trl.placeholder((), domain=(t,))
        y = trl.placeholder((), domain=(t,))
        x[t] = y[t] + 1.0
        y[t] = x[t] * 2.0
        x.sink(lambda p, v: None)
    with pytest.raises(trl.ScheduleError, match=r"merge.*test_compiled.py"):
        ctx.compile({T: 4}, backend=backend)


def test_program_of_fifty_ops_matches_reference_on_every_backend():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parents[1] / "benchmarks" / "program50.py"
    spec = importlib.util.spec_from_file_location("program50", path)
    program50 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program50)
    results = {}
    runs = [("reference", True), ("torch", True), ("jax", True), ("torch", False)]  # optimize off: no DCE, no fusion
    for backend, optimize in runs:
        values: dict = {}
        ctx = program50.build(values)
        exe = ctx.compile({"B": 2, "I": 3, "T": 6}, backend=backend, optimize=optimize)
        exe.execute()
        results[backend, optimize] = values
    want_all = results["reference", True]
    for run_key in runs[1:]:
        assert sorted(results[run_key], key=str) == sorted(want_all, key=str)
        for key, want in want_all.items():
            np.testing.assert_allclose(results[run_key][key], want, rtol=1e-4, atol=1e-5)


def test_range_reads_come_from_a_block_store():
    exe = run_window(50, "torch")  # values checked against NumPy inside
    assert list(exe.block_axes.values()) == [0]
    assert run_window(10, "jax").block_axes == {}  # a jax slice costs a compiled computation per bounds
    swapping = run_window(10, "torch", swap=True)
    assert swapping.block_axes == {}  # swapping moves single points, so it keeps point stores


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax"])
def test_block_store_rows_grow_drop_freed_points_and_slice(backend):
    from timerl.backends.base import get_backend
    from timerl.pdg.graph import TensorType
    from timerl.runtime.blocks import BlockStore

    arrays = get_backend(backend)
    store = BlockStore(1, (TensorType((2,), "float32"),), arrays)
    for k in range(30):  # row 0 of dimension 0, points k of dimension 1, freed three behind
        store.put((0, k), (arrays.from_numpy(np.full(2, k, np.float32)),))
        if k >= 3:
            store.free((0, k - 3))
    assert not store.has((0, 26)) and store.has((0, 27))
    np.testing.assert_array_equal(arrays.to_numpy(store.slice((0,), 27, 30, 0)), [[27, 27], [28, 28], [29, 29]])
    assert store.rows[(0,)].buffers[0].shape[0] < 30  # the freed prefix was dropped when the row grew
    with pytest.raises(KeyError):
        store.slice((0,), 26, 28, 0)


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax"])
def test_block_store_rows_written_downwards_grow_below(backend):
    """A backward recurrence (GAE) writes T-1 first, then T-2, ...: a row regrows a logarithmic number of
    times, not at every point, and keeps every value."""
    from timerl.backends.base import get_backend
    from timerl.pdg.graph import TensorType
    from timerl.runtime.blocks import BlockStore

    arrays = get_backend(backend)
    store = BlockStore(1, (TensorType((2,), "float32"),), arrays)
    layouts = set()  # (first point, capacity) of the row's buffer: a new one at each regrowth
    for k in reversed(range(100)):
        store.put((0, k), (arrays.from_numpy(np.full(2, k, np.float32)),))
        row = store.rows[(0,)]
        layouts.add((row.base, row.buffers[0].shape[0]))
    assert len(layouts) <= 6, sorted(layouts)
    np.testing.assert_array_equal(arrays.to_numpy(store.slice((0,), 0, 100, 0))[:, 0], np.arange(100))
    assert float(arrays.to_numpy(store.get((0, 42))[0])[0]) == 42


@pytest.mark.parametrize("backend", COMPILED)
def test_out_of_memory_names_the_budget_that_fits(backend):
    """The figure in the message is the schedule's true peak: a budget of exactly that many bytes runs. (The
    peak measured under an ample budget: without one the loop runs batched, all its points' sums alive at once,
    a different order with a higher peak.)"""
    needed = run_mirror(16, backend, device_memory=1 << 30).stats["peak_device_bytes"]
    with pytest.raises(trl.DeviceOutOfMemoryError) as raised:
        run_mirror(16, backend, device_memory=needed - 1)
    stated = int(re.search(r"needs at least (\d+) bytes", str(raised.value)).group(1))
    assert stated == needed
    assert run_mirror(16, backend, device_memory=stated).stats["peak_device_bytes"] == stated


@pytest.mark.parametrize("backend", COMPILED)
def test_memory_timeline_follows_the_pool(backend):
    """The timeline's maximum is the peak, and the run ends with nothing live."""
    exe = run_window(64, backend)
    timeline = exe.stats["memory_timeline"]
    assert max(timeline.device) == exe.stats["peak_device_bytes"]
    assert timeline.device[-1] == 0 and not any(timeline.host)


def test_memory_timeline_keeps_its_shape_in_bounded_space():
    from timerl.runtime.memory import Timeline

    timeline = Timeline(capacity=8)
    for k in range(100):
        timeline.add(k % 10, 0)
    assert len(timeline.device) < 8 and timeline.stride == 16
    assert max(timeline.device) == 9


def test_plot_memory_writes_a_png(tmp_path):
    from timerl.memplot import plot_memory

    exe = run_window(16, "torch")
    path = plot_memory(exe, str(tmp_path / "memory.png"))
    assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
