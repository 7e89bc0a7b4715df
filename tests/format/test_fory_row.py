"""The Fory standard row format codec (``paimond.format.fory_row``): layouts checked against the
spec (``shared/seeds/fory-row-format-spec.txt``), hypothesis round trips over random nested
Arrow schemas with NULLs anywhere, Arrow batches, random access, sort keys, malformed input.

Strategies here are reused by ``test_fory_row_interop.py``.
"""

from __future__ import annotations

import bisect
import functools
import math
import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.fory_values import (
    FIXED_TYPES,
    MAP_KEY_TYPES,
    decimal_types,
    non_null_values,
    same,
    struct_of,
    values,
)

from paimond.errors import CodecError, UnsupportedError
from paimond.format.fory_row import (
    RowView,
    array_header_size,
    bitmap_size,
    decode_row,
    decode_rows,
    encode_batch,
    encode_row,
    row_decoder,
    row_encoder,
    sort_key_function,
    storage_type,
)

KEY_TYPES = FIXED_TYPES + [pa.string(), pa.binary(), pa.decimal128(20, 4)]


# ---------------------------------------------------------------- strategies


SCALAR_TYPES = st.one_of(st.sampled_from(FIXED_TYPES + [pa.string(), pa.binary()]), decimal_types())


def nest(children: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
    return st.one_of(st.builds(pa.list_, children), st.builds(pa.map_, MAP_KEY_TYPES, children),
                     st.lists(children, max_size=4).map(struct_of))


ARROW_TYPES = st.recursive(SCALAR_TYPES, nest, max_leaves=6)


def schema_of(types: list[pa.DataType], nullable: list[bool] | None = None) -> pa.Schema:
    flags = nullable or [True] * len(types)
    return pa.schema([pa.field(f"c{i}", t, nullable=n)
                      for i, (t, n) in enumerate(zip(types, flags, strict=True))])


SCHEMAS = st.lists(ARROW_TYPES, max_size=8).map(schema_of)


def rows_of(schema: pa.Schema) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.tuples(*[values(f.type) if f.nullable else non_null_values(f.type) for f in schema])


# ---------------------------------------------------------------- the spec's layout

def test_sizes_follow_the_spec() -> None:
    assert [bitmap_size(n) for n in (0, 1, 10, 63, 64, 65, 128, 129)] == [0, 8, 8, 8, 8, 16, 16, 24]
    assert [array_header_size(n) for n in (0, 1, 64, 65)] == [8, 16, 16, 24]


def test_row_bytes_follow_the_spec() -> None:
    """Every byte computed by hand from the spec: bitmap, slots, offset+size, padding."""
    schema = pa.schema([("i", pa.int32()), ("s", pa.string()), ("n", pa.int64()),
                        ("l", pa.list_(pa.int16())), ("m", pa.map_(pa.string(), pa.int64())),
                        ("st", pa.struct([("x", pa.int8()), ("y", pa.string())])),
                        ("d", pa.decimal128(10, 2))])
    row = encode_row([-5, "hello world", None, [1, None, 3], [("a", 7)],
                      {"x": 3, "y": None}, Decimal("-1.50")], schema)
    q = struct.Struct("<Q").pack
    fixed = 8 + 7 * 8  # one bitmap word, seven slots
    string = b"hello world" + bytes(5)
    array = q(3) + q(0b010) + struct.pack("<3h", 1, 0, 3) + bytes(2)
    keys = q(1) + q(0) + q(16 + 8 << 32 | 1) + b"a" + bytes(7)
    map_ = q(len(keys)) + keys + q(1) + q(0) + q(7)
    nested = q(0b10) + q(3) + q(0)
    decimal = (-150).to_bytes(32, "little", signed=True)
    offsets = [fixed, fixed + 16, fixed + 16 + 24, fixed + 16 + 24 + 64]
    expected = (q(0b100) + q(2**64 - 5 & 0xFFFFFFFF) + q(offsets[0] << 32 | 11) + q(0)
                + q(offsets[1] << 32 | 24) + q(offsets[2] << 32 | 64) + q(offsets[3] << 32 | 24)
                + q(offsets[3] + 24 << 32 | 32) + string + array + map_ + nested + decimal)
    assert row == expected
    assert decode_row(row, schema) == (-5, "hello world", None, [1, None, 3], [("a", 7)],
                                       {"x": 3, "y": None}, Decimal("-1.50"))


def test_empty_values_point_at_the_end_of_the_data() -> None:
    schema = pa.schema([("s", pa.string()), ("l", pa.list_(pa.int64())), ("e", pa.struct([]))])
    row = encode_row(["", [], {}], schema)
    assert row == struct.pack("<4Q", 0, 32 << 32, 32 << 32 | 8, 40 << 32) + struct.pack("<Q", 0)
    assert decode_row(row, schema) == ("", [], {})


def test_many_fields_use_more_bitmap_words() -> None:
    schema = schema_of([pa.int8()] * 130)
    values_ = [None if i % 3 == 0 else i % 100 for i in range(130)]
    row = encode_row(values_, schema)
    assert len(row) == 24 + 130 * 8
    assert int.from_bytes(row[:24], "little") == sum(1 << i for i in range(0, 130, 3))
    assert list(decode_row(row, schema)) == values_
    view = RowView(row, schema)
    assert [view.is_null(i) for i in (0, 1, 129)] == [True, False, True]


# ---------------------------------------------------------------- round trips

@given(st.data(), SCHEMAS)
def test_rows_round_trip(data: st.DataObject, schema: pa.Schema) -> None:
    row_values = data.draw(rows_of(schema))
    row = encode_row(row_values, schema)
    assert len(row) % 8 == 0
    decoded = decode_row(row, schema)
    assert same(decoded, row_values)
    assert encode_row(decoded, schema) == row  # deterministic: padding and null slots zeroed
    view = RowView(row, schema)
    for i, value in enumerate(row_values):
        assert view.is_null(i) == (value is None)
        assert same(view.get(i), decoded[i])
    assert encode_row(dict(zip(schema.names, row_values, strict=True)), schema) == row
    assert row_encoder(schema)(row_values) == row
    assert same(row_decoder(schema)(memoryview(row)), decoded)  # NaN is not == NaN


@given(st.data(), SCHEMAS)
def test_arrow_batches_round_trip(data: st.DataObject, schema: pa.Schema) -> None:
    rows = data.draw(st.lists(rows_of(schema), max_size=5))
    columns = [pa.array([r[i] for r in rows], type=f.type) for i, f in enumerate(schema)]
    batch = (pa.RecordBatch.from_arrays(columns, schema=schema) if columns
             else pa.RecordBatch.from_struct_array(pa.array([{}] * len(rows), pa.struct([]))))
    encoded = encode_batch(batch)
    assert encoded == [encode_row(r, schema) for r in rows]
    decoded = decode_rows(encoded, schema)
    assert decoded.schema == schema and decoded.num_rows == len(rows)
    storage = pa.schema([f.with_type(storage_type(f.type)) for f in schema])
    if len(schema):  # a batch of no columns lists no rows
        expected = [dict(zip(schema.names, r, strict=True)) for r in rows]
        assert same(decoded.cast(storage).to_pylist(), expected)
    assert encode_batch(pa.Table.from_batches([decoded])) == encoded


def test_arrow_time_zones_and_large_types() -> None:
    schema = pa.schema([("t", pa.timestamp("us", tz="UTC")), ("s", pa.large_string()),
                        ("l", pa.large_list(pa.large_binary()))])
    batch = pa.RecordBatch.from_pylist([{"t": 1, "s": "x", "l": [b"y", None]}], schema=schema)
    rows = encode_batch(batch)
    assert decode_row(rows[0], schema) == (1, "x", [b"y", None])
    assert decode_rows(rows, schema).equals(batch)


def test_empty_schema_rows() -> None:
    empty = pa.schema([])
    assert encode_row([], empty) == b""
    batch = decode_rows([b"", b""], empty)
    assert batch.num_rows == 2 and batch.num_columns == 0
    assert encode_batch(batch) == [b"", b""]


def test_nested_struct_view() -> None:
    inner = pa.struct([("a", pa.int16()), ("b", pa.list_(pa.string()))])
    schema = pa.schema([("k", pa.int64()), ("s", inner), ("z", inner)])
    view = RowView(encode_row([9, {"a": 4, "b": ["p", None]}, None], schema), schema)
    nested = view.struct(1)
    assert nested is not None and nested.names == ("a", "b") and len(nested) == 2
    assert (nested.get(0), nested.get(1)) == (4, ["p", None])
    assert view.struct(2) is None and view.get(view.index("z")) is None
    with pytest.raises(TypeError):
        view.struct(0)
    with pytest.raises(IndexError):
        view.get(3)
    with pytest.raises(KeyError):
        view.index("nope")


# ---------------------------------------------------------------- schemas and values that do not fit

@pytest.mark.parametrize("arrow_type", [pa.uint8(), pa.float16(), pa.timestamp("ns"), pa.duration("s"),
                                        pa.date64(), pa.time32("ms"), pa.dictionary(pa.int8(), pa.string()),
                                        pa.list_(pa.uint64())])
def test_types_fory_has_not_are_unsupported(arrow_type: pa.DataType) -> None:
    with pytest.raises(UnsupportedError):
        encode_row([None], pa.schema([("x", arrow_type)]))


@pytest.mark.parametrize(("arrow_type", "value", "error"), [
    (pa.int8(), 128, ValueError), (pa.int32(), "1", TypeError), (pa.string(), b"x", TypeError),
    (pa.binary(), "x", TypeError), (pa.float32(), 1e39, ValueError),
    (pa.decimal128(4, 2), Decimal("100.00"), ValueError), (pa.decimal128(4, 2), Decimal("0.001"), ValueError),
    (pa.decimal128(4, 2), 1.5, TypeError), (pa.list_(pa.int8()), "ab", TypeError),
    (pa.list_(pa.int8()), [1, 300], ValueError), (pa.map_(pa.int8(), pa.int8()), [1, 2], TypeError),
    (pa.struct([("a", pa.int8())]), {"b": 1}, ValueError),
    (pa.struct([("a", pa.int8())]), [1, 2], ValueError),
])
def test_unfit_values_name_the_field(arrow_type: pa.DataType, value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="'x'"):
        encode_row([0, value], pa.schema([("n", pa.int8()), ("x", arrow_type)]))


def test_row_arity_must_match() -> None:
    with pytest.raises(ValueError):
        encode_row([1, 2], schema_of([pa.int8()]))


# ---------------------------------------------------------------- sort keys

FLAT_SCHEMAS = st.lists(st.tuples(st.sampled_from(KEY_TYPES), st.booleans()), min_size=1, max_size=4).map(
    lambda fields: schema_of([t for t, _ in fields], [n for _, n in fields]))


def model_key(schema: pa.Schema, row: tuple[Any, ...]) -> tuple[Any, ...]:
    """Paimon's key order written plainly: NULL first, Float.compare, strings as UTF-8 bytes."""
    def field_key(t: pa.DataType, v: Any) -> Any:
        if v is None:
            return (0,)
        if isinstance(v, float):
            return (1, (2, 0.0, 0) if math.isnan(v) else (1, v, math.copysign(1, v) > 0))
        return (1, v.encode() if isinstance(v, str) else v)
    return tuple(field_key(f.type, v) for f, v in zip(schema, row, strict=True))


@given(st.data(), FLAT_SCHEMAS)
def test_sort_keys_follow_paimon_key_order(data: st.DataObject, schema: pa.Schema) -> None:
    rows = data.draw(st.lists(rows_of(schema), min_size=1, max_size=12))
    encoded = [encode_row(r, schema) for r in rows]
    key = sort_key_function(schema)
    for a, row_a in zip(encoded, rows, strict=True):
        for b, row_b in zip(encoded, rows, strict=True):
            model_a, model_b = model_key(schema, row_a), model_key(schema, row_b)
            assert (key(a) < key(b)) == (model_a < model_b)
            assert (key(a) == key(b)) == (model_a == model_b)
    ordered = sorted(encoded, key=key)
    probe = data.draw(st.sampled_from(encoded))
    position = bisect.bisect_left(ordered, key(probe), key=key)
    assert key(ordered[position]) == key(probe)


def test_sort_key_of_a_not_null_fixed_key_is_its_values() -> None:
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.int32(), nullable=False)])
    key = sort_key_function(schema)
    assert key(encode_row([5, -2], schema)) == (5, -2)
    with pytest.raises(CodecError, match="NOT NULL"):
        key(encode_row([None, 1], schema))
    with pytest.raises(UnsupportedError):
        sort_key_function(pa.schema([("l", pa.list_(pa.int8()))]))


