"""File indexes without Java: hypothesis round trips of every index type over every column type
it accepts (queries answer exactly what a scan answers; the bloom filter never misses a value
and keeps its configured false-positive rate), Arrow input, the container and its names, the
``file-index.*`` options, MAP-key indexes, Java hash-map orders, and corrupt bytes that raise
CodecError and nothing else."""

from __future__ import annotations

import operator
import random
import struct
from decimal import Decimal
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from paimond.errors import CodecError, UnsupportedError
from paimond.format.binary.java_order import java_hashmap_order, java_string_hash
from paimond.format.file_index import (
    build_file_index,
    create_index_writer,
    decode_file_index,
    decode_index,
    encode_file_index,
)
from paimond.format.file_index.bitmap import BitmapSettings
from paimond.format.file_index.bloom import BloomFilterSettings, bloom_sizing
from paimond.format.file_index.columns import ColumnIndexes, IndexColumn
from paimond.format.file_index.container import decode_java_utf, encode_java_utf
from paimond.format.file_index.hashing import murmur_hash, thomas_wang_hash, xxh64
from paimond.format.file_index.keys import IndexWriter, key_type, keys_of
from paimond.format.types.arrow_types import to_arrow_type
from paimond.format.types.data_types import (
    MAX_LENGTH,
    BigIntType,
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
    SmallIntType,
    TimestampType,
    TimeType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
)
from paimond.format.types.values import Timestamp
from paimond.table.options.file_index import (
    file_index_columns,
    in_manifest_threshold_bytes,
    index_settings,
    parse_memory_size,
)

INDEX_TYPES = ("bloom-filter", "bitmap", "range-bitmap", "bsi")


def _writer(index_type: str, data_type: DataType, options: dict[str, Any]) -> IndexWriter:
    """A writer with the settings that ``file-index.<type>.<column>.*`` values give."""
    return create_index_writer(index_type, data_type, index_settings(index_type, options))


def _build(columns: dict[str, tuple[DataType, Any]], table_options: dict[str, str]) -> bytes | None:
    indexes: ColumnIndexes = file_index_columns(table_options)
    return build_file_index(columns, indexes)


