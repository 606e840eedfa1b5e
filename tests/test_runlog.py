"""Run logs: the CSV file and the TensorBoard event file read back; CRC-32C against its published check value."""

from __future__ import annotations

import csv
import struct

import pytest

from timerl.runlog import RunLog, crc32c, read_events


def test_crc32c_check_values():
    # RFC 3720 (iSCSI) appendix B.4 and the CRC catalogue's check value for "123456789"
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(bytes([0xFF] * 32)) == 0x62A8AB43


def test_csv_and_events_read_back(tmp_path):
    rows = [{"mean_return": 10.5, "iteration_seconds": 0.25, "episodes": 3},
            {"mean_return": 42.0, "iteration_seconds": 0.5, "episodes": 1}]
    with RunLog(tmp_path, "ppo_test") as log:
        for step, row in zip((100, 200), rows):
            log.write(row, step=step)
    with open(tmp_path / "ppo_test" / "progress.csv") as f:
        table = list(csv.DictReader(f))
    assert [float(r["mean_return"]) for r in table] == [10.5, 42.0]
    assert [int(r["step"]) for r in table] == [100, 200]

    events = read_events(log.events_path)
    assert events[0]["file_version"] == "brain.Event:2"
    assert [e["step"] for e in events[1:]] == [100, 200]
    for event, row in zip(events[1:], rows):
        assert event["scalars"] == pytest.approx({f"charts/{k}": v for k, v in row.items()})


def test_corrupt_event_file_is_detected(tmp_path):
    with RunLog(tmp_path, "run") as log:
        log.write({"x": 1.0}, step=1)
    data = bytearray(log.events_path.read_bytes())
    data[-6] ^= 0xFF  # inside the last record's payload
    log.events_path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="corrupt"):  # a FileFormatError, a ValueError too
        read_events(log.events_path)


def test_record_framing_matches_the_tfrecord_layout(tmp_path):
    """length (uint64) | masked crc of length | payload | masked crc of payload."""
    with RunLog(tmp_path, "run") as log:
        pass
    data = log.events_path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    assert len(data) == 8 + 4 + length + 4
    rotated = crc32c(data[:8])
    masked = (((rotated >> 15) | (rotated << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    assert struct.unpack("<I", data[8:12])[0] == masked
