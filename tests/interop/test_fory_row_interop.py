"""The Fory row codec against pyfory 1.7.7 (``pyfory.format``), the Python binding of Fory's C++
row format: pyfory reads paimond's rows, paimond reads pyfory's, and both write the same bytes.

Where pyfory differs (checked below, each by its own test):
- pyfory leaves the slot of a null row field (at any depth) as it finds it in its growing
  buffer; paimond zeroes it (as Java's ``BinaryRowWriter.setNullAt`` does). Byte comparisons
  zero those slots in pyfory's rows first and compare every other byte.
- pyfory's Python encoder has no writer for duration and decimal (TypeError), nor for an
  empty ``bytes`` value (IndexError); it reads them only through its raw getters.
- pyfory's timestamps go through float seconds (``int(dt.timestamp() * 1e6)``), so it stores
  some instants a microsecond off; paimond takes the microseconds themselves.
- pyfory's getters cannot follow a list or map nested directly in a list or map (its
  ``ListType.value_type`` loses the subtype), so pyfory reads those only as far as it can;
  it writes them, and paimond reads them.
"""

from __future__ import annotations

import datetime
import os
import struct
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.fory_values import (
    FIXED_TYPES,
    INT64,
    MAP_KEY_TYPES,
    decimal_types,
    non_null_values,
    same,
    struct_of,
)

from paimond.format.fory_row import decode_row, encode_row
from paimond.format.fory_row.layout import Node, array_header_size, bitmap_size, compile_schema

try:
    import pyfory.format as pf
except ImportError:  # a test dependency: missing only outside `make install`
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("pyfory is not installed", allow_module_level=True)

# pyfory warns about its own Cython enum on every encoder it creates.
pytestmark = pytest.mark.filterwarnings("ignore:enum class CTypeId:UserWarning")
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
DATE_DAYS = (-719162, 2932896)  # datetime.date's range, which pyfory's date writer needs
TIMESTAMP_US = (-62135596800 * 10**6, 253402300799999999)
EXACT = Context(prec=100)


# ---------------------------------------------------------------- Arrow types as pyfory's

