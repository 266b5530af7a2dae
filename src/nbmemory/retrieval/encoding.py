"""Columns of strings as numbers: codes for repeated values, and string lists saved
as plain arrays (offsets and UTF-8 bytes, Arrow's layout) so a saved index loads
without pickle."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def codes_of(values: Sequence[str] | pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Each value's code (int32, first seen first) and the values by code."""
    array = (
        values if isinstance(values, pa.Array | pa.ChunkedArray) else pa.array(values, pa.string())
    )
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    encoded = pc.dictionary_encode(array)
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    return codes, encoded.dictionary.to_pylist()


def pack_strings(name: str, strings: Sequence[str]) -> dict[str, np.ndarray]:
    """Strings as two arrays (offsets, UTF-8 bytes), to save without pickling."""
    packed = pa.array(strings, type=pa.large_string())
    _, offsets_buffer, data_buffer = packed.buffers()
    if offsets_buffer is None or len(packed) == 0:
        offsets = np.zeros(1, dtype=np.int64)
    else:
        offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[: len(packed) + 1].copy()
    size = int(offsets[-1])
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8)[:size].copy()
        if data_buffer is not None and size
        else np.zeros(0, dtype=np.uint8)
    )
    return {f"{name}.offsets": offsets, f"{name}.data": data}


def sort_order(strings: Sequence[str]) -> np.ndarray:
    """The positions of ``strings`` in ascending order, as Python compares them (UTF-8
    byte order, which Arrow sorts by, is code point order)."""
    packed = pa.array(strings, type=pa.large_string())
    return pc.sort_indices(packed).to_numpy().astype(np.int64)


def permutation(values: np.ndarray | None, n: int) -> np.ndarray | None:
    """``values`` when they hold each of ``0 .. n-1`` once, else None (not saved, or
    not a sort order of ``n`` rows)."""
    if values is None or values.ndim != 1 or len(values) != n or values.dtype.kind not in "iu":
        return None
    if n and (values.min() < 0 or values.max() >= n or np.bincount(values, minlength=n).max() > 1):
        return None
    return np.asarray(values, dtype=np.int64)


def unpack_strings(arrays: dict[str, np.ndarray], name: str) -> list[str]:
    """The strings :func:`pack_strings` packed."""
    strings: list[str] = unpack_string_array(arrays, name).to_pylist()
    return strings


def unpack_string_array(arrays: dict[str, np.ndarray], name: str) -> pa.LargeStringArray:
    """The strings :func:`pack_strings` packed, as an Arrow array (no Python objects)."""
    offsets = np.ascontiguousarray(arrays[f"{name}.offsets"], dtype=np.int64)
    data = np.ascontiguousarray(arrays[f"{name}.data"], dtype=np.uint8)
    if offsets.size == 0 or offsets[0] != 0 or offsets[-1] != data.size:
        raise ValueError(f"saved strings {name!r} are inconsistent")
    if np.any(np.diff(offsets) < 0):
        raise ValueError(f"saved strings {name!r} are inconsistent")
    strings = pa.LargeStringArray.from_buffers(
        len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(data)
    )
    strings.validate(full=True)
    return strings
