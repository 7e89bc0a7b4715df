"""The compact row codec of ``.row`` blocks and its varints: Java golden rows, hypothesis round
trips over random (nested) row types with NULLs anywhere, malformed input.

Golden rows are the row slices of the uncompressed blocks Apache Paimon's ``RowFormatWriter``
wrote, read in place from ``tests/golden/java/rowfile/`` (MANIFEST.md section 4).
"""

from __future__ import annotations

import json
import math
import os
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

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
    BinaryType,
    BlobType,
    BooleanType,
    CharType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    LocalZonedTimestampType,
    MapType,
    MultisetType,
    RowType,
    SmallIntType,
    TimestampType,
    TimeType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
    VariantType,
    VectorType,
    row_type,
)
from paimond.format.types.type_json import parse_type_string
from paimond.format.types.values import Timestamp

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "java"  # tests/golden: copied in
ROWFILE_DIR = GOLDEN / "rowfile"
INT64 = (-(2**63), 2**63 - 1)


def golden_entries() -> dict[str, dict[str, Any]]:
    """index.json entries of rowfile/, skipping locally (failing under CI) when absent."""
    if not ROWFILE_DIR.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"golden vectors missing at {ROWFILE_DIR}")
        pytest.skip(f"golden vectors missing at {ROWFILE_DIR}")
    entries = json.loads((GOLDEN / "index.json").read_text())
    return {e["file"]: e for e in entries if e["file"].startswith("rowfile/")}


def golden_value(spec: Any) -> Any:
    """Python value of an index.json field value (MANIFEST.md sections 3 and 4)."""
    if isinstance(spec, list):
        return [golden_value(v) for v in spec]
    if not isinstance(spec, dict):
        return spec
    if "float" in spec:
        return struct.unpack("<f", struct.pack("<I", int(spec["bits"], 16)))[0]
    if "double" in spec:
        return struct.unpack("<d", struct.pack("<Q", int(spec["bits"], 16)))[0]
    if "bytes_hex" in spec:
        return bytes.fromhex(spec["bytes_hex"])
    if "decimal" in spec:
        return Decimal(spec["decimal"])
    if "millis" in spec:
        return Timestamp(spec["millis"], spec["nanoOfMillisecond"])
    if "array" in spec:
        return golden_value(spec["array"])
    if "map_entries_in_order" in spec:
        return [tuple(golden_value(kv)) for kv in spec["map_entries_in_order"]]
    if "row" in spec:
        return tuple(golden_value(spec["row"]))
    raise AssertionError(f"unknown golden value {spec}")


def golden_rows(entry: dict[str, Any]) -> tuple[RowType, list[tuple[Any, ...]]]:
    """Row type and rows of a golden .row file (the simple files are described by formula)."""
    parsed = parse_type_string(entry["row_type"])
    assert isinstance(parsed, RowType)
    if entry["row_values"] is None:
        return parsed, [(i, None if i % 10 == 9 else f"name-{i}", i * 1.5) for i in range(100)]
    return parsed, [tuple(golden_value(f["value"]) for f in row) for row in entry["row_values"]]


def canon(value: Any, exact_nan: bool = False) -> Any:
    """Comparable form: floats by bits (NaNs alike unless exact_nan), decimals with scale."""
    if isinstance(value, float):
        if math.isnan(value) and not exact_nan:
            return "NaN"
        return ("float", struct.pack("<d", value))
    if isinstance(value, Decimal):
        return ("decimal", value.as_tuple())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [canon(v, exact_nan) for v in value])
    return (type(value).__name__, value)


# ---------------------------------------------------------------- strategies

def _decimal_types() -> st.SearchStrategy[DataType]:
    return st.integers(1, 38).flatmap(
        lambda p: st.integers(0, p).map(lambda s: DecimalType(precision=p, scale=s)))


SCALAR_TYPES: st.SearchStrategy[DataType] = st.one_of(
    st.sampled_from([BooleanType(), TinyIntType(), SmallIntType(), IntType(), BigIntType(),
                     FloatType(), DoubleType(), DateType(), TimeType(), CharType(length=3),
                     VarCharType(length=MAX_LENGTH), BinaryType(length=4),
                     VarBinaryType(length=MAX_LENGTH)]),
    _decimal_types(),
    st.integers(0, 9).map(lambda p: TimestampType(precision=p)),
    st.integers(0, 9).map(lambda p: LocalZonedTimestampType(precision=p)),
)


def _row_of(types: list[DataType]) -> RowType:
    return row_type(*((f"f{i}", t) for i, t in enumerate(types)))


def _nest(children: st.SearchStrategy[DataType]) -> st.SearchStrategy[DataType]:
    return st.one_of(
        children.map(lambda t: ArrayType(element=t)),
        st.tuples(children, children).map(lambda kv: MapType(key=kv[0], value=kv[1])),
        children.map(lambda t: MultisetType(element=t)),
        st.lists(children, max_size=4).map(_row_of),
    )


DATA_TYPES = st.recursive(SCALAR_TYPES, _nest, max_leaves=6)
ROW_TYPES = st.lists(DATA_TYPES, max_size=10).map(_row_of)