# ---------------------------------------------------------------- malformed input

def decode_everything(row: bytes, schema: pa.Schema) -> list[str]:
    """Every read path over ``row``: each decodes ("ok") or raises CodecError, nothing else."""
    reads = [lambda: decode_row(row, schema), lambda: decode_rows([row], schema),
             lambda: [RowView(row, schema).get(i) for i in range(len(schema))]]
    if all(f.type in KEY_TYPES for f in schema):
        reads.append(lambda: sort_key_function(schema)(row))
    outcomes = []
    for read in reads:
        try:
            read()
            outcomes.append("ok")
        except CodecError:
            outcomes.append("CodecError")
    return outcomes


@given(st.data(), SCHEMAS)
def test_truncated_rows_raise_codec_error(data: st.DataObject, schema: pa.Schema) -> None:
    row = encode_row(data.draw(rows_of(schema)), schema)
    cut = data.draw(st.integers(0, max(0, len(row) - 1)))
    outcomes = decode_everything(row[:cut], schema)
    if cut < bitmap_size(len(schema)) + 8 * len(schema):
        assert set(outcomes) == {"CodecError"}


@given(st.data(), SCHEMAS.filter(len))
def test_corrupt_rows_raise_only_codec_error(data: st.DataObject, schema: pa.Schema) -> None:
    row = bytearray(encode_row(data.draw(rows_of(schema)), schema))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(row) - 1))
        if data.draw(st.booleans()) and position + 8 <= len(row):  # a whole word: offsets and sizes
            row[position:position + 8] = data.draw(st.binary(min_size=8, max_size=8))
        else:
            row[position] ^= data.draw(st.integers(1, 255))
    assert set(decode_everything(bytes(row), schema)) <= {"ok", "CodecError"}


