"""The compact row serializer inside ``.row`` blocks, and the delta varints of its index.

Java: ``RowBlockWriter`` and ``RowBlockReader`` (``paimon-format/.../format/row/``) and
``DeltaVarintCompressor`` (``paimon-common/.../utils/``), apache/paimon 2.1-SNAPSHOT at commit
5dacde5. Layout per ``shared/seeds/row-file-format-spec.txt``.

A row is ``null bitmap (ceil(arity / 8) bytes, bit i = field i) | non-null fields in order``,
each scalar encoded as in ``row_scalars``. ARRAY is ``varint size | null bitmap | non-null
elements``; MAP is its key array then its value array; MULTISET is a map to nullable INT counts;
ROW nests the row layout; VECTOR is ``varint size | elements`` without a bitmap. VARIANT and
BLOB have no Python value (``values``), so they raise :class:`UnsupportedError`. Bitmap bits
past the arity are ignored, as Java ignores them.

Two value dialects share one codec. The Python dialect follows ``paimond.format.types.values``. The
Arrow dialect is what ``row_arrow`` exchanges with Arrow: timestamps are integers in the Arrow
unit of ``arrow_types.timestamp_unit`` (precision 0 keeps whole seconds, as pypaimon does),
strings stay UTF-8 ``bytes``, so Arrow validates them in one cast, and DECIMALs up to precision
18 are their unscaled int64, which Arrow views as decimals and checks in one pass.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from paimond.errors import CodecError, UnsupportedError
from paimond.format.row_file.scalars import (
    PLAIN_CODES,
    Decoder,
    FieldCodec,
    decode_varint,
    encode_varint,
    read_varint,
    scalar_field,
    write_varint,
)
from paimond.format.types.data_types import (
    ArrayType,
    DataType,
    IntType,
    MapType,
    MultisetType,
    RowType,
    VectorType,
)

__all__ = ["DECODE_ERRORS", "RowCodec", "decode_delta_varints", "decode_row", "decode_varint",
           "encode_delta_varints", "encode_row", "encode_varint", "row_codec"]

DECODE_ERRORS = (CodecError, IndexError, struct.error, ValueError)
"""What decoding malformed bytes can raise; callers turn these into a corrupt-file error."""

_VECTOR_ELEMENTS = frozenset(("BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE"))
_INT64_MIN, _UINT64 = -(1 << 63), 1 << 64


# ---------------------------------------------------------------- delta varints

def encode_delta_varints(values: Iterable[int]) -> bytes:
    """Java ``DeltaVarintCompressor.compress``: int64 deltas (the first from 0, wrapping like a
    Java long), zigzag, then LEB128."""
    out, previous = bytearray(), 0
    for value in values:
        if not _INT64_MIN <= value < -_INT64_MIN:
            raise ValueError(f"{value} is not a 64-bit integer")
        delta = (value - previous + (1 << 63)) % _UINT64 - (1 << 63)
        zigzag = (delta << 1) ^ (delta >> 63)
        while zigzag > 0x7F:
            out.append(zigzag & 0x7F | 0x80)
            zigzag >>= 7
        out.append(zigzag)
        previous = value
    return bytes(out)


def decode_delta_varints(data: bytes) -> list[int]:
    """Java ``DeltaVarintCompressor.decompress``; the whole of ``data`` must be varints."""
    values: list[int] = []
    pos, previous = 0, 0
    while pos < len(data):
        zigzag = shift = 0
        while True:
            if pos >= len(data):
                raise CodecError("delta varint runs past the end of its array")
            byte = data[pos]
            pos += 1
            zigzag |= (byte & 0x7F) << shift
            if byte < 0x80:
                break
            shift += 7
            if shift > 63:
                raise CodecError("delta varint longer than 10 bytes")
        if zigzag >= _UINT64:
            raise CodecError("delta varint exceeds 64 bits")
        delta = (zigzag >> 1) ^ -(zigzag & 1)
        previous = (previous + delta + (1 << 63)) % _UINT64 - (1 << 63)
        values.append(previous)
    return values


# ---------------------------------------------------------------- rows

@dataclass(frozen=True, slots=True)
class RowCodec:
    """Serializer of one row type in one dialect. ``decode`` may raise any of
    :data:`DECODE_ERRORS` on malformed bytes and does not check where the row ends."""

    row_type: RowType
    encode: Callable[[bytearray, Sequence[Any]], None]
    decode: Callable[[bytes, int], tuple[list[Any], int]]


@functools.lru_cache(maxsize=256)
def row_codec(row_type: RowType, *, arrow: bool = False) -> RowCodec:
    """The codec of ``row_type``; raises UnsupportedError for VARIANT and BLOB fields."""
    fields = [_field(f.type, arrow) for f in row_type.fields]
    encode, decode = _row_functions(fields, [f.name for f in row_type.fields])

    def checked_encode(out: bytearray, values: Sequence[Any]) -> None:
        try:
            encode(out, values)
        except (TypeError, AttributeError) as exc:
            raise TypeError(f"row does not fit {row_type}: {exc}") from None
        except (struct.error, OverflowError, ValueError) as exc:
            raise ValueError(f"row does not fit {row_type}: {exc}") from None

    return RowCodec(row_type, checked_encode, decode)


def encode_row(values: Sequence[Any], row_type: RowType) -> bytes:
    """One row in the ``.row`` block encoding (Python dialect)."""
    out = bytearray()
    row_codec(row_type).encode(out, values)
    return bytes(out)


def decode_row(data: bytes, row_type: RowType) -> tuple[Any, ...]:
    """The row that is exactly ``data`` (Python dialect); raises CodecError."""
    data = bytes(data)
    try:
        values, end = row_codec(row_type).decode(data, 0)
    except DECODE_ERRORS as exc:
        raise CodecError(f"malformed row: {exc}") from None
    if end != len(data):
        raise CodecError(f"row ends at byte {end}, not at its end {len(data)}")
    return tuple(values)


def _steps(fields: list[FieldCodec]) -> tuple[list[tuple[int, int, Any]],
                                              list[tuple[Any, int, Decoder]]]:
    """How rows without NULLs are encoded and decoded: a run of plain fields is one struct
    call, each other field one closure call. Encode steps are ``(first field, stop or 0, pack
    or encoder)``, decode steps ``(unpack_from or None, size, decoder)``."""
    encode_steps: list[tuple[int, int, Any]] = []
    decode_steps: list[tuple[Any, int, Decoder]] = []
    start = 0
    while start < len(fields):
        stop = start
        while stop < len(fields) and fields[stop].code:
            stop += 1
        if stop > start:
            packer = struct.Struct("<" + "".join(f.code for f in fields[start:stop]))
            encode_steps.append((start, stop, packer.pack))
            decode_steps.append((packer.unpack_from, packer.size, fields[start].decode))
            start = stop
        else:
            encode_steps.append((start, 0, fields[start].encode))
            decode_steps.append((None, 0, fields[start].decode))
            start += 1
    return encode_steps, decode_steps


def _row_functions(fields: list[FieldCodec], names: list[str]) -> tuple[
        Callable[[bytearray, Sequence[Any]], None], Callable[[bytes, int], tuple[list[Any], int]]]:
    """Encoder and decoder of a row (a Mapping is taken by field name)."""
    arity, header_size = len(fields), (len(fields) + 7) // 8
    zero_header, mask = bytes(header_size), (1 << arity) - 1
    encoders, decoders = [f.encode for f in fields], [f.decode for f in fields]
    encode_steps, decode_steps = _steps(fields)
    one_byte_header = header_size == 1

    def encode(out: bytearray, values: Any) -> None:
        if isinstance(values, Mapping):  # Arrow's to_pylist gives structs as dicts
            values = [values[name] for name in names]
        if len(values) != arity:
            raise ValueError(f"{len(values)} values for a row of {arity} fields")
        if None not in values:
            out += zero_header
            for first, stop, encoder in encode_steps:
                if stop:
                    out += encoder(*values[first:stop])
                else:
                    encoder(out, values[first])
            return
        header = bytearray(header_size)
        for i, value in enumerate(values):
            if value is None:
                header[i >> 3] |= 1 << (i & 7)
        out += header
        for value, encoder in zip(values, encoders, strict=True):
            if value is not None:
                encoder(out, value)

    def decode(data: bytes, pos: int) -> tuple[list[Any], int]:
        if one_byte_header:
            nulls = data[pos] & mask
        else:
            nulls = int.from_bytes(data[pos:pos + header_size], "little") & mask
        pos += header_size
        values: list[Any] = []
        if not nulls:
            for unpack_from, size, decoder in decode_steps:
                if unpack_from is None:
                    value, pos = decoder(data, pos)
                    values.append(value)
                else:
                    values += unpack_from(data, pos)
                    pos += size
            return values, pos
        for i, decoder in enumerate(decoders):
            if nulls >> i & 1:
                values.append(None)
            else:
                value, pos = decoder(data, pos)
                values.append(value)
        return values, pos

    return encode, decode


# ---------------------------------------------------------------- fields

def _field(data_type: DataType, arrow: bool) -> FieldCodec:
    scalar = scalar_field(data_type, arrow)
    if scalar is not None:
        return scalar
    if isinstance(data_type, ArrayType):
        return _array_field(_field(data_type.element, arrow))
    if isinstance(data_type, MapType):
        return _map_field(_field(data_type.key, arrow), _field(data_type.value, arrow))
    if isinstance(data_type, MultisetType):
        return _map_field(_field(data_type.element, arrow), _field(IntType(), arrow))
    if isinstance(data_type, VectorType) and data_type.element.name in _VECTOR_ELEMENTS:
        return _vector_field(PLAIN_CODES[data_type.element.name])
    if isinstance(data_type, RowType):
        encode, decode = _row_functions([_field(f.type, arrow) for f in data_type.fields],
                                        [f.name for f in data_type.fields])

        def decode_nested(data: bytes, pos: int) -> tuple[tuple[Any, ...], int]:
            values, pos = decode(data, pos)
            return tuple(values), pos

        return FieldCodec(encode, decode_nested)
    raise UnsupportedError(f".row codec does not support {data_type.name} ({data_type})")


# ---------------------------------------------------------------- collections

def _write_elements(out: bytearray, values: Sequence[Any], element: FieldCodec) -> None:
    size = len(values)
    write_varint(out, size)
    if element.code and None not in values:
        out += bytes((size + 7) // 8)
        out += struct.pack(f"<{size}{element.code}", *values)
        return
    header = bytearray((size + 7) // 8)
    for i, value in enumerate(values):
        if value is None:
            header[i >> 3] |= 1 << (i & 7)
    out += header
    encoder = element.encode
    for value in values:
        if value is not None:
            encoder(out, value)


def _read_elements(data: bytes, pos: int, element: FieldCodec) -> tuple[list[Any], int]:
    size, pos = read_varint(data, pos)
    header_size = (size + 7) // 8
    if pos + header_size > len(data):  # bounds the loop below by the data, not the varint
        raise CodecError(f"array of {size} elements runs past the end of {len(data)} bytes")
    nulls = int.from_bytes(data[pos:pos + header_size], "little") & ((1 << size) - 1)
    pos += header_size
    if not nulls and element.code:
        packer = struct.Struct(f"<{size}{element.code}")
        return list(packer.unpack_from(data, pos)), pos + packer.size
    values: list[Any] = []
    decoder = element.decode
    for i in range(size):
        if nulls >> i & 1:
            values.append(None)
        else:
            value, pos = decoder(data, pos)
            values.append(value)
    return values, pos


def _array_field(element: FieldCodec) -> FieldCodec:
    def encode(out: bytearray, value: Any) -> None:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"expected a list for ARRAY, got {type(value).__name__}")
        _write_elements(out, value, element)

    def decode(data: bytes, pos: int) -> tuple[list[Any], int]:
        return _read_elements(data, pos, element)

    return FieldCodec(encode, decode)


def _map_field(key: FieldCodec, value: FieldCodec) -> FieldCodec:
    """Entries are ``(key, value)`` pairs in stored order (a Mapping is accepted too)."""

    def encode(out: bytearray, entries: Any) -> None:
        if isinstance(entries, Mapping):
            entries = list(entries.items())
        if not isinstance(entries, (list, tuple)):
            raise TypeError(f"expected a list of pairs for MAP, got {type(entries).__name__}")
        _write_elements(out, [k for k, _ in entries], key)
        _write_elements(out, [v for _, v in entries], value)

    def decode(data: bytes, pos: int) -> tuple[list[tuple[Any, Any]], int]:
        keys, pos = _read_elements(data, pos, key)
        values, pos = _read_elements(data, pos, value)
        if len(keys) != len(values):
            raise CodecError(f"map of {len(keys)} keys but {len(values)} values")
        return list(zip(keys, values, strict=True)), pos

    return FieldCodec(encode, decode)


def _vector_field(code: str) -> FieldCodec:
    """A list of non-null primitives (Java ``VectorFieldWriter``: no null bitmap)."""

    def encode(out: bytearray, value: Any) -> None:
        write_varint(out, len(value))
        out += struct.pack(f"<{len(value)}{code}", *value)

    def decode(data: bytes, pos: int) -> tuple[list[Any], int]:
        size, pos = read_varint(data, pos)
        if size > len(data):
            raise CodecError(f"vector of {size} elements in {len(data)} bytes")
        packer = struct.Struct(f"<{size}{code}")
        return list(packer.unpack_from(data, pos)), pos + packer.size

    return FieldCodec(encode, decode)
