"""Scalar values of the ``.row`` compact row encoding, and its unsigned varints.

Java: ``BlockOutput`` and ``BlockInput`` (``paimon-format/.../format/row/``), apache/paimon
2.1-SNAPSHOT at commit 5dacde5. Primitives are little-endian at their natural width (BOOLEAN one
byte 0/1); CHAR/VARCHAR and BINARY/VARBINARY are ``varint length | bytes``; DECIMAL is an int64
unscaled value up to precision 18, else ``varint length | minimal big-endian two's complement``
(``BigInteger.toByteArray``); TIMESTAMP and TIMESTAMP_LTZ are int64 epoch millis, plus ``varint
nano-of-milli`` above precision 3. Varints are unsigned LEB128 of at most 5 bytes.

Values come in two dialects (see ``row_codec``): Python values of ``paimond.format.types.values``, or
the Arrow dialect, where timestamps are integers in their Arrow unit, strings UTF-8 bytes and
DECIMALs up to precision 18 their unscaled int64.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from paimond.errors import CodecError
from paimond.format.types.data_types import DataType, DecimalType, LocalZonedTimestampType, TimestampType
from paimond.format.types.values import Timestamp

Encoder = Callable[[bytearray, Any], None]
"""Append one non-null value to the buffer."""
Decoder = Callable[[bytes, int], tuple[Any, int]]
"""``(data, position) -> (value, next position)``; raises IndexError/struct.error past the data."""

PLAIN_CODES = {"BOOLEAN": "?", "TINYINT": "b", "SMALLINT": "h", "INT": "i", "DATE": "i",
               "TIME": "i", "BIGINT": "q", "FLOAT": "f", "DOUBLE": "d"}
"""struct codes of the types whose Python value is exactly what struct unpacks."""
_LONG = struct.Struct("<q")
_UINT32_LIMIT = 1 << 32


@dataclass(frozen=True, slots=True)
class FieldCodec:
    encode: Encoder
    decode: Decoder
    code: str = ""
    """struct code when the value is a plain fixed-width primitive, so runs of them pack at once."""


def scalar_field(data_type: DataType, arrow: bool) -> FieldCodec | None:
    """The codec of a non-nested type in one dialect, None for other types."""
    name = data_type.name
    code = PLAIN_CODES.get(name)
    if code is not None:
        return plain_field(code)
    if name in ("CHAR", "VARCHAR"):
        return FieldCodec(write_bytes, read_bytes) if arrow else FieldCodec(_write_str, _read_str)
    if name in ("BINARY", "VARBINARY"):
        return FieldCodec(write_bytes, read_bytes)
    if isinstance(data_type, DecimalType):
        if arrow and data_type.precision <= 18:
            return plain_field("q")  # the unscaled value; row_arrow checks the precision
        return _decimal_field(data_type.precision, data_type.scale)
    if isinstance(data_type, (TimestampType, LocalZonedTimestampType)):
        return _arrow_timestamp_field(data_type.precision) if arrow \
            else _timestamp_field(data_type.precision)
    return None


# ---------------------------------------------------------------- varints

def encode_varint(value: int) -> bytes:
    """Unsigned LEB128 of a 32-bit value (Java ``writeVarInt``; an int32 as its uint32 bits)."""
    if not 0 <= value < _UINT32_LIMIT:
        raise ValueError(f"varint value {value} is not an unsigned 32-bit integer")
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


def decode_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The uint32 varint at ``pos`` and the position after it; at most 5 bytes."""
    result = shift = 0
    while True:
        if pos >= len(data):
            raise CodecError(f"varint runs past the end of {len(data)} bytes")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if shift > 28:
            raise CodecError("varint longer than 5 bytes")
    if result >= _UINT32_LIMIT:
        raise CodecError(f"varint {result} exceeds 32 bits")
    return result, pos


def write_varint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """``decode_varint`` with the common one- to three-byte cases inline."""
    first = data[pos]
    if first < 0x80:
        return first, pos + 1
    second = data[pos + 1]
    if second < 0x80:
        return first & 0x7F | second << 7, pos + 2
    third = data[pos + 2]
    if third < 0x80:
        return first & 0x7F | (second & 0x7F) << 7 | third << 14, pos + 3
    return decode_varint(data, pos)


# ---------------------------------------------------------------- values

@functools.lru_cache(maxsize=16)
def plain_field(code: str) -> FieldCodec:
    packer = struct.Struct("<" + code)
    pack, unpack_from, size = packer.pack, packer.unpack_from, packer.size

    def encode(out: bytearray, value: Any) -> None:
        out += pack(value)

    def decode(data: bytes, pos: int) -> tuple[Any, int]:
        return unpack_from(data, pos)[0], pos + size

    return FieldCodec(encode, decode, code)


def write_bytes(out: bytearray, value: Any) -> None:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(value).__name__}")
    if len(value) < 0x80:
        out.append(len(value))
    else:
        write_varint(out, len(value))
    out += value