def _slot(offset: int, size: int) -> bytes:
    return struct.pack("<Q", offset << 32 | size)


@functools.cache
def _one_field_rows() -> dict[str, tuple[pa.Schema, bytes]]:
    cases = {"string": (pa.string(), "abc"), "list": (pa.list_(pa.string()), ["a", None]),
             "map": (pa.map_(pa.int8(), pa.int8()), [(1, 2)]),
             "struct": (pa.struct([("a", pa.string())]), {"a": "z"}),
             "decimal": (pa.decimal128(5, 1), Decimal("1.5"))}
    return {name: (schema_of([t]), encode_row([v], schema_of([t]))) for name, (t, v) in cases.items()}


@pytest.mark.parametrize(("case", "position", "patch", "message"), [
    ("string", 8, _slot(16, 9), "outside the variable region"),     # size past the end
    ("string", 8, _slot(2**32 - 1, 3), "outside the variable region"),  # offset past the end
    ("string", 8, _slot(0, 3), "outside the variable region"),      # offset into the fixed region
    ("string", 16, b"\xff\xfe\xfd", "not UTF-8"),
    ("string", 0, b"\x02", "null bits set past"),
    ("list", 16, struct.pack("<Q", 2**63), "claims"),                # element count
    ("list", 16, struct.pack("<Q", 5), "needs"),
    ("list", 24, b"\x04", "null bits set past"),
    ("list", 32, _slot(40, 1), "outside the variable region"),       # element size past the array
    ("map", 16, struct.pack("<Q", 2**40), "does not fit"),          # key-array size
    ("map", 48, struct.pack("<Q", 0), "keys but"),                # values array of no elements
    ("struct", 8, _slot(16, 8), "shorter than"),                     # nested row too small
    ("decimal", 8, _slot(16, 16), "expected 32"),
    ("decimal", 16, (10**5).to_bytes(32, "little"), "more than 5 digits"),
])
def test_malformed_fields_raise_codec_error(case: str, position: int, patch: bytes, message: str) -> None:
    schema, row = _one_field_rows()[case]
    bad = bytearray(row)
    bad[position:position + len(patch)] = patch
    with pytest.raises(CodecError, match=message):
        decode_row(bytes(bad), schema)
    with pytest.raises(CodecError, match=message):
        RowView(bytes(bad), schema).get(0)
    with pytest.raises(CodecError):
        decode_rows([bytes(bad)], schema)


def test_a_view_never_reads_past_its_row() -> None:
    schema = schema_of([pa.string()])
    row = bytearray(encode_row(["abc"], schema))
    row[8:16] = _slot(16, 12)  # size reaches into the neighbouring bytes
    buffer = bytes(8) + bytes(row) + b"neighbour"
    view = RowView(buffer, schema, offset=8, size=len(row))
    with pytest.raises(CodecError):
        view.get(0)
    with pytest.raises(CodecError):
        RowView(buffer, schema, offset=8, size=len(buffer))
    with pytest.raises(CodecError, match="shorter"):
        RowView(b"\x00" * 8, schema)


def test_values_arrow_rejects_are_codec_errors() -> None:
    schema = pa.schema([("m", pa.map_(pa.int8(), pa.int8()))])
    row = encode_row([[(None, 1)]], schema)  # the row format allows a null key; Arrow does not
    assert decode_row(row, schema) == ([(None, 1)],)
    with pytest.raises(CodecError, match="'m'"):
        decode_rows([row], schema)
