"""Reading files a user hands to timerl (weights, workloads, logs) and naming files after user strings.

Every failure is a `FileFormatError` naming the file and what is wrong with it; nothing is allocated at the
size a file's header claims before the claim is checked against what the caller expects and the file's size;
a name built from a user's string (a run name, a dump name) stays inside its folder.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from timerl.errors import ArgumentError, FileFormatError, user_location

MAX_JSON_DEPTH = 64


def child_path(directory: str | os.PathLike, name: Any, what: str) -> Path:
    """``directory / name`` when ``name`` stays inside ``directory`` (relative, no ``..`` part, no NUL; a
    ``/`` makes a subfolder, as in ``ALE/Pong-v5``), else an `ArgumentError`: a user's string must not reach
    outside the folder it is meant for."""
    parts = Path(name).parts if isinstance(name, str) else ()
    if not parts or "\0" in name or os.path.isabs(name) or ".." in parts:
        raise ArgumentError(f"{user_location()}: {what} must be a relative name inside {directory} (no '..', "
                            f"not absolute), got {name!r}")
    return Path(directory) / name


def read_bytes(path: str | os.PathLike, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise FileFormatError(f"{path}: cannot read the {what}: {error.strerror or error}") from error


def gunzip(data: bytes, path: str | os.PathLike, what: str) -> bytes:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as error:
        raise FileFormatError(f"{path}: the {what} is not a complete gzip file: {error}") from error


def parse_json(data: bytes | str, path: str | os.PathLike, what: str) -> Any:
    """JSON text as Python values; malformed, not UTF-8 or nested deeper than `MAX_JSON_DEPTH` is a
    `FileFormatError` (the depth is checked before parsing, which would otherwise recurse that deep)."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as error:
        raise FileFormatError(f"{path}: the {what} is not UTF-8 text: {error}") from error
    depth = _nesting(text)
    if depth > MAX_JSON_DEPTH:
        raise FileFormatError(f"{path}: the {what} nests {depth} levels deep (at most {MAX_JSON_DEPTH})")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise FileFormatError(f"{path}: the {what} is not valid JSON: {error}") from error


def _nesting(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` outside JSON strings (strings removed by one regular expression,
    the depth a running sum: fast on the multi-megabyte workload files)."""
    codes = np.frombuffer(_JSON_STRING.sub("", text).encode("utf-8", "replace"), dtype=np.uint8)
    steps = np.isin(codes, _OPENING).astype(np.int64) - np.isin(codes, _CLOSING)
    return int(np.cumsum(steps).max(initial=0))


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_OPENING, _CLOSING = np.frombuffer(b"[{", np.uint8), np.frombuffer(b"]}", np.uint8)


def read_json(path: str | os.PathLike, what: str) -> Any:
    """A JSON file, gzipped when its name ends in ``.gz``."""
    data = read_bytes(path, what)
    if str(path).endswith(".gz"):
        data = gunzip(data, path, what)
    return parse_json(data, path, what)


def read_npz(path: str | os.PathLike, what: str) -> dict[str, np.ndarray]:
    """Every array of an ``np.savez`` archive (no pickles). Each member's header is checked against the bytes
    the archive says the member holds before its data is read, so a header claiming terabytes allocates
    nothing."""
    arrays = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                name = info.filename[:-len(".npy")] if info.filename.endswith(".npy") else info.filename
                with archive.open(info) as member:
                    try:
                        shape, fortran, dtype = _npy_header(member)
                    except Exception as error:  # noqa: BLE001 (NumPy's header parser raises many kinds)
                        raise FileFormatError(f"{path}: member {info.filename!r} of the {what} is not a NumPy "
                                              f"array: {error}") from error
                    if dtype.hasobject:
                        raise FileFormatError(f"{path}: member {info.filename!r} of the {what} holds Python "
                                              "objects, which are not loaded")
                    needed = math.prod(shape) * dtype.itemsize
                    if info.file_size - member.tell() < needed:
                        raise FileFormatError(f"{path}: member {info.filename!r} of the {what} claims {needed} "
                                              f"bytes of data, the archive holds {info.file_size - member.tell()}")
                    data = member.read(needed)
                if len(data) < needed:
                    raise FileFormatError(f"{path}: member {info.filename!r} of the {what} is truncated")
                arrays[name] = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C").copy()
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as error:
        raise FileFormatError(f"{path}: the {what} is not a complete .npz archive: {error}") from error
    except OSError as error:
        raise FileFormatError(f"{path}: cannot read the {what}: {error.strerror or error}") from error
    return arrays


def _npy_header(stream: Any) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran order, dtype) from the start of an .npy stream, the stream left at its data."""
    version = np.lib.format.read_magic(stream)
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    if version not in readers:
        raise ValueError(f".npy format version {version} is not supported")
    return readers[version](stream)


def read_npy(path: str | os.PathLike, what: str, shape: tuple[int, ...]) -> np.ndarray:
    """One array of ``shape`` saved by ``np.save``, any real numeric dtype. The header is checked (format,
    dtype, shape, and that the file holds that many bytes) before anything of that size is read."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            try:
                header = _npy_header(handle)
            except Exception as error:  # noqa: BLE001 (NumPy's header parser raises many kinds on bad bytes)
                if size >= 2 and Path(path).read_bytes()[:2] == b"PK":
                    raise FileFormatError(f"{path}: the {what} is an .npz archive; expected one array saved "
                                          "by np.save (.npy)") from error
                raise FileFormatError(f"{path}: the {what} is not a NumPy .npy file: {error}") from error
            found_shape, fortran, dtype = header
            if dtype.hasobject or dtype.kind not in "biuf":
                raise FileFormatError(f"{path}: the {what} holds {dtype} values; expected numbers")
            if tuple(found_shape) != tuple(shape):
                raise FileFormatError(f"{path}: the {what} holds an array of shape {tuple(found_shape)}; "
                                      f"expected {tuple(shape)}")
            needed = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            if size - handle.tell() < needed:
                raise FileFormatError(f"{path}: the {what} is truncated: {size - handle.tell()} bytes of data, "
                                      f"its header needs {needed}")
            values = np.frombuffer(handle.read(needed), dtype=dtype)
    except OSError as error:
        raise FileFormatError(f"{path}: cannot read the {what}: {error.strerror or error}") from error
    return values.reshape(shape, order="F" if fortran else "C").copy()