def _timestamp(precision: int, arrow: bool) -> st.SearchStrategy[Timestamp]:
    """Any int64 millis; for ``arrow`` only what the Arrow unit holds exactly (whole seconds
    at precision 0, whole micros up to 6, int64 nanoseconds from 7)."""
    if not arrow:
        nanos = st.just(0) if precision <= 3 else st.integers(0, 999_999)
        return st.builds(Timestamp, st.integers(*INT64), nanos)
    if precision == 0:
        return st.integers(-(2**53), 2**53).map(lambda s: Timestamp(s * 1000))
    if precision <= 3:
        return st.integers(*INT64).map(Timestamp)
    unit_ns = 1000 if precision <= 6 else 1
    limit = 2**63 // (1_000_000 // unit_ns) - 1
    return st.integers(-limit, limit).map(lambda v: Timestamp.from_nanos(v * unit_ns))


def non_null_values(data_type: DataType, arrow: bool = False) -> st.SearchStrategy[Any]:
    """Python values (``paimond.format.types.values``) the type round-trips exactly; with ``arrow``,
    also through the type's Arrow type (no NULL map keys, times of day, timestamps in the unit's
    range)."""
    simple = {
        "BOOLEAN": st.booleans(), "TINYINT": st.integers(-128, 127),
        "SMALLINT": st.integers(-(2**15), 2**15 - 1), "INT": st.integers(-(2**31), 2**31 - 1),
        "DATE": st.integers(-(2**31), 2**31 - 1),
        "TIME": st.integers(0, 86_399_999) if arrow else st.integers(-(2**31), 2**31 - 1),
        "BIGINT": st.integers(*INT64), "FLOAT": st.floats(width=32), "DOUBLE": st.floats(),
        "CHAR": st.text(max_size=12), "VARCHAR": st.text(max_size=12),
        "BINARY": st.binary(max_size=12), "VARBINARY": st.binary(max_size=12),
    }.get(data_type.name)
    if simple is not None:
        return simple
    if isinstance(data_type, DecimalType):
        bound, scale = 10**data_type.precision - 1, data_type.scale
        return st.integers(-bound, bound).map(lambda u: Decimal(f"{u}E-{scale}"))
    if isinstance(data_type, (TimestampType, LocalZonedTimestampType)):
        return _timestamp(data_type.precision, arrow)
    if isinstance(data_type, ArrayType):
        return st.lists(values(data_type.element, arrow), max_size=10)
    if isinstance(data_type, MapType):
        keys = non_null_values(data_type.key, arrow) if arrow else values(data_type.key)
        return st.lists(st.tuples(keys, values(data_type.value, arrow)), max_size=5)
    if isinstance(data_type, MultisetType):
        keys = non_null_values(data_type.element, arrow) if arrow else values(data_type.element)
        counts = st.integers(-(2**31), 2**31 - 1) | (st.nothing() if arrow else st.none())
        return st.lists(st.tuples(keys, counts), max_size=5)
    if isinstance(data_type, RowType):
        return st.tuples(*(values(f.type, arrow) for f in data_type.fields))
    raise AssertionError(data_type)


def values(data_type: DataType, arrow: bool = False) -> st.SearchStrategy[Any]:
    return st.none() | non_null_values(data_type, arrow)


def rows_of(rtype: RowType, max_size: int = 20,
            arrow: bool = False) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    return st.lists(st.tuples(*(values(f.type, arrow) for f in rtype.fields)), max_size=max_size)


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
    rtype = _row_of([IntType()] * 9)
    encoded = encode_row([None, *range(7), None], rtype)
    assert encoded[:2] == bytes([0x01, 0x01])
    assert decode_row(bytes([0x01, 0xFF]) + encoded[2:], rtype) == (None, *range(7), None)
    assert decode_row(b"\xfe" + struct.pack("<i", 5), _row_of([IntType()])) == (5,)


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
    (_row_of([IntType()]), b"\x00\x01\x00"),  # truncated int
    (_row_of([ArrayType(element=_row_of([]))]), b"\x00\xff\xff\xff\xff\x0f"),  # 2^32 elements
    (_row_of([DecimalType(precision=20, scale=0)]), b"\x00\x00"),  # zero-length big decimal
    (_row_of([DecimalType(precision=2, scale=0)]), b"\x00" + struct.pack("<q", 100)),
    (_row_of([TimestampType(precision=6)]), b"\x00" + bytes(8) + b"\xc0\x84\x3d"),  # 1e6 nanos
    (_row_of([MapType(key=IntType(), value=IntType())]), b"\x00\x01\x00" + bytes(4) + b"\x00"),
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
        encode_row((1, 2), _row_of([IntType()]))


@pytest.mark.parametrize("data_type", [VariantType(), BlobType(),
                                       VectorType(element=VarCharType(length=1), length=2)])
def test_types_without_python_values_are_unsupported(data_type: DataType) -> None:
    with pytest.raises(UnsupportedError):
        row_codec(row_type(("f", ArrayType(element=data_type))))
