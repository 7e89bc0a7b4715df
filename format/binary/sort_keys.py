"""Sort keys of Paimon's clustering strategies: the byte strings Java sorts rows by for
``zorder`` (``ZIndexer``, ``ZOrderByteUtils``) and ``hilbert`` (``HilbertIndexer``, which
indexes with davidmoten's ``HilbertCurve`` at 63 bits, and ``ConvertBinaryUtil``),
apache/paimon 5dacde516b ``paimon-common/.../sort``. Rows sort by these keys as unsigned
bytes, lexicographically.

Values are given per row and column as paimond reads them: integers (TINYINT..BIGINT, DATE
as epoch days, TIME as millis of day), floats, bools, ``str`` (CHAR/VARCHAR), ``bytes``
(BINARY/VARBINARY), ``decimal.Decimal``, TIMESTAMP / TIMESTAMP_LTZ as epoch millis, None for
null. Nested types, VARIANT and BLOB are refused, as Java does.

Z-order: each column becomes 8 bytes (``zorder.var-length-contribution`` bytes for character
and binary columns) that order as the values do; the key interleaves their bits, most
significant first, one column after the other. Hilbert: each column becomes a 64-bit
integer (nulls ``Long.MAX_VALUE``) whose low 63 bits are a coordinate; the key is the
point's index on the 63-bit Hilbert curve, as Java's ``BigInteger.toByteArray`` padded or cut
to 63 bytes.
"""

from __future__ import annotations

import decimal
import struct
from collections.abc import Sequence

from paimond.errors import UnsupportedError
from paimond.format.types.data_types import (
    BigIntType,
    BinaryType,
    BooleanType,
    CharType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    LocalZonedTimestampType,
    SmallIntType,
    TimestampType,
    TimeType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
)

PRIMITIVE_BYTES = 8
HILBERT_BITS = 63
_LONG_MAX = 2**63 - 1
_MASK64 = 2**64 - 1
_INTEGRAL = (TinyIntType, SmallIntType, IntType, BigIntType, DateType, TimeType)
_FLOATING = (FloatType, DoubleType)
_TIMESTAMPS = (TimestampType, LocalZonedTimestampType)
_VAR = (CharType, VarCharType, BinaryType, VarBinaryType)


def sortable(data_type: DataType) -> bool:
    """Whether the z-order and Hilbert indexers take this column type."""
    return isinstance(data_type, (*_INTEGRAL, *_FLOATING, *_TIMESTAMPS, *_VAR, BooleanType,
                                  DecimalType))


def _check(data_type: DataType) -> None:
    if not sortable(data_type):
        raise UnsupportedError(f"clustering by a {data_type} column")


def _double_bits(value: float) -> int:
    """Java ``Double.doubleToLongBits`` (a FLOAT widened to double first), unsigned."""
    return int.from_bytes(struct.pack(">d", value), "big")


def _signed(value: int) -> int:
    value &= _MASK64
    return value - (1 << 64) if value >> 63 else value


def _as_int(value: object) -> int:
    if not isinstance(value, int):
        raise TypeError(f"an integer column value, not {value!r}")
    return value


def _as_float(value: object) -> float:
    if not isinstance(value, int | float):
        raise TypeError(f"a floating column value, not {value!r}")
    return float(value)


def _as_bytes(value: object) -> bytes:
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"a character or binary column value, not {value!r}")


def _fill(data: bytes, length: int) -> bytes:
    """``ZOrderByteUtils.byteTruncateOrFill``."""
    return data[:length].ljust(length, b"\x00")


def _unscaled_bytes(value: decimal.Decimal, scale: int) -> bytes:
    """Java ``BigInteger.toByteArray`` of the unscaled value (two's complement, minimal)."""
    unscaled = int(value.scaleb(scale).to_integral_value(rounding=decimal.ROUND_HALF_UP))
    return unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big", signed=True)


