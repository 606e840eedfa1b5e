"""Learning curves the way RL users read them: a CSV file and a TensorBoard event file per run, under
``logdir/run_name/`` (like CleanRL's ``runs/``).

    with RunLog("runs", "ppo_CartPole-v1") as log:
        log.write({"mean_return": 21.5, "iteration_seconds": 0.4}, step=512)

TensorBoard's event format is written here without TensorFlow: a TFRecord file (each record is its
length, a masked CRC-32C of the length, the bytes, a masked CRC-32C of the bytes) of ``Event`` protocol
buffers, encoded by hand. `read_events` parses the same format back.
"""

from __future__ import annotations

import csv
import math
import os
import socket
import struct
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from timerl.errors import FileFormatError
from timerl.files import child_path, read_bytes


class RunLog:
    """``progress.csv`` (one row per ``write``; columns fixed by the first row) and a TensorBoard event file
    with one scalar per numeric entry, tagged ``charts/<name>``."""

    def __init__(self, logdir: str | os.PathLike, run_name: str) -> None:
        self.directory = child_path(logdir, run_name, "run_name")
        self.directory.mkdir(parents=True, exist_ok=True)
        self._csv_file = open(self.directory / "progress.csv", "w", newline="")
        self._csv: csv.DictWriter | None = None
        events_name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}"
        self.events_path = self.directory / events_name
        self._events = open(self.events_path, "wb")
        self._events.write(_record(_event(time.time(), 0, file_version="brain.Event:2")))

    def write(self, values: Mapping[str, Any], step: int) -> None:
        if self._csv is None:
            self._csv = csv.DictWriter(self._csv_file, fieldnames=["step", *values], extrasaction="ignore")
            self._csv.writeheader()
        self._csv.writerow({"step": step, **values})
        scalars = {f"charts/{k}": float(v) for k, v in values.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
        self._events.write(_record(_event(time.time(), step, scalars=scalars)))
        self._csv_file.flush()
        self._events.flush()

    def close(self) -> None:
        self._csv_file.close()
        self._events.close()

    def __enter__(self) -> RunLog:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class IterationClock:
    """Completes learning-curve rows as iterations finish: adds ``iteration_seconds`` (since the previous
    row, or since `start`), ``iteration_cpu_seconds`` (the process's CPU time in the same span: less noisy
    than wall time on a shared machine), ``compile_seconds`` and ``env_steps``, and writes the row to the run
    log."""

    def __init__(self, run_log: RunLog | None, steps_per_iteration: int) -> None:
        self.run_log, self.steps_per_iteration = run_log, steps_per_iteration
        self.last, self.last_cpu, self.compile_seconds = time.perf_counter(), time.process_time(), 0.0

    def start(self, compile_seconds: float) -> None:
        self.last, self.last_cpu, self.compile_seconds = time.perf_counter(), time.process_time(), compile_seconds

    def complete(self, row: dict[str, Any]) -> dict[str, Any]:
        now, cpu = time.perf_counter(), time.process_time()
        row["iteration_seconds"], self.last = now - self.last, now
        row["iteration_cpu_seconds"], self.last_cpu = cpu - self.last_cpu, cpu
        row["compile_seconds"] = self.compile_seconds
        row["env_steps"] = (row["iteration"] + 1) * self.steps_per_iteration
        if self.run_log is not None:
            self.run_log.write(row, step=row["env_steps"])
        return row

    def close(self) -> None:
        if self.run_log is not None:
            self.run_log.close()


# ---- TFRecord framing and CRC-32C -------------------------------------------------------------------------


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum TFRecord uses."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _record(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", _masked(crc32c(length))) + data
            + struct.pack("<I", _masked(crc32c(data))))


# ---- Event protocol buffers (tensorflow/core/util/event.proto, summary.proto) -----------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, wire_type: int, payload: bytes) -> bytes:
    return _varint(number << 3 | wire_type) + payload


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _field(number, 2, _varint(len(payload)) + payload)