def pyfory_type(t: pa.DataType) -> Any:
    if pa.types.is_struct(t):
        return pf.struct([pf.field(f.name, pyfory_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pf.map_(pyfory_type(t.key_type), pyfory_type(t.item_type))
    if pa.types.is_list(t):
        return pf.list_(pyfory_type(t.value_type))
    if pa.types.is_decimal(t):
        return pf.decimal(t.precision, t.scale)
    return {"bool": pf.boolean, "int8": pf.int8, "int16": pf.int16, "int32": pf.int32,
            "int64": pf.int64, "float": pf.float32, "double": pf.float64, "date32[day]": pf.date32,
            "timestamp[us]": pf.timestamp, "duration[us]": pf.duration, "string": pf.utf8,
            "binary": pf.binary}[str(t)]()


def pyfory_schema(schema: pa.Schema) -> Any:
    return pf.schema([pf.field(f.name, pyfory_type(f.type)) for f in schema])


def pyfory_row(schema: pa.Schema, values: Any) -> bytes:
    """The row pyfory writes for values it takes (``to_pyfory_value``)."""
    encoder = pf.create_row_encoder(pyfory_schema(schema))
    return bytes(encoder.to_row(dict(zip(schema.names, values, strict=True))).to_bytes())


_RAW_GETTERS = {"bool": "get_boolean", "int8": "get_int8", "int16": "get_int16", "int32": "get_int32",
                "int64": "get_int64", "float": "get_float", "double": "get_double",
                "date32[day]": "get_int32", "timestamp[us]": "get_int64", "duration[us]": "get_int64",
                "string": "get_str", "binary": "get_binary"}


def read_with_pyfory(getter: Any, i: int, t: pa.DataType) -> Any:
    """Field or element ``i`` through pyfory's own getters, in paimond's value dialect."""
    if pa.types.is_struct(t):
        row = getter.get_struct(i)
        return None if row is None else {f.name: read_with_pyfory(row, k, f.type) for k, f in enumerate(t)}
    if pa.types.is_list(t):
        array = getter.get_array_data(i)
        return None if array is None else [read_with_pyfory(array, j, t.value_type)
                                           for j in range(array.num_elements)]
    if pa.types.is_map(t):
        entries = getter.get_map_data(i)
        if entries is None:
            return None
        keys, values = entries.keys_array(), entries.values_array()
        return [(read_with_pyfory(keys, j, t.key_type), read_with_pyfory(values, j, t.item_type))
                for j in range(entries.num_elements)]
    if pa.types.is_decimal(t):
        raw = getter.get_binary(i)
        unscaled = None if raw is None else int.from_bytes(raw, "little", signed=True)
        return None if unscaled is None else Decimal(unscaled).scaleb(-t.scale, EXACT)
    return getattr(getter, _RAW_GETTERS[str(t)])(i)


def to_pyfory_value(value: Any, t: pa.DataType) -> Any:
    """A paimond value as pyfory's encoder takes it: dates, datetimes and dicts."""
    if value is None:
        return None
    if pa.types.is_struct(t):
        return {f.name: to_pyfory_value(value[f.name], f.type) for f in t}
    if pa.types.is_map(t):
        return {to_pyfory_value(k, t.key_type): to_pyfory_value(v, t.item_type) for k, v in value}
    if pa.types.is_list(t):
        return [to_pyfory_value(v, t.value_type) for v in value]
    if pa.types.is_date32(t):
        return datetime.date(1970, 1, 1) + datetime.timedelta(days=value)
    if pa.types.is_timestamp(t):
        return EPOCH + datetime.timedelta(microseconds=value)
    return value


def as_pyfory_stores(value: Any, t: pa.DataType) -> Any:
    """``value`` with each timestamp as pyfory computes it, through float seconds."""
    if value is None:
        return None
    if pa.types.is_struct(t):
        return {f.name: as_pyfory_stores(value[f.name], f.type) for f in t}
    if pa.types.is_map(t):
        return [(as_pyfory_stores(k, t.key_type), as_pyfory_stores(v, t.item_type)) for k, v in value]
    if pa.types.is_list(t):
        return [as_pyfory_stores(v, t.value_type) for v in value]
    if pa.types.is_timestamp(t):
        return int((EPOCH + datetime.timedelta(microseconds=value)).timestamp() * 1_000_000)
    return value


# ---------------------------------------------------------------- strategies

def _nest(children: st.SearchStrategy[pa.DataType], containers: st.SearchStrategy[pa.DataType]
          ) -> st.SearchStrategy[pa.DataType]:
    return st.one_of(st.builds(pa.list_, containers), st.builds(pa.map_, MAP_KEY_TYPES, containers),
                     st.lists(children, max_size=3).map(struct_of))


_WRITABLE_LEAVES = st.sampled_from([t for t in FIXED_TYPES if t != pa.duration("us")]
                                   + [pa.string(), pa.binary()])
WRITABLE_TYPES = st.recursive(_WRITABLE_LEAVES, lambda inner: _nest(inner, inner), max_leaves=6)
"""Every type pyfory writes, nested any way."""

_READABLE_LEAVES = st.one_of(st.sampled_from(FIXED_TYPES + [pa.string(), pa.binary()]), decimal_types(38))
READABLE_TYPES = st.recursive(
    _READABLE_LEAVES,
    lambda inner: _nest(inner, st.one_of(_READABLE_LEAVES, st.lists(inner, max_size=3).map(struct_of))),
    max_leaves=6)
"""Every type pyfory reads: no list or map directly inside a list or map."""


def pyfory_values(t: pa.DataType) -> st.SearchStrategy[Any]:
    """Values pyfory's encoder takes: bytes not empty, dates and instants datetime holds,
    unique map keys."""
    if pa.types.is_struct(t):
        inner: st.SearchStrategy[Any] = st.fixed_dictionaries({f.name: pyfory_values(f.type) for f in t})
    elif pa.types.is_map(t):
        inner = st.lists(st.tuples(pyfory_values(t.key_type).filter(lambda k: k is not None),
                                   pyfory_values(t.item_type)), max_size=3, unique_by=lambda kv: kv[0])
    elif pa.types.is_list(t):
        inner = st.lists(pyfory_values(t.value_type), max_size=4)
    elif pa.types.is_binary(t):
        inner = st.binary(min_size=1, max_size=12)
    elif pa.types.is_date32(t):
        inner = st.integers(*DATE_DAYS)
    elif pa.types.is_timestamp(t):
        inner = st.integers(*TIMESTAMP_US)
    else:
        inner = non_null_values(t)
    return st.none() | inner


def schemas(types: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.Schema]:
    return st.lists(types, min_size=1, max_size=6).map(
        lambda ts: pa.schema([(f"c{i}", t) for i, t in enumerate(ts)]))


# ---------------------------------------------------------------- null slots

def null_slots(buf: bytes, node: Node, start: int) -> list[int]:
    """Positions of the 8-byte slots of null row fields anywhere in the row at ``start``."""
    positions = []
    n = len(node.children)
    null_bits = int.from_bytes(buf[start:start + bitmap_size(n)], "little")
    for i, child in enumerate(node.children):
        slot = start + bitmap_size(n) + 8 * i
        if null_bits >> i & 1:
            positions.append(slot)
        elif not child.code:
            offset = struct.unpack_from("<Q", buf, slot)[0] >> 32
            positions += _nested_null_slots(buf, child, start + offset)
    return positions


def _nested_null_slots(buf: bytes, node: Node, start: int) -> list[int]:
    if node.kind == "struct":
        return null_slots(buf, node, start)
    if node.kind == "map":
        keys_size = struct.unpack_from("<Q", buf, start)[0]
        return (_nested_null_slots(buf, Node("list", children=(node.children[0],)), start + 8)
                + _nested_null_slots(buf, Node("list", children=(node.children[1],)), start + 8 + keys_size))
    if node.kind != "list" or node.children[0].code:
        return []
    count = struct.unpack_from("<Q", buf, start)[0]
    header = array_header_size(count)
    null_bits = int.from_bytes(buf[start + 8:start + header], "little")
    positions = []
    for j in range(count):
        if not null_bits >> j & 1:
            offset = struct.unpack_from("<Q", buf, start + header + 8 * j)[0] >> 32
            positions += _nested_null_slots(buf, node.children[0], start + offset)
    return positions


def zero_null_slots(row: bytes, schema: pa.Schema) -> bytes:
    out = bytearray(row)
    for position in null_slots(row, compile_schema(schema), 0):
        out[position:position + 8] = bytes(8)
    return bytes(out)


# ---------------------------------------------------------------- both directions

@given(st.data(), schemas(READABLE_TYPES))
def test_pyfory_reads_paimond_rows(data: st.DataObject, schema: pa.Schema) -> None:
    values = data.draw(st.tuples(*[st.none() | non_null_values(f.type) for f in schema]))
    row = encode_row(values, schema)
    theirs = pf.RowData(pyfory_schema(schema), row)
    assert same(tuple(read_with_pyfory(theirs, i, f.type) for i, f in enumerate(schema)), values)


@given(st.data(), schemas(WRITABLE_TYPES))
def test_paimond_reads_pyfory_rows_and_writes_the_same_bytes(data: st.DataObject, schema: pa.Schema) -> None:
    values = data.draw(st.tuples(*[pyfory_values(f.type) for f in schema]))
    theirs = pyfory_row(schema, [to_pyfory_value(v, f.type) for f, v in zip(schema, values, strict=True)])
    stored = tuple(as_pyfory_stores(v, f.type) for f, v in zip(schema, values, strict=True))
    assert same(decode_row(theirs, schema), stored)
    ours = encode_row(stored, schema)
    assert zero_null_slots(theirs, schema) == ours
    assert zero_null_slots(ours, schema) == ours


def test_pyfory_leaves_null_slots_as_it_finds_them() -> None:
    """pyfory writes a null field's bit only; the slot keeps what the buffer held. Here the
    nested row reuses buffer bytes, so whatever they hold, only null slots may differ."""
    schema = pa.schema([("a", pa.string()), ("n", pa.int64()),
                        ("s", pa.struct([("x", pa.int8()), ("y", pa.string())]))])
    values = ("abc", None, {"x": 3, "y": None})
    theirs = pyfory_row(schema, values)
    ours = encode_row(values, schema)
    assert null_slots(ours, compile_schema(schema), 0) == [16, 56]
    assert [ours[p:p + 8] for p in (16, 56)] == [bytes(8)] * 2
    differing = {i // 8 * 8 for i, (a, b) in enumerate(zip(theirs, ours, strict=True)) if a != b}
    assert len(theirs) == len(ours) and differing <= {16, 56}
    assert decode_row(theirs, schema) == values


def test_pyfory_encoder_writes_no_duration_decimal_or_empty_bytes() -> None:
    for t, value, error in ((pa.duration("us"), 5, TypeError),
                            (pa.decimal128(5, 2), Decimal("1.25"), TypeError),
                            (pa.binary(), b"", IndexError)):
        schema = pa.schema([("x", t)])
        with pytest.raises(error):
            pf.create_row_encoder(pyfory_schema(schema)).to_row({"x": value})
        row = encode_row([value], schema)  # paimond writes them, and pyfory's raw getters read them
        assert read_with_pyfory(pf.RowData(pyfory_schema(schema), row), 0, t) == value


def test_pyfory_timestamps_go_through_float_seconds() -> None:
    schema = pa.schema([("t", pa.timestamp("us"))])
    encoder = pf.create_row_encoder(pyfory_schema(schema))
    for micros in (-1_000_001, 253402300799999999):
        theirs = encoder.to_row({"t": EPOCH + datetime.timedelta(microseconds=micros)}).to_bytes()
        assert decode_row(theirs, schema) == (micros + 1,)  # pyfory's float is one microsecond off
        assert decode_row(encode_row([micros], schema), schema) == (micros,)


def test_int64_extremes_agree() -> None:
    schema = pa.schema([("a", pa.int64()), ("b", pa.list_(pa.int64())), ("c", pa.float64())])
    values = (INT64[0], [INT64[1], None], float("-inf"))
    theirs = pyfory_row(schema, values)
    assert theirs == encode_row(values, schema)
    assert decode_row(theirs, schema) == values