def _timestamps(precision: int) -> st.SearchStrategy[Timestamp]:
    step = {3: 1_000_000, 6: 1000, 9: 1}[precision]
    bound = 9 * 10**12 if precision == 9 else 10**13  # Arrow holds TIMESTAMP(9) as int64 nanos
    return st.builds(lambda ms, n: Timestamp(ms, n * step), st.integers(-bound, bound),
                     st.integers(0, 999_999 // step))


def _decimals(precision: int, scale: int) -> st.SearchStrategy[Decimal]:
    bound = min(10**precision, 2**63) - 1
    return st.integers(-bound, bound).map(lambda u: Decimal(u).scaleb(-scale))


# name -> (type, values, index types that reject it)
COLUMN_TYPES: dict[str, tuple[DataType, st.SearchStrategy[Any], set[str]]] = {
    "TINYINT": (TinyIntType(), st.integers(-128, 127), set()),
    "SMALLINT": (SmallIntType(), st.integers(-(2**15), 2**15 - 1), set()),
    "INT": (IntType(), st.integers(-(2**31), 2**31 - 1), set()),
    "BIGINT": (BigIntType(), st.integers(-(2**63) + 1, 2**63 - 1), set()),
    "DATE": (DateType(), st.integers(-(10**6), 10**6), set()),
    "TIME": (TimeType(), st.integers(0, 86_399_999), set()),
    "FLOAT": (FloatType(), st.floats(width=32), {"bsi"}),
    "DOUBLE": (DoubleType(), st.floats(), {"bsi"}),
    "BOOLEAN": (BooleanType(), st.booleans(), {"bloom-filter", "bsi"}),
    "STRING": (VarCharType(length=MAX_LENGTH), st.text(max_size=12), {"bsi"}),
    "CHAR(3)": (CharType(length=3), st.text(max_size=3), {"bsi"}),
    "BYTES": (VarBinaryType(length=MAX_LENGTH), st.binary(max_size=12),
              {"bitmap", "range-bitmap", "bsi"}),
    "DECIMAL(10, 2)": (DecimalType(precision=10, scale=2), _decimals(10, 2),
                       {"bloom-filter", "bitmap"}),
    "DECIMAL(38, 4)": (DecimalType(precision=38, scale=4), _decimals(38, 4),
                       {"bloom-filter", "bitmap", "range-bitmap"}),
    "TIMESTAMP(3)": (TimestampType(precision=3), _timestamps(3), set()),
    "TIMESTAMP(6)": (TimestampType(precision=6), _timestamps(6), set()),
    "TIMESTAMP(9)": (TimestampType(precision=9), _timestamps(9), {"range-bitmap"}),
    "TIMESTAMP_LTZ(3)": (LocalZonedTimestampType(precision=3), _timestamps(3), set()),
}


@st.composite
def columns(draw: st.DrawFn, values: st.SearchStrategy[Any]) -> tuple[list[Any], list[Any]]:
    """Rows drawn from a small pool (duplicates, NULLs), plus values to query for."""
    pool = draw(st.lists(values, min_size=1, max_size=6))
    rows = draw(st.lists(st.sampled_from([*pool, None]), max_size=60))
    return rows, pool + draw(st.lists(values, max_size=4))


def scan(data_type: DataType, rows: list[Any], op: Any, value: Any) -> BitMap:
    kind = key_type(data_type)
    target = kind.order(kind.to_key(value))
    return BitMap(i for i, v in enumerate(rows)
                  if v is not None and op(kind.order(kind.to_key(v)), target))


def arrow_column(data_type: DataType, rows: list[Any]) -> pa.Array:
    """The Arrow array paimond's data files would hold for ``rows``."""
    arrow_type = to_arrow_type(data_type)
    if pa.types.is_timestamp(arrow_type):
        unit = arrow_type.unit
        rows = [None if v is None else v.millis if unit == "ms" else v.micros if unit == "us"
                else v.nanos for v in rows]
    return pa.array(rows, arrow_type)


def _check_queries(index: Any, index_type: str, data_type: DataType, rows: list[Any],
                   queries: list[Any]) -> None:
    nulls = BitMap(i for i, v in enumerate(rows) if v is None)
    if index_type == "bloom-filter":
        assert all(index.might_contain(v) for v in rows)  # never a false negative
        return
    assert index.is_null() == nulls
    assert index.is_not_null() == BitMap(range(len(rows))) - nulls
    for value in queries:
        equal = scan(data_type, rows, operator.eq, value)
        assert index.equal(value) == equal
        assert index.not_equal(value) == BitMap(range(len(rows))) - nulls - equal
        if index_type == "bitmap":
            continue
        assert index.less_than(value) == scan(data_type, rows, operator.lt, value)
        assert index.less_or_equal(value) == scan(data_type, rows, operator.le, value)
        assert index.greater_than(value) == scan(data_type, rows, operator.gt, value)
        assert index.greater_or_equal(value) == scan(data_type, rows, operator.ge, value)
    assert index.is_in(queries[:3]) == BitMap.union(
        BitMap(), *(scan(data_type, rows, operator.eq, v) for v in queries[:3]))
    assert index.equal(None) == BitMap()


_OPTIONS = {"bloom-filter": st.fixed_dictionaries({"items": st.sampled_from(["10", "100"]),
                                                   "fpp": st.sampled_from(["0.1", "0.01"])}),
            "bitmap": st.fixed_dictionaries({"version": st.sampled_from(["1", "2"]),
                                             "index-block-size": st.sampled_from(["72b", "16kb"])}),
            "range-bitmap": st.fixed_dictionaries({"chunk-size": st.sampled_from(
                ["0b", "24b", "16kb"])}),
            "bsi": st.just({})}


@pytest.mark.parametrize("index_type", INDEX_TYPES)
@pytest.mark.parametrize("type_name", sorted(COLUMN_TYPES))
@settings(max_examples=12, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_index_round_trips_every_type(index_type: str, type_name: str,
                                            data: st.DataObject) -> None:
    data_type, values, rejected_by = COLUMN_TYPES[type_name]
    options = data.draw(_OPTIONS[index_type])
    if index_type in rejected_by:
        with pytest.raises(UnsupportedError):
            _writer(index_type, data_type, options)
        return
    rows, queries = data.draw(columns(values))
    writer = _writer(index_type, data_type, options)
    cut = data.draw(st.integers(0, len(rows)))
    writer.write(rows[:cut])
    writer.write(rows[cut:])
    payload = writer.serialized_bytes()
    _check_queries(decode_index(index_type, data_type, payload), index_type, data_type, rows,
                   queries)
    arrow = arrow_column(data_type, rows)
    from_arrow = _writer(index_type, data_type, options)
    from_arrow.write(arrow)  # bloom and bitmap: vectorized
    assert from_arrow.serialized_bytes() == payload
    in_two = _writer(index_type, data_type, options)
    in_two.write(arrow.slice(0, cut))
    in_two.write(arrow.slice(cut))
    assert in_two.serialized_bytes() == payload
    per_row = _writer(index_type, data_type, options)  # keys value by value
    per_row.write_keys(keys_of(data_type, arrow))
    assert per_row.serialized_bytes() == payload


@settings(max_examples=25)
@given(st.lists(st.integers(-(2**40), 2**40) | st.none(), max_size=80))
def test_bsi_handles_negative_and_positive_values(rows: list[int | None]) -> None:
    writer = _writer("bsi", BigIntType(), {})
    writer.write(rows)
    index = decode_index("bsi", BigIntType(), writer.serialized_bytes())
    for value in [*{v for v in rows if v is not None}, 0, -1, 2**41, -(2**41), -(2**63)]:
        for op, query in ((operator.lt, index.less_than), (operator.ge, index.greater_or_equal),
                          (operator.eq, index.equal)):
            assert query(value) == BitMap(i for i, v in enumerate(rows)
                                          if v is not None and op(v, value))


def test_bitmap_refuses_a_value_larger_than_an_index_block_like_java() -> None:
    writer = _writer("bitmap", VarCharType(length=MAX_LENGTH),
                                 {"index-block-size": "20b"})
    writer.write(["abcd", "abcd"])  # count 4 + (length 4 + 4 bytes + offset, length 8) = 20
    assert decode_index("bitmap", VarCharType(length=MAX_LENGTH),
                        writer.serialized_bytes()).equal("abcd") == BitMap([0, 1])
    writer.write(["abcde"])
    with pytest.raises(UnsupportedError, match="index fail"):
        writer.serialized_bytes()


def test_bsi_refuses_long_min_like_java() -> None:
    writer = _writer("bsi", BigIntType(), {})
    with pytest.raises(UnsupportedError, match="values should be non-negative"):
        writer.write([1, -(2**63)])


@pytest.mark.parametrize("type_name", ["INT", "STRING"])
def test_bloom_false_positive_rate_is_near_fpp(type_name: str) -> None:
    data_type = COLUMN_TYPES[type_name][0]
    make = (lambda i: i) if type_name == "INT" else (lambda i: f"key-{i}")
    items, fpp = 5000, 0.01
    writer = _writer("bloom-filter", data_type, {"items": str(items),
                                                              "fpp": str(fpp)})
    writer.write([make(i) for i in range(items)])
    index = decode_index("bloom-filter", data_type, writer.serialized_bytes())
    assert all(index.might_contain(make(i)) for i in range(items))
    absent = range(10**6, 10**6 + 100_000)
    false_positives = sum(index.might_contain(make(i)) for i in absent)
    assert false_positives / len(absent) <= 1.5 * fpp


def test_bloom_sizing_matches_java() -> None:
    assert bloom_sizing(100, 0.01) == (7, 960)  # MANIFEST.md 1.2
    assert bloom_sizing(1000, 0.05) == (4, 6240)
    assert bloom_sizing(10, 0.1) == (3, 48)
    assert bloom_sizing(1_000_000, 0.1)[1] % 8 == 0


# --------------------------------------------------------------------------- hashing


def test_hashes_match_reference_values() -> None:
    assert xxh64(b"") == struct.unpack(">q", bytes.fromhex("ef46db3751d8e999"))[0]
    assert xxh64(b"a") & (2**64 - 1) == 0xD24EC4F1A98C6E5B
    assert xxh64(b"Nobody inspects the spammish repetition") & (2**64 - 1) == 0xFBCEA83C8A378BF1
    assert thomas_wang_hash(0) == 0 and thomas_wang_hash(5) == -3822126110415902464
    assert murmur_hash(b"apple") == 329715231  # BinaryString.fromString("apple").hashCode()
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # two UTF-16 units


# ------------------------------------------------------------------ Java HashMap order


def _literal_hashmap(calls: list[int], compute_if_absent: bool) -> list[int]:
    """A line-by-line model of java.util.HashMap's linked buckets (no tree bins)."""
    table: list[list[int]] = []
    size = 0

    def resize() -> None:
        nonlocal table
        old = table
        table = [[] for _ in range(max(16, 2 * len(old)))]
        for bucket in old:
            for key in bucket:
                table[_spread(key) & (len(table) - 1)].append(key)

    for key in calls:
        if compute_if_absent and (not table or size > int(0.75 * len(table))):
            resize()
        if not table:
            resize()
        bucket = table[_spread(key) & (len(table) - 1)]
        if key in bucket:
            continue
        n = len(bucket)
        if compute_if_absent:
            bucket.insert(0, key)
        else:
            bucket.append(key)
        if n >= (7 if compute_if_absent else 8) and len(table) < 64:
            resize()
        size += 1
        if not compute_if_absent and size > int(0.75 * len(table)):
            resize()
    return [k for bucket in table for k in bucket]


def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


@settings(max_examples=150)
@given(st.lists(st.integers(0, 2**20).map(lambda k: k * 16) | st.integers(0, 100),
                max_size=150), st.booleans())
def test_hashmap_order_matches_a_literal_hashmap(calls: list[int], compute_if_absent: bool) -> None:
    assert java_hashmap_order(calls, lambda k: k, compute_if_absent=compute_if_absent) == \
        _literal_hashmap(calls, compute_if_absent)


# ------------------------------------------------------------------------- container


_NAMES = st.text(min_size=0, max_size=8) | st.sampled_from(["\x00", "\U0001F600", "日本"])


@settings(max_examples=60)
@given(st.dictionaries(_NAMES, st.dictionaries(_NAMES, st.binary(max_size=20) | st.none(),
                                               max_size=3), max_size=4))
def test_container_round_trips(indexes: dict[str, dict[str, bytes | None]]) -> None:
    data = encode_file_index(indexes)
    assert decode_file_index(data) == indexes
    assert len(data) == struct.unpack_from(">i", data, 12)[0] + sum(
        len(p) for t in indexes.values() for p in t.values() if p is not None)


def test_names_are_java_modified_utf8() -> None:
    assert encode_java_utf("\x00") == b"\x00\x02\xc0\x80"
    assert encode_java_utf("\U0001F600") == b"\x00\x06\xed\xa0\xbd\xed\xb8\x80"
    assert encode_java_utf("é") == b"\x00\x02\xc3\xa9"
    assert decode_java_utf(b"\x00\x06\xed\xa0\xbd\xed\xb8\x80", 0) == ("\U0001F600", 8)
    with pytest.raises(CodecError, match="modified UTF-8"):
        decode_java_utf(b"\x00\x01\x80", 0)


def test_container_errors() -> None:
    good = encode_file_index({"c": {"bitmap": b"abc"}})
    with pytest.raises(CodecError, match="not a file index"):
        decode_file_index(b"\x00" * 32)
    with pytest.raises(CodecError, match="version 2"):
        decode_file_index(good[:8] + struct.pack(">i", 2) + good[12:])
    with pytest.raises(CodecError):
        decode_file_index(good[:-1])


# ------------------------------------------------------------- options and the builder


def test_file_index_options() -> None:
    options = {"file-index.bloom-filter.columns": "a, b", "file-index.bitmap.columns": "b",
               "file-index.bloom-filter.a.fpp": "0.05", "file-index.bitmap.b.version": "1",
               "file-index.in-manifest-threshold": "1kb", "file-index.read.enabled": "true",
               "bucket": "2"}
    columns = file_index_columns(options)
    assert columns == {IndexColumn("a"): {"bloom-filter": BloomFilterSettings(fpp=0.05)},
                       IndexColumn("b"): {"bloom-filter": BloomFilterSettings(),
                                          "bitmap": BitmapSettings(version=1)}}
    assert list(columns) == java_hashmap_order([IndexColumn("a"), IndexColumn("b")],
                                               IndexColumn.java_hash, compute_if_absent=True)
    assert in_manifest_threshold_bytes(options) == 1024
    assert in_manifest_threshold_bytes({}) == 500
    assert file_index_columns({"bucket": "1"}) == {}
    with pytest.raises(UnsupportedError, match="should not have empty column"):
        file_index_columns({"file-index.bitmap.columns": "a,,b"})
    with pytest.raises(UnsupportedError, match="column 'c' is not declared"):
        file_index_columns({"file-index.bitmap.columns": "a", "file-index.bitmap.c.version": "1"})
    with pytest.raises(UnsupportedError, match="not an int"):
        _writer("bloom-filter", IntType(), {"items": "many"})
    with pytest.raises(UnsupportedError, match="Can't find file index for type: zonemap"):
        _writer("zonemap", IntType(), {})


def test_memory_sizes_parse_like_java() -> None:
    assert parse_memory_size("16kb") == 16384
    assert parse_memory_size("64b") == 64
    assert parse_memory_size(" 2 MB ") == 2 << 20
    assert parse_memory_size("1024") == 1024
    assert parse_memory_size("1 kibibytes") == 1024
    for bad in ("", "kb", "1 kib", "-1b", "1.5kb"):
        with pytest.raises(ValueError):
            parse_memory_size(bad)


def test__build() -> None:
    ints = (IntType(), [3, None, 3, 7])
    strings = (VarCharType(length=MAX_LENGTH), ["x", "y", None, "x"])
    assert _build({"i": ints}, {"bucket": "1"}) is None
    with pytest.raises(UnsupportedError, match="zz does not exist"):
        _build({"i": ints}, {"file-index.bitmap.columns": "zz"})
    with pytest.raises(ValueError, match="different lengths"):
        _build({"i": ints, "s": (strings[0], ["x"])},
                         {"file-index.bitmap.columns": "i,s"})
    options = {"file-index.bitmap.columns": "i,s", "file-index.bsi.columns": "i"}
    container = decode_file_index(_build({"i": ints, "s": strings}, options) or b"")
    assert list(container) == java_hashmap_order(["i", "s"], java_string_hash,
                                                 compute_if_absent=True)
    assert list(container["i"]) == java_hashmap_order(["bitmap", "bsi"], java_string_hash)
    bitmap = decode_index("bitmap", IntType(), container["i"]["bitmap"] or b"")
    assert bitmap.equal(3) == BitMap([0, 2])
    arrow = _build({"i": (IntType(), pa.chunked_array([[3, None], [3, 7]])),
                              "s": (strings[0], pa.array(strings[1]))}, options)
    assert arrow == _build({"i": ints, "s": strings}, options)


def test_map_key_indexes() -> None:
    map_type = MapType(key=VarCharType(length=MAX_LENGTH), value=IntType())
    rows = [[("a", 1), ("b", 2)], None, [("b", 2)], [("a", 5), ("c", 9)]]
    options = {"file-index.bitmap.columns": "m[a],m[b]", "file-index.bitmap.m.version": "1"}
    data = _build({"m": (map_type, rows)}, options)
    container = decode_file_index(data or b"")
    assert sorted(container) == ["m[a]", "m[b]"]
    a = decode_index("bitmap", IntType(), container["m[a]"]["bitmap"] or b"")
    assert (container["m[a]"]["bitmap"] or b"")[0] == 1  # the map column's option applies
    assert a.equal(1) == BitMap([0]) and a.equal(5) == BitMap([3])
    assert a.is_null() == BitMap([1, 2])
    arrow = pa.array(rows, pa.map_(pa.string(), pa.int32()))
    assert _build({"m": (map_type, arrow)}, options) == data
    with pytest.raises(UnsupportedError, match="not map type"):
        _build({"m": (IntType(), [1])}, {"file-index.bitmap.columns": "m[a]"})


# ------------------------------------------------------------------------ corruption


@cache
def _sample_container(seed: int) -> tuple[bytes, dict[str, DataType]]:
    rng = random.Random(seed)
    ints = [rng.choice([None, *range(-5, 40)]) for _ in range(rng.randrange(1, 80))]
    strings = [rng.choice([None, "a", "bb", "ccc", "dddd"]) for _ in ints]
    types = {"i": IntType(), "s": VarCharType(length=MAX_LENGTH)}
    options = {"file-index.bloom-filter.columns": "i,s", "file-index.bitmap.columns": "i,s",
               "file-index.range-bitmap.columns": "i,s", "file-index.bsi.columns": "i",
               "file-index.bitmap.i.version": rng.choice(["1", "2"]),
               "file-index.range-bitmap.s.chunk-size": "8b"}
    data = _build({"i": (types["i"], ints), "s": (types["s"], strings)}, options)
    assert data is not None
    return data, types


def _decode_and_query(data: bytes, types: dict[str, DataType]) -> None:
    for column, indexes in decode_file_index(data).items():
        for index_type, payload in indexes.items():
            if payload is None or column not in types or index_type not in INDEX_TYPES:
                continue  # a flipped name: an unknown column or index type is no corruption
            index = decode_index(index_type, types[column], payload)
            probe = 3 if column == "i" else "bb"
            if index_type == "bloom-filter":
                index.might_contain(probe)
                continue
            index.equal(probe)
            index.is_null()
            if index_type != "bitmap":
                index.less_than(probe)
                index.greater_or_equal(probe)


@settings(max_examples=80)
@given(st.integers(0, 50), st.data())
def test_truncated_containers_raise_codec_error(seed: int, data: st.DataObject) -> None:
    content, types = _sample_container(seed)
    cut = data.draw(st.integers(0, len(content) - 1))
    with pytest.raises(CodecError):
        _decode_and_query(content[:cut], types)


@settings(max_examples=300)
@given(st.integers(0, 50), st.data())
def test_corrupt_indexes_raise_only_codec_error(seed: int, data: st.DataObject) -> None:
    content, types = _sample_container(seed)
    corrupt = bytearray(content)
    for _ in range(data.draw(st.integers(1, 3))):
        bit = data.draw(st.integers(0, 8 * len(corrupt) - 1))
        corrupt[bit // 8] ^= 1 << (bit % 8)
    try:
        _decode_and_query(bytes(corrupt), types)
    except CodecError:
        pass


@settings(max_examples=200)
@given(st.sampled_from(INDEX_TYPES), st.binary(max_size=120))
def test_arbitrary_payloads_raise_only_codec_error(index_type: str, payload: bytes) -> None:
    data_type = IntType()
    try:
        index = decode_index(index_type, data_type, payload)
        if index_type == "bloom-filter":
            index.might_contain(1)
        else:
            index.equal(1)
            index.is_null()
            if index_type != "bitmap":
                index.less_than(1)
    except CodecError:
        pass


@settings(max_examples=50)
@given(keys=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50),
       values=st.lists(st.binary(max_size=100), max_size=50))
def test_array_hashes_equal_the_scalar_ones(keys: list[int], values: list[bytes]) -> None:
    from paimond.format.file_index.hash_arrays import thomas_wang_hashes, xxh64_hashes

    assert thomas_wang_hashes(np.array(keys, dtype=np.int64)).tolist() == [
        thomas_wang_hash(k) for k in keys]
    array = pa.array(values, pa.binary())
    assert xxh64_hashes(array).tolist() == [xxh64(v) for v in values]
    assert xxh64_hashes(array.slice(1)).tolist() == [xxh64(v) for v in values[1:]]
    large = pa.array(values, pa.large_binary())
    assert xxh64_hashes(large).tolist() == [xxh64(v) for v in values]


@pytest.mark.parametrize("version", ["1", "2"])
@pytest.mark.parametrize("cut", [0, 13, 14, 20, 26])
def test_bitmap_from_arrow_batches_keeps_javas_hashmap_order(version: str, cut: int) -> None:
    """13 distinct values, then repeats: the repeat right after the 13th value resizes Java's
    HashMap (computeIfAbsent checks the threshold first), which reorders the bitmaps. The
    vectorized path must see that call wherever the batches are cut."""
    keys = ([137, 582, 867, 821, 782, 64, 261, 120, 507, 779, 460, 483, 667] if version == "1"
            else [388, 807, 214, 96, 499, 29, 914, 855, 399, 443, 622, 780, 785])
    rows = keys + keys
    reference = _writer("bitmap", IntType(), {"version": version})
    reference.write(rows)
    first_only = _writer("bitmap", IntType(), {"version": version})
    first_only.write(keys)
    assert reference.serialized_bytes() != first_only.serialized_bytes()  # the case is real
    arrow = pa.array(rows, pa.int32())
    batches = _writer("bitmap", IntType(), {"version": version})
    batches.write(arrow.slice(0, cut))
    batches.write(arrow.slice(cut))
    assert batches.serialized_bytes() == reference.serialized_bytes()
