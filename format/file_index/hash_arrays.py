"""The file-index hashes of ``hashing`` over whole numpy/Arrow arrays, bit for bit the same.

Bloom filters hash every distinct value of a data file's column; in Python that costs a few
microseconds a value. Here Thomas Wang's mix runs as numpy uint64 arithmetic (wrapping, with
arithmetic right shifts through an int64 view), and XXH64 runs over all values of one byte
length at once: every value of that length takes the same path through the algorithm, so
its stripes, lanes and tail bytes are columns of a (values x length) byte matrix.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)
_CHUNK_BYTES = 1 << 24  # bytes of one length group gathered at a time


def _sar(values: np.ndarray, bits: int) -> np.ndarray:
    """Arithmetic (sign-extending) right shift of uint64 words, as Java's ``>>`` on longs."""
    return (values.view(np.int64) >> np.int64(bits)).view(np.uint64)


def _shl(values: np.ndarray, bits: int) -> np.ndarray:
    return values << np.uint64(bits)


def thomas_wang_hashes(keys: np.ndarray) -> np.ndarray:
    """``FastHash.getLongHash`` of every int64 key, as int64."""
    k = keys.astype(np.int64).view(np.uint64)
    with np.errstate(over="ignore"):
        k = ~k + _shl(k, 21)
        k ^= _sar(k, 24)
        k = k + _shl(k, 3) + _shl(k, 8)
        k ^= _sar(k, 14)
        k = k + _shl(k, 2) + _shl(k, 4)
        k ^= _sar(k, 28)
        k = k + _shl(k, 31)
    return np.asarray(k.view(np.int64))


def _rotl(values: np.ndarray, bits: int) -> np.ndarray:
    return (values << np.uint64(bits)) | (values >> np.uint64(64 - bits))


def _round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    return _rotl(acc + lane * _P2, 31) * _P1


def _words(matrix: np.ndarray, start: int, width: int) -> np.ndarray:
    """Little-endian words of ``width`` bytes at column ``start`` of a byte matrix."""
    dtype = "<u8" if width == 8 else "<u4"
    return np.ascontiguousarray(matrix[:, start:start + width]).view(dtype)[:, 0].astype(
        np.uint64)


def _xxh64_of_length(matrix: np.ndarray, length: int) -> np.ndarray:
    """XXH64 (seed 0) of every row of a (values x ``length``) byte matrix."""
    count = matrix.shape[0]
    position = 0
    with np.errstate(over="ignore"):
        if length >= 32:
            v1 = np.full(count, _P1 + _P2, dtype=np.uint64)
            v2 = np.full(count, _P2, dtype=np.uint64)
            v3 = np.zeros(count, dtype=np.uint64)
            v4 = np.full(count, np.uint64(0) - _P1, dtype=np.uint64)
            for stripe in range(length // 32):
                base = stripe * 32
                v1 = _round(v1, _words(matrix, base, 8))
                v2 = _round(v2, _words(matrix, base + 8, 8))
                v3 = _round(v3, _words(matrix, base + 16, 8))
                v4 = _round(v4, _words(matrix, base + 24, 8))
            position = length - length % 32
            h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
            zero = np.zeros(count, dtype=np.uint64)
            for v in (v1, v2, v3, v4):
                h = (h ^ _round(zero, v)) * _P1 + _P4
        else:
            h = np.full(count, _P5, dtype=np.uint64)
        h = h + np.uint64(length)
        zero = np.zeros(count, dtype=np.uint64)
        while position + 8 <= length:
            h = _rotl(h ^ _round(zero, _words(matrix, position, 8)), 27) * _P1 + _P4
            position += 8
        if position + 4 <= length:
            h = _rotl(h ^ (_words(matrix, position, 4) * _P1), 23) * _P2 + _P3
            position += 4
        while position < length:
            h = _rotl(h ^ (matrix[:, position].astype(np.uint64) * _P5), 11) * _P1
            position += 1
        h = (h ^ (h >> np.uint64(33))) * _P2
        h = (h ^ (h >> np.uint64(29))) * _P3
        h = h ^ (h >> np.uint64(32))
    return np.asarray(h.view(np.int64))


def xxh64_hashes(values: pa.Array) -> np.ndarray:
    """XXH64 (seed 0) of every value of a binary or string array without nulls, as int64."""
    large = pa.types.is_large_binary(values.type) or pa.types.is_large_string(values.type)
    offset_type = "<i8" if large else "<i4"
    if values.null_count:
        raise ValueError("xxh64_hashes takes no nulls")
    buffers = values.buffers()
    offsets = np.frombuffer(buffers[1], dtype=offset_type)[
        values.offset:values.offset + len(values) + 1].astype(np.int64)
    data = (np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None
            else np.zeros(0, dtype=np.uint8))
    lengths = np.diff(offsets)
    out = np.empty(len(values), dtype=np.int64)
    for length in np.unique(lengths).tolist():
        rows = np.flatnonzero(lengths == length)
        step = max(1, _CHUNK_BYTES // max(length, 1))
        for start in range(0, len(rows), step):
            picked = rows[start:start + step]
            matrix = data[offsets[picked][:, None] + np.arange(length)] if length \
                else np.zeros((len(picked), 0), dtype=np.uint8)
            out[picked] = _xxh64_of_length(matrix, length)
    return out
