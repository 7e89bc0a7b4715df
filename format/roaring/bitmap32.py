"""RoaringBitmap's portable serialization, as Paimon's ``RoaringBitmap32`` writes and reads it.

Java ``RoaringBitmap32.serialize`` runs ``runOptimize()`` first; CRoaring's (pyroaring's)
``run_optimize`` picks the same containers, so the bytes match. Readers size a bitmap from
its own header (https://github.com/RoaringBitmap/RoaringFormatSpec), because Paimon often
stores bitmaps back to back without lengths, and turn every malformed input into
``CodecError``.
"""

from __future__ import annotations

import array
import struct

import numpy as np
from pyroaring import AbstractBitMap, BitMap

from paimond.errors import CodecError

_SERIAL_COOKIE = 12347  # with run containers; the container count is in the cookie
_SERIAL_COOKIE_NO_RUN = 12346
_NO_OFFSET_THRESHOLD = 4
_MAX_CONTAINERS = 1 << 16
_ARRAY_MAX = 4096
_BITMAP_BYTES = 8192


def bitmap_of(rows: np.ndarray) -> BitMap:
    """A bitmap of non-negative 32-bit numbers, built from the array's bytes (no Python ints)."""
    return BitMap(array.array("I", rows.astype(np.uint32).tobytes()))


def serialize_bitmap(bitmap: AbstractBitMap) -> bytes:
    """Portable bytes of ``bitmap`` after run optimization (the caller's bitmap is unchanged)."""
    optimized = BitMap(bitmap)
    optimized.run_optimize()
    return bytes(optimized.serialize())


def _need(data: bytes, end: int, what: str) -> None:
    if end > len(data):
        raise CodecError(f"truncated roaring bitmap: {what} needs {end} bytes, "
                         f"only {len(data)} present")


def bitmap_end(data: bytes, pos: int) -> int:
    """Position just after the portable bitmap starting at ``data[pos]``."""
    _need(data, pos + 4, "cookie")
    (cookie,) = struct.unpack_from("<I", data, pos)
    pos += 4
    if cookie & 0xFFFF == _SERIAL_COOKIE:
        count = (cookie >> 16) + 1
        _need(data, pos + (count + 7) // 8, "run flags")
        runs = data[pos:pos + (count + 7) // 8]
        pos += len(runs)
        has_offsets = count >= _NO_OFFSET_THRESHOLD
    elif cookie == _SERIAL_COOKIE_NO_RUN:
        _need(data, pos + 4, "container count")
        (count,) = struct.unpack_from("<I", data, pos)
        pos += 4
        runs = b""
        has_offsets = True
        if count > _MAX_CONTAINERS:
            raise CodecError(f"roaring bitmap with {count} containers (at most 65536)")
    else:
        raise CodecError(f"not a roaring bitmap: cookie {cookie:#x}")
    _need(data, pos + 4 * count, "container headers")
    cardinalities = struct.unpack_from(f"<{2 * count}H", data, pos)[1::2]
    pos += 4 * count + (4 * count if has_offsets else 0)
    for i, cardinality_minus_one in enumerate(cardinalities):
        if runs and runs[i // 8] >> (i % 8) & 1:
            _need(data, pos + 2, "run count")
            (run_count,) = struct.unpack_from("<H", data, pos)
            pos += 2 + 4 * run_count
        elif cardinality_minus_one < _ARRAY_MAX:
            pos += 2 * (cardinality_minus_one + 1)
        else:
            pos += _BITMAP_BYTES
    _need(data, pos, "containers")
    return pos


def read_bitmap(data: bytes, pos: int, length: int | None = None) -> tuple[BitMap, int]:
    """The bitmap at ``data[pos]`` and the position after it.

    ``length``, when the format records one, must equal the bitmap's own size."""
    end = bitmap_end(data, pos)
    if length is not None and end - pos != length:
        raise CodecError(f"roaring bitmap of {end - pos} bytes where {length} were recorded")
    try:
        return BitMap.deserialize(bytes(data[pos:end])), end
    except (ValueError, IndexError, OverflowError) as e:
        raise CodecError(f"malformed roaring bitmap: {e}") from None
