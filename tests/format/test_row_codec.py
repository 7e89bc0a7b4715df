"""The compact row codec of ``.row`` blocks and its varints: Java golden rows, hypothesis round
trips over random (nested) row types with NULLs anywhere, malformed input.

Golden rows are the row slices of the uncompressed blocks Apache Paimon's ``RowFormatWriter``
wrote, read in place from ``tests/golden/java/rowfile/`` (MANIFEST.md section 4).
"""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.row_values import (
    INT64,
    ROW_TYPES,
    ROWFILE_DIR,
    canon,
    golden_entries,
    golden_rows,
    row_of,
    values,
)

from paimond.errors import CodecError, UnsupportedError
from paimond.format.row_file.codec import (
    decode_delta_varints,
    decode_row,
    decode_varint,
    encode_delta_varints,
    encode_row,
    encode_varint,
    row_codec,
)
from paimond.format.types.data_types import (
    MAX_LENGTH,
    ArrayType,
    BigIntType,
    BlobType,
    BooleanType,
    DataType,
    DecimalType,
    FloatType,
    IntType,
    LocalZonedTimestampType,
    MapType,
    MultisetType,
    RowType,
    SmallIntType,
    TimestampType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
    VariantType,
    VectorType,
    row_type,
)
from paimond.format.types.values import Timestamp

# ---------------------------------------------------------------- strategies


# ---------------------------------------------------------------- golden rows

def _block_rows(block: bytes) -> list[bytes]:
    (count,) = struct.unpack_from("<i", block, len(block) - 4)
    data_end = len(block) - 4 - 4 * count
    offsets = [*struct.unpack_from(f"<{count}i", block, data_end), data_end]
    return [block[a:b] for a, b in zip(offsets, offsets[1:], strict=False)]


@pytest.mark.parametrize("name", ["all_types", "simple_single_block"])
def test_golden_rows_encode_and_decode_byte_exact(name: str) -> None:
    entries = golden_entries()
    rtype, rows = golden_rows(entries[f"rowfile/{name}.row"])
    golden = _block_rows((ROWFILE_DIR / f"{name}.block0.uncompressed.bin").read_bytes())
    assert len(golden) == len(rows)
    for row, data in zip(rows, golden, strict=True):
        assert encode_row(row, rtype) == data
        assert canon(decode_row(data, rtype), exact_nan=True) == canon(row, exact_nan=True)


def test_golden_all_null_row_is_only_its_bitmap() -> None:
    entries = golden_entries()
    rtype, rows = golden_rows(entries["rowfile/all_types.row"])
    assert all(v is None for v in rows[1])
    assert encode_row(rows[1], rtype) == bytes([0xFF, 0xFF, 0xFF, 0x7F])  # 31 fields


# ---------------------------------------------------------------- layout vectors

@pytest.mark.parametrize(("data_type", "value", "hex_bytes"), [
    (BooleanType(), True, "01"), (SmallIntType(), -2, "feff"), (IntType(), 1, "01000000"),
    (VarCharType(length=MAX_LENGTH), "hé", "03 68 c3a9"), (VarBinaryType(length=9), b"", "00"),
    (DecimalType(precision=18, scale=2), Decimal("-1.00"), "9cff ffff ffff ffff"),
    (DecimalType(precision=38, scale=0), Decimal(-128), "01 80"),
    (DecimalType(precision=38, scale=0), Decimal(128), "02 0080"),
    (DecimalType(precision=38, scale=0), Decimal(0), "01 00"),
    (DecimalType(precision=19, scale=0), Decimal(-(2**63)), "08 8000000000000000"),
    (TimestampType(precision=3), Timestamp(1, 999_999), "0100000000000000"),
    (TimestampType(precision=9), Timestamp(-1, 999_999), "ffffffffffffffff bf843d"),
    (ArrayType(element=IntType()), [7, None, 9], "03 02 07000000 09000000"),
    (MapType(key=VarCharType(length=3), value=BigIntType()), [("a", None)],
     "01 00 01 61 01 01"),
    (MultisetType(element=TinyIntType()), [(5, 2)], "01 00 05 01 00 02000000"),
    (VectorType(element=FloatType(), length=2), [1.0, -2.0], "02 0000803f 000000c0"),
    (row_type(("a", IntType()), ("b", IntType())), (None, 3), "01 03000000"),
])
def test_field_layout_matches_the_spec(data_type: DataType, value: Any, hex_bytes: str) -> None:
    """One non-null field after its one-byte row bitmap."""
    rtype = row_type(("f", data_type))
    encoded = encode_row((value,), rtype)
    assert encoded == bytes.fromhex("00" + hex_bytes.replace(" ", ""))
    assert canon(decode_row(encoded, rtype)[0]) == canon(
        Timestamp(value.millis) if data_type == TimestampType(precision=3) else value)


def test_bitmap_spans_bytes_and_ignores_bits_past_the_arity() -> None:
    rtype = row_of([IntType()] * 9)
    encoded = encode_row([None, *range(7), None], rtype)
    assert encoded[:2] == bytes([0x01, 0x01])
    assert decode_row(bytes([0x01, 0xFF]) + encoded[2:], rtype) == (None, *range(7), None)
    assert decode_row(b"\xfe" + struct.pack("<i", 5), row_of([IntType()])) == (5,)


def test_arrow_dialect_takes_unit_integers_and_utf8_bytes() -> None:
    rtype = row_type(("s", VarCharType(length=9)), ("t0", TimestampType(precision=0)),
                     ("t6", TimestampType(precision=6)), ("t9", LocalZonedTimestampType(precision=9)))
    arrow = row_codec(rtype, arrow=True)
    out = bytearray()
    arrow.encode(out, [b"x", 5, -1, 1_000_001])
    assert bytes(out) == encode_row(
        ["x", Timestamp(5000), Timestamp(-1, 999_000), Timestamp(1, 1)], rtype)
    assert arrow.decode(bytes(out), 0) == ([b"x", 5, -1, 1_000_001], len(out))