def _event(wall_time: float, step: int, file_version: str | None = None,
           scalars: Mapping[str, float] | None = None) -> bytes:
    """Event{wall_time = 1 (double), step = 2 (int64), file_version = 3, summary = 5};
    Summary{value = 1 (repeated)}; Summary.Value{tag = 1, simple_value = 2 (float)}."""
    message = _field(1, 1, struct.pack("<d", wall_time)) + _field(2, 0, _varint(step & (2 ** 64 - 1)))
    if file_version is not None:
        message += _length_delimited(3, file_version.encode())
    if scalars:
        values = b"".join(_length_delimited(1, _length_delimited(1, tag.encode())
                                            + _field(2, 5, struct.pack("<f", value)))
                          for tag, value in scalars.items())
        message += _length_delimited(5, values)
    return message


# ---- reading back -----------------------------------------------------------------------------------------


def read_events(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Every event of a TensorBoard event file as ``{"wall_time", "step", "scalars": {tag: value}}``
    (plus ``file_version`` on the first); checks every CRC. A truncated or corrupt file is a `FileFormatError`
    naming the file and the byte where its bad record starts."""
    data = read_bytes(path, "event file")
    events, offset = [], 0
    while offset < len(data):
        if len(data) - offset < 12:
            raise FileFormatError(f"{path}: truncated event file: {len(data) - offset} bytes of a record header at "
                                  f"byte {offset}")
        header = data[offset:offset + 8]
        (length,) = struct.unpack("<Q", header)
        if struct.unpack("<I", data[offset + 8:offset + 12])[0] != _masked(crc32c(header)):
            raise FileFormatError(f"{path}: corrupt record length at byte {offset}")
        if len(data) - offset - 16 < length:
            raise FileFormatError(f"{path}: truncated event file: the record at byte {offset} claims {length} "
                                  f"bytes, {max(len(data) - offset - 16, 0)} follow")
        body = data[offset + 12:offset + 12 + length]
        if struct.unpack("<I", data[offset + 12 + length:offset + 16 + length])[0] != _masked(crc32c(body)):
            raise FileFormatError(f"{path}: corrupt record at byte {offset}")
        try:
            events.append(_parse_event(body))
        except (ValueError, IndexError, KeyError, struct.error) as error:
            raise FileFormatError(f"{path}: the record at byte {offset} is not a TensorBoard event: "
                                  f"{type(error).__name__}: {error}") from error
        offset += 16 + length
    return events


def _fields(message: bytes) -> Iterator[tuple[int, Any]]:
    offset = 0
    while offset < len(message):
        key, offset = _read_varint(message, offset)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, offset = _read_varint(message, offset)
        elif wire_type == 1:
            value, offset = message[offset:offset + 8], offset + 8
        elif wire_type == 5:
            value, offset = message[offset:offset + 4], offset + 4
        elif wire_type == 2:
            length, offset = _read_varint(message, offset)
            value, offset = message[offset:offset + length], offset + length
        else:
            raise ValueError(f"unsupported protocol buffer wire type {wire_type}")
        yield number, value


def _read_varint(data: bytes, offset: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[offset]
        value |= (byte & 0x7F) << shift
        offset, shift = offset + 1, shift + 7
        if not byte & 0x80:
            return value, offset


def _parse_event(message: bytes) -> dict[str, Any]:
    event: dict[str, Any] = {"scalars": {}}
    for number, value in _fields(message):
        if number == 1:
            event["wall_time"] = struct.unpack("<d", value)[0]
        elif number == 2:
            event["step"] = value
        elif number == 3:
            event["file_version"] = value.decode()
        elif number == 5:
            for _, summary_value in _fields(value):
                parts = dict(_fields(summary_value))
                simple = struct.unpack("<f", parts[2])[0] if 2 in parts else math.nan
                event["scalars"][parts[1].decode()] = simple
    return event


__all__ = ["IterationClock", "RunLog", "crc32c", "read_events"]