def zorder_column_bytes(value: object, data_type: DataType, var_type_size: int = 8) -> bytes:
    """One column's contribution to the z-order key (Java ``ZIndexer.TypeVisitor``)."""
    _check(data_type)
    var = isinstance(data_type, _VAR)
    if value is None:
        return bytes(var_type_size if var else PRIMITIVE_BYTES)
    if isinstance(data_type, BooleanType):
        return (b"\x81" if value else b"\x00") + bytes(7)
    if isinstance(data_type, (*_INTEGRAL, *_TIMESTAMPS)):
        return ((_as_int(value) & _MASK64) ^ (1 << 63)).to_bytes(8, "big")
    if isinstance(data_type, _FLOATING):
        bits = _signed(_double_bits(_as_float(value)))
        return ((bits ^ ((bits >> 31) | -(1 << 63))) & _MASK64).to_bytes(8, "big")
    if isinstance(data_type, DecimalType):
        assert isinstance(value, decimal.Decimal)
        return _fill(_unscaled_bytes(value, data_type.scale), PRIMITIVE_BYTES)
    return _fill(_as_bytes(value), var_type_size)


def interleave_bits(columns: Sequence[bytes]) -> bytes:
    """``ZOrderByteUtils.interleaveBits``: bit i of every column in turn, from the most
    significant, skipping columns whose bytes are used up."""
    total = sum(len(c) for c in columns)
    values = [int.from_bytes(c, "big") for c in columns]
    widths = [len(c) * 8 for c in columns]
    out = 0
    for bit in range(max(widths, default=0)):
        for value, width in zip(values, widths, strict=True):
            if bit < width:
                out = out << 1 | (value >> (width - 1 - bit)) & 1
    return out.to_bytes(total, "big")


def zorder_key(values: Sequence[object], types: Sequence[DataType], var_type_size: int = 8
               ) -> bytes:
    """Java ``ZIndexer.index`` of one row's clustering columns."""
    return interleave_bits([zorder_column_bytes(v, t, var_type_size)
                            for v, t in zip(values, types, strict=True)])


def _bytes_to_long(data: bytes) -> int:
    """``ConvertBinaryUtil.convertBytesToLong``: the first 8 bytes, or fewer right-aligned."""
    return _signed(int.from_bytes(data[:8].rjust(8, b"\x00"), "big"))


def hilbert_column_value(value: object, data_type: DataType) -> int:
    """One column's coordinate as Java's signed long (``HilbertIndexer.TypeVisitor``)."""
    _check(data_type)
    if value is None:
        return _LONG_MAX
    if isinstance(data_type, BooleanType):
        return _LONG_MAX if value else 0
    if isinstance(data_type, TinyIntType):
        return _as_int(value) & 0xFF
    if isinstance(data_type, (*_INTEGRAL, *_TIMESTAMPS)):
        return _signed(_as_int(value))
    if isinstance(data_type, _FLOATING):
        return _signed(_double_bits(_as_float(value)))
    if isinstance(data_type, DecimalType):
        assert isinstance(value, decimal.Decimal)
        return _signed(int(value))  # BigDecimal.longValue: truncated toward zero
    return _bytes_to_long(_as_bytes(value))


def hilbert_index(point: Sequence[int], bits: int = HILBERT_BITS) -> int:
    """davidmoten ``HilbertCurve.index`` (Skilling's transform) on 64-bit coordinates."""
    x = [p & _MASK64 for p in point]
    n, top = len(x), 1 << (bits - 1)
    q = top
    while q > 1:
        p = q - 1
        for i in range(n):
            if x[i] & q:
                x[0] ^= p
            else:
                t = (x[0] ^ x[i]) & p
                x[0] ^= t
                x[i] ^= t
        q >>= 1
    for i in range(1, n):
        x[i] ^= x[i - 1]
    t, q = 0, top
    while q > 1:
        if x[n - 1] & q:
            t ^= q - 1
        q >>= 1
    x = [v ^ t for v in x]
    index = 0
    for shift in range(bits - 1, -1, -1):
        for v in x:
            index = index << 1 | (v >> shift) & 1
    return index


def hilbert_key(values: Sequence[object], types: Sequence[DataType]) -> bytes:
    """Java ``HilbertIndexer.index`` of one row's clustering columns (at least two)."""
    if len(values) < 2:
        raise UnsupportedError("Hilbert sort needs at least two columns")
    index = hilbert_index([hilbert_column_value(v, t) for v, t in zip(values, types, strict=True)])
    raw = index.to_bytes(index.bit_length() // 8 + 1, "big")  # BigInteger.toByteArray
    return raw[:HILBERT_BITS] if len(raw) >= HILBERT_BITS else raw.rjust(HILBERT_BITS, b"\x00")