# ---------------------------------------------------------------- round trips

@given(st.data())
def test_rows_round_trip_both_ways(data: st.DataObject) -> None:
    rtype = data.draw(ROW_TYPES, label="row type")
    row = data.draw(st.tuples(*(values(f.type) for f in rtype.fields)), label="row")
    encoded = encode_row(row, rtype)
    decoded = decode_row(encoded, rtype)
    assert canon(decoded) == canon(row)
    assert encode_row(decoded, rtype) == encoded


@given(st.integers(0, 2**32 - 1))
def test_varints_round_trip_every_uint32(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == max(1, -(-value.bit_length() // 7)) <= 5
    assert decode_varint(encoded + b"\xff", 0) == (value, len(encoded))


@given(st.integers(-(2**31), 2**31 - 1))
def test_int32_varints_are_their_uint32_bits_like_java(value: int) -> None:
    encoded = encode_varint(value & 0xFFFFFFFF)
    assert len(encoded) == 5 if value < 0 else len(encoded) <= 5
    assert decode_varint(encoded, 0)[0] - (2**32 if value < 0 else 0) == value


@given(st.lists(st.integers(*INT64), max_size=50))
def test_delta_varints_round_trip_every_int64(values_: list[int]) -> None:
    assert decode_delta_varints(encode_delta_varints(values_)) == values_


@pytest.mark.parametrize(("values_", "hex_bytes"), [
    ([], ""), ([0], "00"), ([1], "02"), ([-1], "01"), ([0, 11, 22, 33], "00161616"),
    ([145, 145, 151], "a202 00 0c"), ([2**63 - 1, -(2**63)], "feffffffffffffffff01 02"),
])
def test_delta_varints_match_java_vectors(values_: list[int], hex_bytes: str) -> None:
    assert encode_delta_varints(values_) == bytes.fromhex(hex_bytes.replace(" ", ""))


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize(("data", "reason"), [
    (b"", "past the end"), (b"\x80\x80\x80\x80\x80\x01", "longer than 5"),
    (b"\xff\xff\xff\xff\x1f", "exceeds 32 bits"),
])
def test_bad_varints_raise(data: bytes, reason: str) -> None:
    with pytest.raises(CodecError, match=reason):
        decode_varint(data, 0)


@pytest.mark.parametrize("data", [b"\x80", b"\xff" * 10 + b"\x01", b"\xff" * 9 + b"\x02"])
def test_bad_delta_varints_raise(data: bytes) -> None:
    with pytest.raises(CodecError):
        decode_delta_varints(data)


STRING_ROW = row_type(("s", VarCharType(length=MAX_LENGTH)))


@pytest.mark.parametrize(("rtype", "data"), [
    (STRING_ROW, b"\x00\x05abc"),  # string runs past the data
    (STRING_ROW, b"\x00\x01ab"),  # trailing bytes
    (row_of([IntType()]), b"\x00\x01\x00"),  # truncated int
    (row_of([ArrayType(element=row_of([]))]), b"\x00\xff\xff\xff\xff\x0f"),  # 2^32 elements
    (row_of([DecimalType(precision=20, scale=0)]), b"\x00\x00"),  # zero-length big decimal
    (row_of([DecimalType(precision=2, scale=0)]), b"\x00" + struct.pack("<q", 100)),
    (row_of([TimestampType(precision=6)]), b"\x00" + bytes(8) + b"\xc0\x84\x3d"),  # 1e6 nanos
    (row_of([MapType(key=IntType(), value=IntType())]), b"\x00\x01\x00" + bytes(4) + b"\x00"),
])
def test_malformed_rows_raise_codec_error(rtype: RowType, data: bytes) -> None:
    with pytest.raises(CodecError):
        decode_row(data, rtype)


@given(st.data())
def test_truncated_rows_raise_codec_error(data: st.DataObject) -> None:
    rtype = data.draw(ROW_TYPES)
    encoded = encode_row(data.draw(st.tuples(*(values(f.type) for f in rtype.fields))), rtype)
    if encoded:
        cut = data.draw(st.integers(0, len(encoded) - 1))
        with pytest.raises(CodecError):
            decode_row(encoded[:cut], rtype)


@pytest.mark.parametrize(("data_type", "value", "error"), [
    (IntType(), "1", ValueError), (TinyIntType(), 128, ValueError),
    (VarCharType(length=3), b"x", TypeError), (VarBinaryType(length=3), "x", TypeError),
    (DecimalType(precision=3, scale=1), Decimal("1.25"), ValueError),
    (DecimalType(precision=30, scale=0), Decimal(10) ** 30, ValueError),
    (TimestampType(precision=6), 5, TypeError), (ArrayType(element=IntType()), 5, TypeError),
    (MapType(key=IntType(), value=IntType()), [(1,)], ValueError),
])
def test_values_that_do_not_fit_are_rejected(data_type: DataType, value: Any,
                                             error: type[Exception]) -> None:
    with pytest.raises(error):
        encode_row((value,), row_type(("f", data_type)))


def test_wrong_arity_is_rejected() -> None:
    with pytest.raises(ValueError, match="2 values for a row of 1"):
        encode_row((1, 2), row_of([IntType()]))


@pytest.mark.parametrize("data_type", [VariantType(), BlobType(),
                                       VectorType(element=VarCharType(length=1), length=2)])
def test_types_without_python_values_are_unsupported(data_type: DataType) -> None:
    with pytest.raises(UnsupportedError):
        row_codec(row_type(("f", ArrayType(element=data_type))))