def read_bytes(data: bytes, pos: int) -> tuple[bytes, int]:
    length, pos = read_varint(data, pos)
    end = pos + length
    if end > len(data):
        raise CodecError(f"{length} bytes at {pos} run past the end of {len(data)}")
    return data[pos:end], end


def _write_str(out: bytearray, value: Any) -> None:
    encoded = value.encode("utf-8", "surrogateescape")
    write_varint(out, len(encoded))
    out += encoded


def _read_str(data: bytes, pos: int) -> tuple[str, int]:
    raw, pos = read_bytes(data, pos)
    return raw.decode("utf-8", "surrogateescape"), pos


def _decimal_field(precision: int, scale: int) -> FieldCodec:
    """``Decimal`` values with exactly ``scale`` digits (the Arrow dialect uses this codec only
    above precision 18)."""
    bound, exponent = 10 ** precision, f"E-{scale}"

    def unscaled_of(value: Any) -> int:
        if not isinstance(value, (Decimal, int)) or isinstance(value, bool):
            raise TypeError(f"expected Decimal, got {type(value).__name__}")
        numerator, denominator = value.as_integer_ratio()
        unscaled, remainder = divmod(numerator * 10 ** scale, denominator)
        if remainder or not -bound < unscaled < bound:
            raise ValueError(f"{value} does not fit DECIMAL({precision}, {scale}) exactly")
        return int(unscaled)

    def to_decimal(unscaled: int) -> Decimal:
        if not -bound < unscaled < bound:
            raise CodecError(f"unscaled value {unscaled} exceeds DECIMAL({precision}, {scale})")
        return Decimal(f"{unscaled}{exponent}")

    if precision <= 18:
        def encode_compact(out: bytearray, value: Any) -> None:
            out += _LONG.pack(unscaled_of(value))

        def decode_compact(data: bytes, pos: int) -> tuple[Decimal, int]:
            return to_decimal(_LONG.unpack_from(data, pos)[0]), pos + 8

        return FieldCodec(encode_compact, decode_compact)

    def encode(out: bytearray, value: Any) -> None:
        unscaled = unscaled_of(value)
        length = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
        write_varint(out, length)
        out += unscaled.to_bytes(length, "big", signed=True)

    def decode(data: bytes, pos: int) -> tuple[Decimal, int]:
        raw, pos = read_bytes(data, pos)
        if not raw:  # Java's BigInteger rejects zero-length magnitudes
            raise CodecError(f"DECIMAL({precision}, {scale}) of zero bytes")
        return to_decimal(int.from_bytes(raw, "big", signed=True)), pos

    return FieldCodec(encode, decode)


def _timestamp_field(precision: int) -> FieldCodec:
    """``values.Timestamp``; up to precision 3 only the millis are stored (nanos dropped, as
    Java's ``getMillisecond``)."""
    if precision <= 3:
        def encode_millis(out: bytearray, value: Any) -> None:
            out += _LONG.pack(value.millis)

        def decode_millis(data: bytes, pos: int) -> tuple[Timestamp, int]:
            return Timestamp(_LONG.unpack_from(data, pos)[0]), pos + 8

        return FieldCodec(encode_millis, decode_millis)

    def encode(out: bytearray, value: Any) -> None:
        out += _LONG.pack(value.millis)
        write_varint(out, value.nano_of_milli)

    def decode(data: bytes, pos: int) -> tuple[Timestamp, int]:
        millis = _LONG.unpack_from(data, pos)[0]
        nano_of_milli, pos = read_varint(data, pos + 8)
        return Timestamp(millis, nano_of_milli), pos  # rejects nano_of_milli > 999999

    return FieldCodec(encode, decode)


def _arrow_timestamp_field(precision: int) -> FieldCodec:
    """Integers in the Arrow unit: s (precision 0), ms (1-3), us (4-6), ns (7-9)."""
    if 1 <= precision <= 3:
        return plain_field("q")
    if precision == 0:
        def encode_seconds(out: bytearray, value: Any) -> None:
            out += _LONG.pack(value * 1000)

        def decode_seconds(data: bytes, pos: int) -> tuple[int, int]:
            return _LONG.unpack_from(data, pos)[0] // 1000, pos + 8

        return FieldCodec(encode_seconds, decode_seconds)
    per_milli = 1000 if precision <= 6 else 1_000_000
    nanos_per_unit = 1_000_000 // per_milli

    def encode(out: bytearray, value: Any) -> None:
        millis, rest = divmod(value, per_milli)
        out += _LONG.pack(millis)
        write_varint(out, rest * nanos_per_unit)

    def decode(data: bytes, pos: int) -> tuple[int, int]:
        millis = _LONG.unpack_from(data, pos)[0]
        nano_of_milli, pos = read_varint(data, pos + 8)
        if nano_of_milli > 999_999:
            raise CodecError(f"nano-of-millisecond {nano_of_milli} > 999999")
        return millis * per_milli + nano_of_milli // nanos_per_unit, pos

    return FieldCodec(encode, decode)
