"""BinaryRow codec: Java golden vectors, hypothesis round trips, corrupt input.

Golden vectors are read in place from ``tests/golden/java/binaryrow/`` (written by
Apache Paimon's ``InternalRowSerializer.toBinaryRow`` at commit 5dacde5, see MANIFEST.md there).
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
from paimond.format.binary.binary_row import (
    EMPTY_MANIFEST_ROW,
    EMPTY_ROW,
    decode_manifest_row,
    decode_row,
    decode_row_kind,
    encode_manifest_row,
    encode_row,
    manifest_row_arity,
    null_bits_size,
)
from paimond.format.types.data_types import (
    ArrayType,
    BigIntType,
    BinaryType,
    BlobType,
    BooleanType,
    CharType,
    DataField,
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
)
from paimond.format.types.row_kind import RowKind
from paimond.format.types.type_json import parse_type_string
from paimond.format.types.values import Timestamp

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "java"  # tests/golden: copied in
ROW_DIR = GOLDEN / "binaryrow"
ROW_KINDS = {"+I": RowKind.INSERT, "-U": RowKind.UPDATE_BEFORE, "+U": RowKind.UPDATE_AFTER,
             "-D": RowKind.DELETE}
# index.json describes this file only in prose: all_types_edge written after two other rows.
REUSE_SOURCE = {"binaryrow/_reuse_check_edge_after_reuse.bin": "binaryrow/all_types_edge.bin"}


def _golden_index() -> dict[str, dict[str, Any]]:
    if not ROW_DIR.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"golden vectors missing at {ROW_DIR}")
        pytest.skip(f"golden vectors missing at {ROW_DIR}")
    entries = json.loads((GOLDEN / "index.json").read_text())
    return {e["file"]: e for e in entries if e["file"].startswith("binaryrow/")}


def _golden_files() -> list[str]:
    return sorted(p.name for p in ROW_DIR.glob("*.bin")) if ROW_DIR.is_dir() else ["<missing>"]


def _value(spec: Any) -> Any:
    """Python value of an index.json field value (see MANIFEST.md section 3)."""
    if isinstance(spec, list):
        return [_value(v) for v in spec]
    if not isinstance(spec, dict):
        return spec
    if "float" in spec:
        return struct.unpack("<f", struct.pack("<I", int(spec["bits"], 16)))[0]
    if "double" in spec:
        return struct.unpack("<d", struct.pack("<Q", int(spec["bits"], 16)))[0]
    if "bytes_hex" in spec:
        return bytes.fromhex(spec["bytes_hex"])
    if "decimal" in spec:
        value = Decimal(spec["decimal"])
        unscaled = int.from_bytes(bytes.fromhex(spec["unscaled_bytes_be_hex"]), "big", signed=True)
        assert value.as_tuple() == _decimal(unscaled, spec["scale"]).as_tuple()
        return value
    if "millis" in spec:
        return Timestamp(spec["millis"], spec["nanoOfMillisecond"])
    if "array" in spec:
        return _value(spec["array"])
    if "map_entries_in_order" in spec:
        return [tuple(_value(kv)) for kv in spec["map_entries_in_order"]]
    if "row" in spec:
        return tuple(_value(spec["row"]))
    raise AssertionError(f"unknown golden value {spec}")


def _decimal(unscaled: int, scale: int) -> Decimal:
    """The DECIMAL value with exactly ``scale`` fractional digits (no context rounding)."""
    return Decimal((int(unscaled < 0), tuple(int(d) for d in str(abs(unscaled))), -scale))


def _source(index: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    entry = index[f"binaryrow/{name}"]
    source = entry.get("raw_file") or REUSE_SOURCE.get(entry["file"]) or entry["file"]
    return index[source]


def _types_and_values(entry: dict[str, Any]) -> tuple[list[DataType], tuple[Any, ...]]:
    row_type = parse_type_string(entry["row_type"])
    assert isinstance(row_type, RowType)
    types = row_type.field_types
    assert [str(t) for t in types] == [str(parse_type_string(f["type"])) for f in entry["fields"]]
    return types, tuple(_value(f["value"]) for f in entry["fields"])


def _canon(value: Any, exact_nan: bool = True) -> Any:
    """Comparable form: floats by bits (any NaN alike unless exact_nan), decimals with scale."""
    if isinstance(value, float):
        if math.isnan(value) and not exact_nan:
            return "NaN"
        return ("float", struct.pack("<d", value))
    if isinstance(value, Decimal):
        return ("decimal", value.as_tuple())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_canon(v, exact_nan) for v in value])
    return (type(value).__name__, value)


# ---------------------------------------------------------------- golden vectors

@pytest.mark.parametrize("name", _golden_files())
def test_golden_row_encodes_and_decodes_byte_exact(name: str) -> None:
    index = _golden_index()
    entry, source = index[f"binaryrow/{name}"], _source(index, name)
    data = (ROW_DIR / name).read_bytes()
    assert len(data) == entry["length"]
    types, values = _types_and_values(source)
    kind = ROW_KINDS[source["row_kind"]]
    if name.endswith(".manifest.bin"):
        assert encode_manifest_row(values, types, kind) == data
        assert manifest_row_arity(data) == source["arity"]
        decoded = decode_manifest_row(data, types)
    else:
        assert encode_row(values, types, kind) == data
        assert decode_row_kind(data) == kind
        assert null_bits_size(source["arity"]) == source["null_bits_width_bytes"]
        decoded = decode_row(data, types)
    assert _canon(decoded) == _canon(values)


def test_empty_rows_match_golden() -> None:
    _golden_index()
    assert EMPTY_ROW == (ROW_DIR / "empty_row.bin").read_bytes() == bytes(8)
    assert EMPTY_MANIFEST_ROW == (ROW_DIR / "empty_row.manifest.bin").read_bytes()
    assert encode_row((), []) == EMPTY_ROW and decode_manifest_row(EMPTY_MANIFEST_ROW, []) == ()


def test_null_bits_size_grows_every_64_fields_minus_header() -> None:
    assert [null_bits_size(n) for n in (0, 56, 57, 120, 121)] == [8, 8, 16, 16, 24]


def test_layout_details_seen_in_golden_rows() -> None:
    """Null non-compact DECIMAL/TIMESTAMP reserve bytes; inline marker; -2^63 is 8 bytes."""
    types = [DecimalType(precision=19, scale=0), TimestampType(precision=6), VarCharType(length=9)]
    assert encode_row([None, None, ""], types).hex() == (
        "0003000000000000" "0000000020000000" "0000000030000000" "0000000000000080" + "00" * 24)
    row = encode_row([Decimal(-2**63), None, None], types)
    assert row[32:48] == bytes.fromhex("8000000000000000") + bytes(8)
    assert row[8:16] == struct.pack("<Q", 32 << 32 | 8)


@pytest.mark.parametrize(("unscaled", "stored_hex"), [
    (0, "00"), (-1, "ff"), (127, "7f"), (128, "0080"), (-128, "80"), (-129, "ff7f"),
    (-2**63, "8000000000000000"), (2**63, "008000000000000000"), (-2**64, "ff0000000000000000"),
    (10**38 - 1, "4b3b4ca85a86c47a098a223fffffffff"),
])
def test_big_decimals_store_minimal_twos_complement(unscaled: int, stored_hex: str) -> None:
    """``BigInteger.toByteArray``: no extra sign byte for negative powers of two."""
    types = [DecimalType(precision=38, scale=0)]
    row = encode_row([Decimal(unscaled)], types)
    length = len(stored_hex) // 2
    assert row[16:32] == bytes.fromhex(stored_hex) + bytes(16 - length)
    assert row[8:16] == struct.pack("<Q", 16 << 32 | length)
    assert decode_row(row, types) == (unscaled,)


def test_arrays_inline_short_strings_and_reserve_nothing_for_null_elements() -> None:
    types = [ArrayType(element=VarCharType(length=99)),
             ArrayType(element=DecimalType(precision=20, scale=2))]
    row = encode_row([["abc", None], [None]], types)
    assert row[24:48].hex() == "0200000002000000" "6162630000000083" "0000000000000000"
    assert row[48:64].hex() == "0100000001000000" "0000000000000000"
    assert len(row) == 64


def test_nan_bits_kept_in_rows_but_canonical_in_arrays() -> None:
    """BinaryRowWriter stores raw float bits; BinaryArrayWriter.writeFloat writes Float.NaN."""
    negative_nan = struct.unpack("<f", bytes.fromhex("0000c0ff"))[0]
    types = [FloatType(), ArrayType(element=FloatType()), ArrayType(element=DoubleType())]
    row = encode_row([negative_nan, [negative_nan], [-math.nan]], types)
    assert row[8:12].hex() == "0000c0ff"
    assert row[32:48].hex() == "0100000000000000" "0000c07f00000000"
    assert row[48:64].hex() == "0100000000000000" "000000000000f87f"
    assert struct.pack("<f", decode_row(row, types)[0]).hex() == "0000c0ff"


# ---------------------------------------------------------------- hypothesis round trips

def _scalar_types() -> st.SearchStrategy[DataType]:
    """Every supported scalar type; one branch each for ints/floats, text, bytes, DECIMAL,
    TIMESTAMP and TIMESTAMP_LTZ so the tricky ones come up often."""
    nullable = st.booleans()
    precision = st.integers(0, 9)
    simple = [BooleanType, TinyIntType, SmallIntType, IntType, BigIntType, FloatType,
              DoubleType, DateType]
    return st.one_of(
        st.builds(lambda cls, n: cls(nullable=n), st.sampled_from(simple), nullable),
        st.builds(TimeType, precision=st.integers(0, 3), nullable=nullable),
        st.builds(lambda cls, length, n: cls(length=length, nullable=n),
                  st.sampled_from([CharType, VarCharType]), st.integers(1, 2**31 - 1), nullable),
        st.builds(lambda cls, length, n: cls(length=length, nullable=n),
                  st.sampled_from([BinaryType, VarBinaryType]), st.integers(1, 2**31 - 1),
                  nullable),
        st.integers(1, 38).flatmap(lambda p: st.builds(
            DecimalType, precision=st.just(p), scale=st.integers(0, p), nullable=nullable)),
        st.builds(TimestampType, precision=precision, nullable=nullable),
        st.builds(LocalZonedTimestampType, precision=precision, nullable=nullable),
    )


def _data_types(depth: int) -> st.SearchStrategy[DataType]:
    if depth == 0:
        return _scalar_types()
    inner, nullable = _data_types(depth - 1), st.booleans()
    fields = st.lists(inner, max_size=4).map(
        lambda ts: tuple(DataField(i, f"f{i}", t) for i, t in enumerate(ts)))
    return st.one_of(
        _scalar_types(),
        st.builds(ArrayType, element=inner, nullable=nullable),
        st.builds(MapType, key=inner, value=inner, nullable=nullable),
        st.builds(MultisetType, element=inner, nullable=nullable),
        st.builds(RowType, fields=fields, nullable=nullable),
    )


def _timestamps(precision: int) -> st.SearchStrategy[Timestamp]:
    step = 1_000_000 if precision <= 3 else 10 ** (9 - precision)
    return st.builds(Timestamp, st.integers(-2**63, 2**63 - 1),
                     st.integers(0, 999_999 // step).map(lambda k: k * step))


def _decimals(precision: int, scale: int) -> st.SearchStrategy[Decimal]:
    bound = 10 ** precision - 1
    return st.integers(-bound, bound).map(lambda n: _decimal(n, scale))


_INTS = {TinyIntType: 8, SmallIntType: 16, IntType: 32, BigIntType: 64, DateType: 32}


def _values(t: DataType) -> st.SearchStrategy[Any]:
    base: st.SearchStrategy[Any]
    if type(t) in _INTS:
        bits = _INTS[type(t)]
        base = st.integers(-2 ** (bits - 1), 2 ** (bits - 1) - 1)
    elif isinstance(t, BooleanType):
        base = st.booleans()
    elif isinstance(t, TimeType):
        base = st.integers(0, 86_399_999)
    elif isinstance(t, FloatType):
        base = st.floats(width=32)
    elif isinstance(t, DoubleType):
        base = st.floats()
    elif isinstance(t, (CharType, VarCharType)):
        base = st.text(max_size=7) | st.text(min_size=8, max_size=40)
    elif isinstance(t, (BinaryType, VarBinaryType)):
        base = st.binary(max_size=7) | st.binary(min_size=8, max_size=40)
    elif isinstance(t, DecimalType):
        base = _decimals(t.precision, t.scale)
    elif isinstance(t, (TimestampType, LocalZonedTimestampType)):
        base = _timestamps(t.precision)
    elif isinstance(t, ArrayType):
        base = st.lists(_values(t.element), max_size=5)
    elif isinstance(t, MapType):
        base = st.lists(st.tuples(_values(t.key), _values(t.value)), max_size=4)
    elif isinstance(t, MultisetType):
        base = st.lists(st.tuples(_values(t.element), st.integers(-2**31, 2**31 - 1)), max_size=4)
    else:
        assert isinstance(t, RowType)
        base = st.tuples(*[_values(f.type) for f in t.fields])
    return st.none() | base if t.nullable else base


_ROWS = st.lists(_data_types(2), max_size=6).flatmap(
    lambda ts: st.tuples(st.just(ts), st.tuples(*[_values(t) for t in ts]), st.integers(0, 3)))


@given(_ROWS)
def test_round_trip_values_and_bytes(row: tuple[list[DataType], tuple[Any, ...], int]) -> None:
    types, values, kind = row
    data = encode_row(values, types, kind)
    assert len(data) % 8 == 0 and decode_row_kind(data) == kind
    decoded = decode_row(data, types)
    assert _canon(decoded, exact_nan=False) == _canon(values, exact_nan=False)
    assert encode_row(decoded, types, kind) == data
    framed = encode_manifest_row(values, types)
    assert framed[4:] == encode_row(values, types) and manifest_row_arity(framed) == len(types)
    assert _canon(decode_manifest_row(framed, types), False) == _canon(values, False)


@given(st.lists(st.integers(0, 2), max_size=130))
def test_null_bits_of_wide_rows(pattern: list[int]) -> None:
    types = [IntType()] * len(pattern)
    values = [None if p == 0 else p for p in pattern]
    data = encode_row(values, types)
    assert len(data) == null_bits_size(len(types)) + 8 * len(types)
    assert decode_row(data, types) == tuple(values)


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("name", ["all_types_values.bin", "all_types_edge.bin", "nested_1.bin",
                                  "nested_2.bin", "partition_multi.bin", "wide_57_ints.bin"])
def test_truncated_golden_rows_raise_codec_error(name: str) -> None:
    source = _golden_index()[f"binaryrow/{name}"]
    types, values = _types_and_values(source)
    data = (ROW_DIR / name).read_bytes()
    for length in range(len(data)):
        try:
            decoded = decode_row(data[:length], types)
        except CodecError:
            continue
        # Only trailing padding may go missing unnoticed.
        assert length >= source["fixed_part_bytes"] and not data[length:].rstrip(b"\0")
        assert _canon(decoded) == _canon(values)
    with pytest.raises(CodecError):
        decode_manifest_row((ROW_DIR / name.replace(".bin", ".manifest.bin")).read_bytes()[:-8],
                            types)


def _golden(name: str) -> tuple[list[DataType], bytearray]:
    types, _ = _types_and_values(_golden_index()[f"binaryrow/{name}"])
    return types, bytearray((ROW_DIR / name).read_bytes())


def _patched(name: str, offset: int, patch: bytes) -> tuple[list[DataType], bytes]:
    types, data = _golden(name)
    data[offset:offset + len(patch)] = patch
    return types, bytes(data)


@pytest.mark.parametrize(("name", "offset", "patch", "reason"), [
    ("all_types_values.bin", 0, b"\x04", "row kind"),
    ("all_types_values.bin", 7, b"\x80", "null bits set beyond"),
    ("all_types_values.bin", 8 + 8 * 12 + 7, b"\x7f", "outside"),        # long string offset
    ("all_types_values.bin", 8 + 8 * 12, b"\xff\xff", "outside"),       # long string size
    ("all_types_values.bin", 8 + 8 * 11 + 7, b"\x88", "inline"),        # 8-byte inline string
    ("all_types_values.bin", 8 + 8 * 19, b"\x11", "expected 1..16"),    # DECIMAL(38) size
    ("all_types_values.bin", 8 + 8 * 19, b"\x00", "expected 1..16"),
    ("all_types_values.bin", 8 + 8 * 17 + 7, b"\x7f", "exceeds DECIMAL"),
    ("all_types_values.bin", 8 + 8 * 23, b"\x40\x42\x0f", "nano-of-milli"),
    ("all_types_values.bin", 8 + 8 * 23 + 4, b"\xf0\x01", r"TIMESTAMP\(9\) millis"),
    ("nested_1.bin", 48, b"\xff\xff\xff\x7f", "does not fit"),           # array count
    ("nested_1.bin", 48, b"\xff\xff\xff\xff", "does not fit"),
    ("nested_1.bin", 120, b"\x48", "key array"),                        # map key-array size
    ("nested_1.bin", 124, b"\x01", "2 values"),                         # map key count
    ("nested_1.bin", 192, b"\x05", "row kind"),                         # nested row kind
    ("nested_1.bin", 8 + 8 * 3, b"\x07", "shorter than"),               # nested row size
])
def test_corrupt_slots_raise_codec_error(name: str, offset: int, patch: bytes,
                                         reason: str) -> None:
    types, data = _patched(name, offset, patch)
    with pytest.raises(CodecError, match=reason):
        decode_row(data, types)


def test_arity_mismatch_raises_codec_error() -> None:
    types, data = _golden("wide_56_ints.bin")
    framed = (ROW_DIR / "wide_56_ints.manifest.bin").read_bytes()
    with pytest.raises(CodecError, match="arity 56 but 55"):
        decode_manifest_row(framed, types[:55])
    with pytest.raises(CodecError, match="shorter than"):
        decode_row(bytes(data), types + [IntType()])
    with pytest.raises(CodecError, match="beyond"):
        decode_row(bytes(data), types[:40])
    for bad in (b"", b"\0\0\0", b"\xff\xff\xff\xff" + EMPTY_ROW):
        with pytest.raises(CodecError):
            decode_manifest_row(bad, [])
    with pytest.raises(CodecError):
        decode_row_kind(b"\0" * 7)


@given(st.binary(max_size=200), st.lists(_data_types(2), max_size=5), st.booleans())
def test_random_bytes_raise_only_codec_error(data: bytes, types: list[DataType],
                                             framed: bool) -> None:
    decode = decode_manifest_row if framed else decode_row
    try:
        decoded = decode(data, types)
    except CodecError as exc:
        assert str(exc)
    else:
        assert len(decoded) == len(types)


@given(st.data())
def test_flipped_golden_bytes_raise_only_codec_error(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(["all_types_values.bin", "all_types_nulls.bin",
                                      "nested_1.bin", "nested_2.bin", "partition_multi.bin"]))
    types, row = _golden(name)
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(row) - 1))
        row[position] ^= data.draw(st.integers(1, 255))
    try:
        decoded = decode_row(bytes(row), types)
    except CodecError as exc:
        assert str(exc)
    else:
        assert len(decoded) == len(types)


# ---------------------------------------------------------------- unsupported and bad values

@pytest.mark.parametrize("data_type", [VariantType(), BlobType(),
                                       VectorType(element=FloatType(), length=3)])
def test_unsupported_types_raise(data_type: DataType) -> None:
    with pytest.raises(UnsupportedError, match=data_type.name):
        encode_row([None], [data_type])
    with pytest.raises(UnsupportedError, match=data_type.name):
        decode_row(bytes(16), [ArrayType(element=data_type)])


@pytest.mark.parametrize(("value", "data_type", "error"), [
    (Decimal("1.005"), DecimalType(precision=10, scale=2), ValueError),
    (Decimal(100), DecimalType(precision=2, scale=0), ValueError),
    (Decimal("NaN"), DecimalType(precision=20, scale=0), ValueError),
    (1.5, DecimalType(precision=10, scale=2), TypeError),
    (2**31, IntType(), ValueError),
    (1e39, FloatType(), ValueError),
    ("x", IntType(), ValueError),  # struct's own type errors surface as ValueError
    (b"x", VarCharType(length=5), TypeError),
    ("\ud800", VarCharType(length=5), ValueError),
    (123, TimestampType(precision=6), TypeError),
    ((1, 2), RowType(fields=(DataField(0, "a", IntType()),)), ValueError),
])
def test_values_that_do_not_fit_raise(value: object, data_type: DataType,
                                      error: type[Exception]) -> None:
    with pytest.raises(error, match="field 0"):
        encode_row([value], [data_type])


def test_encode_checks_arity_and_row_kind() -> None:
    with pytest.raises(ValueError, match="2 values"):
        encode_row([1, 2], [IntType()])
    with pytest.raises(ValueError, match="row kind"):
        encode_row([1], [IntType()], row_kind=4)


def test_decimals_accept_fewer_scale_digits_and_ints() -> None:
    types = [DecimalType(precision=5, scale=2), DecimalType(precision=30, scale=3)]
    data = encode_row([Decimal("1.5"), 7], types)
    assert data == encode_row([Decimal("1.50"), Decimal("7.000")], types)
    assert [str(v) for v in decode_row(data, types)] == ["1.50", "7.000"]
