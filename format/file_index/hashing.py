"""The hash functions file indexes depend on, bit for bit as Java computes them.

- ``thomas_wang_hash``: ``FastHash.getLongHash`` (Thomas Wang's 64-bit integer mix with
  arithmetic shifts), the bloom-filter hash of numeric, date/time and timestamp keys.
- ``xxh64``: XXH64 with seed 0 (``LongHashFunction.xx()`` of zero-allocation-hashing 0.16),
  the bloom-filter hash of string and binary keys.
- ``murmur_hash``: Paimon's ``MurmurHashUtils.hashBytes`` (Murmur3 x86 32-bit, seed 42,
  tail bytes mixed one signed byte at a time), i.e. ``BinaryString.hashCode()``.

Java: ``fileindex/bloomfilter/FastHash.java``, ``utils/MurmurHashUtils.java`` (apache/paimon
``5dacde516b``).
"""

from __future__ import annotations

import struct

_M64 = 0xFFFFFFFFFFFFFFFF
_M32 = 0xFFFFFFFF
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5


def _signed64(value: int) -> int:
    value &= _M64
    return value - (1 << 64) if value >> 63 else value


def thomas_wang_hash(key: int) -> int:
    """``FastHash.getLongHash(key)`` of a signed 64-bit ``key``, as a signed long."""
    key = _signed64(~key + (key << 21))
    key ^= key >> 24
    key = _signed64(key + (key << 3) + (key << 8))
    key ^= key >> 14
    key = _signed64(key + (key << 2) + (key << 4))
    key ^= key >> 28
    return _signed64(key + (key << 31))


def _rotl64(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _M64


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _M64
    return (_rotl64(acc, 31) * _P1) & _M64


def xxh64(data: bytes) -> int:
    """XXH64 of ``data`` with seed 0, as a signed long."""
    n = len(data)
    pos = 0
    if n >= 32:
        v1, v2, v3, v4 = (_P1 + _P2) & _M64, _P2, 0, (-_P1) & _M64
        for a, b, c, d in struct.iter_unpack("<4Q", data[:n - n % 32]):
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
        pos = n - n % 32
        h = (_rotl64(v1, 1) + _rotl64(v2, 7) + _rotl64(v3, 12) + _rotl64(v4, 18)) & _M64
        for v in (v1, v2, v3, v4):
            h = ((h ^ _round(0, v)) * _P1 + _P4) & _M64
    else:
        h = _P5
    h = (h + n) & _M64
    while pos + 8 <= n:
        (lane,) = struct.unpack_from("<Q", data, pos)
        h = (_rotl64(h ^ _round(0, lane), 27) * _P1 + _P4) & _M64
        pos += 8
    if pos + 4 <= n:
        (word,) = struct.unpack_from("<I", data, pos)
        h = (_rotl64(h ^ (word * _P1 & _M64), 23) * _P2 + _P3) & _M64
        pos += 4
    for byte in data[pos:]:
        h = (_rotl64(h ^ (byte * _P5 & _M64), 11) * _P1) & _M64
    h = ((h ^ (h >> 33)) * _P2) & _M64
    h = ((h ^ (h >> 29)) * _P3) & _M64
    return _signed64(h ^ (h >> 32))


def _rotl32(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (32 - bits))) & _M32


def _mix(h1: int, k1: int) -> int:
    k1 = (_rotl32((k1 * 0xCC9E2D51) & _M32, 15) * 0x1B873593) & _M32
    return (_rotl32(h1 ^ k1, 13) * 5 + 0xE6546B64) & _M32


def murmur_hash(data: bytes, seed: int = 42) -> int:
    """``MurmurHashUtils.hashBytes(data)``: ``BinaryString.hashCode()``, as a signed int."""
    n = len(data)
    aligned = n - n % 4
    h1 = seed & _M32
    for (word,) in struct.iter_unpack("<I", data[:aligned]):
        h1 = _mix(h1, word)
    for byte in data[aligned:]:
        h1 = _mix(h1, (byte - 256 if byte > 127 else byte) & _M32)  # a signed Java byte
    h1 ^= n
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _M32
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _M32
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 >> 31 else h1
