"""Reading files a user hands to timerl (weights, workloads, logs) and naming files after user strings.

Every failure is a `FileFormatError` naming the file and what is wrong with it; nothing is allocated at the
size a file's header claims before the claim is checked against what the caller expects and the file's size;
a name built from a user's string (a run name, a dump name) stays inside its folder.
"""

from __future__ import annotations

import gzip
import json
import os
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
    """The deepest nesting of ``[`` and ``{`` outside JSON strings."""
    depth = deepest = 0
    inside = escaped = False
    for char in text:
        if inside:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                inside = False
        elif char == '"':
            inside = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def read_json(path: str | os.PathLike, what: str) -> Any:
    """A JSON file, gzipped when its name ends in ``.gz``."""
    data = read_bytes(path, what)
    if str(path).endswith(".gz"):
        data = gunzip(data, path, what)
    return parse_json(data, path, what)


def read_npy(path: str | os.PathLike, what: str, shape: tuple[int, ...]) -> np.ndarray:
    """One array of ``shape`` saved by ``np.save``, any real numeric dtype. The header is checked (format,
    dtype, shape, and that the file holds that many bytes) before anything of that size is read."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            try:
                version = np.lib.format.read_magic(handle)
                readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
                if version not in readers:
                    raise ValueError(f".npy format version {version} is not supported")
                header = readers[version](handle)  # shape, fortran order, dtype
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
