"""Data files as Arrow: round trips of every data type per format in the primary-key and
append layouts, rolling with exact metadata, stats modes in written files, schema evolution
by field id, and failures that name the file."""

from __future__ import annotations

import random
import re
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from paimond.errors import CorruptFileError
from paimond.format.binary.binary_row import EMPTY_MANIFEST_ROW, decode_manifest_row
from paimond.format.meta.manifest import EMPTY_STATS
from paimond.format.meta.schema import TableSchema
from paimond.format.types.data_types import (
    ArrayType,
    BigIntType,
    BinaryType,
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
)
from paimond.format.types.values import Timestamp
from paimond.table.data_files import arrow_io as data_files
from paimond.table.data_files.arrow_io import (
    FILE_SOURCE_APPEND,
    FILE_SOURCE_COMPACT,
    RollingDataFileWriter,
    file_format_for_level,
    read_data_file,
)
from paimond.table.data_files.kv_layout import physical_arrow_schema, physical_row_type, to_key_value_batch
from paimond.table.options.core import TableOptions
from paimond.table.storage.interface import Storage, open_storage

STRING = VarCharType(length=2147483647)
FORMATS = ("parquet", "orc", "avro", "row")
ROW_TYPE = RowType(fields=(DataField(100, "x", IntType()), DataField(101, "y", STRING),
                           DataField(102, "z", ArrayType(element=DoubleType()))))
# (name, type, formats that cannot hold it)
TYPES: tuple[tuple[str, DataType, tuple[str, ...]], ...] = (
    ("boolean", BooleanType(), ()), ("tinyint", TinyIntType(), ()), ("smallint", SmallIntType(), ()),
    ("int", IntType(), ()), ("bigint", BigIntType(), ()), ("float", FloatType(), ()),
    ("double", DoubleType(), ()), ("decimal_10_2", DecimalType(precision=10, scale=2), ()),
    ("decimal_18_3", DecimalType(precision=18, scale=3), ()),
    ("decimal_38_4", DecimalType(precision=38, scale=4), ()), ("char", CharType(length=5), ()),
    ("varchar", VarCharType(length=20), ()), ("string", STRING, ()),
    ("binary", BinaryType(length=4), ()), ("varbinary", VarBinaryType(length=16), ()),
    ("bytes", VarBinaryType(length=2147483647), ()), ("date", DateType(), ()),
    ("time", TimeType(precision=3), ()), ("timestamp_0", TimestampType(precision=0), ()),
    ("timestamp_3", TimestampType(precision=3), ()), ("timestamp_6", TimestampType(precision=6), ()),
    ("timestamp_9", TimestampType(precision=9), ("avro",)),
    ("timestamp_ltz_3", LocalZonedTimestampType(precision=3), ()),
    ("timestamp_ltz_6", LocalZonedTimestampType(precision=6), ()),
    ("timestamp_ltz_9", LocalZonedTimestampType(precision=9), ("avro",)),
    ("array_int", ArrayType(element=IntType()), ()),
    ("array_array_string", ArrayType(element=ArrayType(element=STRING)), ()),
    ("map_string_bigint", MapType(key=STRING, value=BigIntType()), ()),
    ("map_int_string", MapType(key=IntType(nullable=False), value=STRING), ()),
    ("multiset_string", MultisetType(element=STRING), ()),
    ("row", ROW_TYPE, ()),
)
_UNIT = {0: 10**9, 3: 10**6, 6: 10**3, 9: 1}


def _value(rng: random.Random, t: DataType) -> Any:
    """A random value as pa.array takes it for ``physical_arrow_schema`` (temporal types as
    integers of their unit, cast afterwards)."""
    if isinstance(t, BooleanType):
        return rng.random() < 0.5
    if isinstance(t, (TinyIntType, SmallIntType, IntType, BigIntType)):
        bits = {TinyIntType: 8, SmallIntType: 16, IntType: 32, BigIntType: 64}[type(t)]
        return rng.randint(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if isinstance(t, (FloatType, DoubleType)):
        return rng.randrange(-4000, 4000) / 8
    if isinstance(t, DecimalType):
        return Decimal(rng.randrange(-(10 ** t.precision) + 1, 10 ** t.precision)).scaleb(-t.scale)
    if isinstance(t, (CharType, VarCharType)):
        return "".join(rng.choices("abé€/ \U0001f600", k=rng.randrange(0, min(t.length, 30) + 1)))
    if isinstance(t, (BinaryType, VarBinaryType)):
        return rng.randbytes(rng.randrange(0, min(t.length, 30) + 1))
    if isinstance(t, DateType):
        return rng.randrange(-30000, 40000)
    if isinstance(t, TimeType):
        return rng.randrange(86_400_000)
    if isinstance(t, (TimestampType, LocalZonedTimestampType)):
        return rng.randrange(-(10**18), 4 * 10**18) // _UNIT[t.precision]
    if isinstance(t, ArrayType):
        return [None if rng.random() < 0.2 else _value(rng, t.element) for _ in range(rng.randrange(4))]
    if isinstance(t, MapType):
        keys = {_value(rng, t.key) for _ in range(rng.randrange(4))}
        return [(k, None if rng.random() < 0.2 else _value(rng, t.value)) for k in keys]
    if isinstance(t, MultisetType):
        return [(k, rng.randrange(1, 5)) for k in {_value(rng, t.element) for _ in range(3)}]
    if isinstance(t, RowType):
        return {f.name: None if rng.random() < 0.2 else _value(rng, f.type) for f in t.fields}
    raise AssertionError(t)


def _storage_type(arrow_type: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(arrow_type) or pa.types.is_time64(arrow_type):
        return pa.int64()
    if pa.types.is_date32(arrow_type) or pa.types.is_time32(arrow_type):
        return pa.int32()
    if pa.types.is_list(arrow_type):
        return pa.list_(arrow_type.value_field.with_type(_storage_type(arrow_type.value_type)))
    return arrow_type


def _column(rng: random.Random, field: pa.Field, data_type: DataType, rows: int) -> pa.Array:
    values = [None if data_type.nullable and rng.random() < 0.2 else _value(rng, data_type)
              for _ in range(rows)]
    return pa.array(values, type=_storage_type(field.type)).cast(field.type)


def schema_of(fields: list[tuple[str, DataType]], *, primary_keys: tuple[str, ...] = (),
              options: dict[str, str] | None = None, schema_id: int = 0) -> TableSchema:
    data_fields = tuple(DataField(i, name, t) for i, (name, t) in enumerate(fields))
    return TableSchema(schema_id, data_fields, len(fields) - 1, (), primary_keys,
                       {"bucket": "1", **(options or {})})


def value_batch(schema: TableSchema, rows: int, seed: int = 7) -> pa.RecordBatch:
    rng = random.Random(seed)
    arrow_schema = physical_arrow_schema(schema.row_type)
    columns = [_column(rng, f, d.type, rows) for f, d in zip(arrow_schema, schema.fields, strict=True)]
    if schema.primary_keys:  # ascending, unique INT keys
        columns[0] = pa.array(sorted(rng.sample(range(-10**6, 10**6), rows)), pa.int32())
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema)


def kv_batch(schema: TableSchema, rows: int, seed: int = 7, first_sequence: int = 100) -> pa.RecordBatch:
    values = value_batch(schema, rows, seed)
    kinds = pa.array([random.Random(seed + i).choice([0, 0, 1, 2, 3]) for i in range(rows)], pa.int8())
    return to_key_value_batch(values, schema, pa.array(range(first_sequence, first_sequence + rows)), kinds)


def write(storage: Storage, schema: TableSchema, batches: list[pa.RecordBatch], *, key_value: bool,
          level: int = 1, file_source: int = FILE_SOURCE_COMPACT, **kwargs: Any) -> list:
    writer = RollingDataFileWriter(storage, "bucket-0", schema, TableOptions.of(schema), level=level,
                                   key_value=key_value, file_source=file_source,
                                   now_millis=lambda: 1_700_000_000_000, **kwargs)
    for batch in batches:
        writer.write(batch)
    return writer.close()


def read_all(storage: Storage, meta: Any, file_schema: TableSchema, read_schema: TableSchema | None = None,
             *, key_value: bool, **kwargs: Any) -> pa.Table:
    fmt = meta.file_name.rsplit(".", 1)[-1]
    read_schema = read_schema or file_schema
    batches = list(read_data_file(storage, storage.join("bucket-0", meta.file_name), file_format=fmt,
                                  file_schema=file_schema, read_schema=read_schema,
                                  key_value=key_value, **kwargs))
    row_type = physical_row_type(read_schema, key_value=key_value)
    if kwargs.get("projection") is not None:
        row_type = row_type.project(list(kwargs["projection"]))
    return pa.Table.from_batches(batches, schema=physical_arrow_schema(row_type))


@pytest.fixture()
def storage(tmp_path) -> Storage:  # type: ignore[no-untyped-def]
    return open_storage(str(tmp_path))


def _all_types(file_format: str) -> list[tuple[str, DataType]]:
    return [(f"v_{name}", t) for name, t, unsupported in TYPES if file_format not in unsupported]


@pytest.mark.parametrize("file_format", FORMATS)
def test_every_type_round_trips_in_the_primary_key_layout(storage: Storage, file_format: str) -> None:
    schema = schema_of([("id", IntType(nullable=False)), *_all_types(file_format)],
                       primary_keys=("id",), options={"file.format": file_format})
    batches = [kv_batch(schema, 40, seed=1, first_sequence=10), kv_batch(schema, 1, seed=2, first_sequence=5)]
    last = batches[1].columns  # keys stay ascending across batches
    last[0] = last[3] = pa.array([10**7], pa.int32())
    batches[1] = pa.RecordBatch.from_arrays(last, schema=batches[1].schema)
    (meta,) = write(storage, schema, batches, key_value=True)
    written = pa.Table.from_batches(batches)
    assert read_all(storage, meta, schema, key_value=True).equals(written)
    assert re.fullmatch(rf"data-[0-9a-f-]{{36}}-0\.{file_format}", meta.file_name)
    assert meta.row_count == 41 and meta.level == 1 and meta.file_source == FILE_SOURCE_COMPACT
    assert (meta.min_sequence_number, meta.max_sequence_number) == (5, 49)
    kinds = written.column("_VALUE_KIND").to_pylist()
    assert meta.delete_row_count == kinds.count(1) + kinds.count(3) > 0
    assert decode_manifest_row(meta.min_key, [IntType()]) == (written.column("id")[0].as_py(),)
    assert decode_manifest_row(meta.max_key, [IntType()]) == (10**7,)
    assert meta.file_size == storage.size(storage.join("bucket-0", meta.file_name))
    assert meta.creation_time_millis == 1_700_000_000_000 and meta.extra_files == ()
    assert meta.value_stats_cols is None  # truncate(16) keeps every column


@pytest.mark.parametrize("file_format", FORMATS)
def test_every_type_round_trips_in_the_append_layout(storage: Storage, file_format: str) -> None:
    schema = schema_of(_all_types(file_format), options={"file.format": file_format})
    batches = [value_batch(schema, 30, seed=3), value_batch(schema, 25, seed=4)]
    (meta,) = write(storage, schema, batches, key_value=False, level=0,
                    file_source=FILE_SOURCE_APPEND, sequence_start=1000)
    assert read_all(storage, meta, schema, key_value=False).equals(pa.Table.from_batches(batches))
    assert (meta.min_sequence_number, meta.max_sequence_number, meta.row_count) == (1000, 1054, 55)
    assert meta.min_key == meta.max_key == EMPTY_MANIFEST_ROW and meta.key_stats == EMPTY_STATS
    assert meta.delete_row_count == 0 and meta.file_source == FILE_SOURCE_APPEND
    values = decode_manifest_row(meta.value_stats.min_values, [t for _, t in _all_types(file_format)])
    assert values[1] == pc.min(pa.Table.from_batches(batches).column("v_tinyint")).as_py()


@pytest.mark.parametrize("file_format", FORMATS)
def test_rolling_files_have_exact_metadata(storage: Storage, file_format: str) -> None:
    schema = schema_of([("id", IntType(nullable=False)), ("v", STRING), ("n", BigIntType())],
                       primary_keys=("id",),
                       options={"file.format": file_format, "target-file-size": "3 kb"})
    whole = kv_batch(schema, 600, seed=5, first_sequence=0)
    metas = write(storage, schema, [whole.slice(i, 50) for i in range(0, 600, 50)], key_value=True)
    assert len(metas) >= 3
    uuid = metas[0].file_name.split("-")[1:6]
    expected_names = [f"data-{'-'.join(uuid)}-{i}.{file_format}" for i in range(len(metas))]
    assert [m.file_name for m in metas] == expected_names
    offset = 0
    for meta in metas:
        rows = read_all(storage, meta, schema, key_value=True)
        assert rows.equals(pa.Table.from_batches([whole]).slice(offset, meta.row_count))
        offset += meta.row_count
        ids, kinds = rows.column("id").to_pylist(), rows.column("_VALUE_KIND").to_pylist()
        sequences = rows.column("_SEQUENCE_NUMBER").to_pylist()
        assert decode_manifest_row(meta.min_key, [IntType()]) == (ids[0],)
        assert decode_manifest_row(meta.max_key, [IntType()]) == (ids[-1],)
        assert decode_manifest_row(meta.key_stats.min_values, [IntType()]) == (min(ids),)
        assert (meta.min_sequence_number, meta.max_sequence_number) == (min(sequences), max(sequences))
        assert meta.delete_row_count == kinds.count(1) + kinds.count(3)
    assert offset == 600


def test_rolling_append_files_continue_sequence_numbers(storage: Storage) -> None:
    schema = schema_of([("v", STRING)], options={"target-file-size": "2 kb"})
    batch = value_batch(schema, 2000, seed=9)
    metas = write(storage, schema, [batch], key_value=False, level=0, sequence_start=7)
    assert len(metas) > 1
    ranges = [(m.min_sequence_number, m.max_sequence_number) for m in metas]
    assert ranges[0][0] == 7 and ranges[-1][1] == 2006
    assert all(b[0] == a[1] + 1 for a, b in zip(ranges, ranges[1:], strict=False))


def _value_stats(meta: Any, schema: TableSchema) -> dict[str, tuple[Any, Any, Any]]:
    names = meta.value_stats_cols if meta.value_stats_cols is not None else schema.field_names
    types = [schema.field(n).type for n in names]
    mins = decode_manifest_row(meta.value_stats.min_values, types)
    maxs = decode_manifest_row(meta.value_stats.max_values, types)
    counts = meta.value_stats.null_counts
    return {n: (lo, hi, c) for n, lo, hi, c in zip(names, mins, maxs, counts, strict=True)}


@pytest.mark.parametrize("file_format", FORMATS)
def test_stats_modes_in_written_files(storage: Storage, file_format: str) -> None:
    fields = [("id", IntType(nullable=False)), ("s", STRING), ("t", STRING), ("u", BigIntType())]
    long_text = pa.array(["k" * 30, None, "b" * 40], pa.string())
    values = pa.RecordBatch.from_arrays(
        [pa.array([1, 2, 3], pa.int32()), long_text, long_text, pa.array([5, None, -5], pa.int64())],
        schema=physical_arrow_schema(schema_of(fields).row_type))

    def meta_for(options: dict[str, str], level: int = 1) -> Any:
        schema = schema_of(fields, primary_keys=("id",), options={"file.format": file_format, **options})
        batch = to_key_value_batch(values, schema, pa.array([1, 2, 3]), pa.array([0, 0, 0]))
        (meta,) = write(storage, schema, [batch], key_value=True, level=level)
        return meta, schema

    meta, schema = meta_for({})  # truncate(16), incl. the increment of the max
    assert _value_stats(meta, schema)["s"] == ("b" * 16, "k" * 15 + "l", 1)
    meta, schema = meta_for({"metadata.stats-mode": "full", "fields.t.stats-mode": "counts"})
    stats = _value_stats(meta, schema)
    assert stats["s"] == ("b" * 40, "k" * 30, 1) and stats["t"] == (None, None, 1)
    assert stats["u"] == (-5, 5, 1)
    meta, schema = meta_for({"metadata.stats-mode": "none"})
    assert meta.value_stats_cols == ()
    key_min = decode_manifest_row(meta.key_stats.min_values, [IntType()])
    # Java's avro writer applies the table mode to key columns as well.
    assert key_min == ((None,) if file_format == "avro" else (1,))
    meta, schema = meta_for({"metadata.stats-mode.per.level": "2:counts"}, level=2)
    assert _value_stats(meta, schema)["u"] == (None, None, 1)
    meta, schema = meta_for({"metadata.stats-keep-first-n-columns": "2"})
    # Java counts system columns towards N in avro files only.
    assert meta.value_stats_cols == (() if file_format == "avro" else ("id", "s"))
    meta, schema = meta_for({"metadata.stats-dense-store": "false", "metadata.stats-mode": "none"})
    assert meta.value_stats_cols is None and meta.value_stats.null_counts == (None,) * 4


def _evolution_schemas(file_format: str) -> tuple[TableSchema, TableSchema]:
    row0 = RowType(fields=(DataField(5, "x", IntType()), DataField(6, "y", STRING)))
    fields0 = (DataField(0, "id", IntType(nullable=False)), DataField(1, "a", IntType()),
               DataField(2, "b", STRING), DataField(3, "c", DoubleType()), DataField(4, "r", row0))
    row1 = RowType(fields=(DataField(5, "x", BigIntType()), DataField(6, "yy", STRING),
                           DataField(8, "z", STRING)))
    fields1 = (DataField(0, "id", IntType(nullable=False)), DataField(1, "a", BigIntType()),
               DataField(7, "d", STRING), DataField(4, "r", row1), DataField(2, "b2", STRING))
    options = {"bucket": "1", "file.format": file_format}
    return (TableSchema(0, fields0, 6, (), ("id",), options),
            TableSchema(1, fields1, 8, (), ("id",), options))


@pytest.mark.parametrize("file_format", FORMATS)
def test_schema_evolution_maps_columns_by_field_id(storage: Storage, file_format: str) -> None:
    schema0, schema1 = _evolution_schemas(file_format)
    values = pa.RecordBatch.from_arrays(
        [pa.array([1, 2], pa.int32()), pa.array([7, None], pa.int32()), pa.array(["p", "q"]),
         pa.array([0.5, 1.5]), pa.array([{"x": 3, "y": "s"}, None],
                                        physical_arrow_schema(schema0.row_type).field("r").type)],
        schema=physical_arrow_schema(schema0.row_type))
    batch = to_key_value_batch(values, schema0, pa.array([1, 2]), pa.array([0, 2]))
    (meta,) = write(storage, schema0, [batch], key_value=True)
    rows = read_all(storage, meta, schema0, schema1, key_value=True)
    assert rows.column_names == ["_KEY_id", "_SEQUENCE_NUMBER", "_VALUE_KIND", "id", "a", "d", "r", "b2"]
    assert rows.to_pylist() == [
        {"_KEY_id": 1, "_SEQUENCE_NUMBER": 1, "_VALUE_KIND": 0, "id": 1, "a": 7, "d": None,
         "r": {"x": 3, "yy": "s", "z": None}, "b2": "p"},
        {"_KEY_id": 2, "_SEQUENCE_NUMBER": 2, "_VALUE_KIND": 2, "id": 2, "a": None, "d": None,
         "r": None, "b2": "q"}]
    assert rows.schema.field("a").type == pa.int64()
    projected = read_all(storage, meta, schema0, schema1, key_value=True, projection=["b2", "d", "_KEY_id"])
    assert projected.to_pydict() == {"b2": ["p", "q"], "d": [None, None], "_KEY_id": [1, 2]}


def test_nested_columns_evolve_inside_arrays_and_maps(storage: Storage) -> None:
    """Rows inside an ARRAY and as MAP values follow their field ids too (read one row per
    batch, so every column arrives sliced)."""
    inner0 = RowType(fields=(DataField(10, "p", IntType()),))
    inner1 = RowType(fields=(DataField(10, "p", BigIntType()), DataField(11, "q", STRING)))
    value0 = RowType(fields=(DataField(12, "w", IntType()),))
    value1 = RowType(fields=(DataField(12, "w2", IntType()),))
    fields0 = (DataField(0, "l", ArrayType(element=inner0)),
               DataField(1, "m", MapType(key=STRING, value=value0)))
    fields1 = (DataField(0, "l", ArrayType(element=inner1)),
               DataField(1, "m", MapType(key=STRING, value=value1)))
    for file_format in FORMATS:
        schema0 = TableSchema(0, fields0, 12, (), (), {"file.format": file_format})
        schema1 = TableSchema(1, fields1, 12, (), (), {"file.format": file_format})
        arrow0 = physical_arrow_schema(schema0.row_type)
        rows0 = [{"l": [{"p": 1}, None], "m": [("k", {"w": 5})]}, {"l": None, "m": None},
                 {"l": [{"p": None}], "m": [("a", None), ("b", {"w": 6})]}]
        (meta,) = write(storage, schema0, [pa.RecordBatch.from_pylist(rows0, schema=arrow0)], key_value=False)
        rows = read_all(storage, meta, schema0, schema1, key_value=False, batch_rows=1)
        assert rows.to_pylist() == [
            {"l": [{"p": 1, "q": None}, None], "m": [("k", {"w2": 5})]}, {"l": None, "m": None},
            {"l": [{"p": None, "q": None}], "m": [("a", None), ("b", {"w2": 6})]}], file_format


def test_thin_mode_files_have_no_key_columns_but_read_with_them(storage: Storage) -> None:
    schema = schema_of([("id", IntType(nullable=False)), ("v", STRING)], primary_keys=("id",),
                       options={"data-file.thin-mode": "true"})
    batch = kv_batch(schema, 20, seed=11)
    thin = batch.drop_columns(["_KEY_id"])
    (meta,) = write(storage, schema, [thin], key_value=True)
    import pyarrow.parquet as pq

    raw = pq.read_table(storage.join("bucket-0", meta.file_name).removeprefix("file://"))
    assert raw.column_names == ["_SEQUENCE_NUMBER", "_VALUE_KIND", "id", "v"]
    assert read_all(storage, meta, schema, key_value=True).equals(pa.Table.from_batches([batch]))
    largest = max(batch.column("id").to_pylist())
    assert decode_manifest_row(meta.key_stats.max_values, [IntType()]) == (largest,)


def test_a_key_and_its_value_column_are_decoded_once(storage: Storage,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    schema = schema_of([("id", IntType(nullable=False)), ("v", STRING)], primary_keys=("id",))
    batch = kv_batch(schema, 50, seed=3)
    (meta,) = write(storage, schema, [batch], key_value=True)
    decoded: list[list[str]] = []
    real = data_files.read_parquet_batches

    def recording(source: Any, columns: RowType, batch_rows: int, *footers: Any) -> Any:
        decoded.append(list(columns.field_names))
        return real(source, columns, batch_rows, *footers)

    monkeypatch.setattr(data_files, "read_parquet_batches", recording)
    assert read_all(storage, meta, schema, key_value=True).equals(pa.Table.from_batches([batch]))
    values = read_all(storage, meta, schema, key_value=True, projection=["id", "v"])
    assert values.equals(pa.Table.from_batches([batch.select(["id", "v"])]))
    # the file's "id" column is read only where its key twin is not
    assert decoded == [["_KEY_id", "_SEQUENCE_NUMBER", "_VALUE_KIND", "v"], ["id", "v"]]


def test_file_format_and_compression_per_level(storage: Storage) -> None:
    options = TableOptions({"file.format": "orc", "file.format.per.level": "0:avro, 3:Parquet",
                            "file.compression.per.level": "0:none"})
    assert [file_format_for_level(options, level) for level in (0, 1, 3)] == ["avro", "orc", "parquet"]
    schema = schema_of([("id", IntType(nullable=False))], primary_keys=("id",),
                       options={**options.raw, "file.suffix.include.compression": "true"})
    batch = kv_batch(schema, 3)
    assert write(storage, schema, [batch], key_value=True, level=0)[0].file_name.endswith(".avro")
    assert write(storage, schema, [batch], key_value=True, level=3)[0].file_name.endswith(".zst.parquet")


def test_bad_input_and_corrupt_files(storage: Storage) -> None:
    schema = schema_of([("id", IntType(nullable=False)), ("v", STRING)], primary_keys=("id",))
    writer = RollingDataFileWriter(storage, "bucket-0", schema, TableOptions.of(schema), level=1,
                                   key_value=True, file_source=1, now_millis=lambda: 0)
    with pytest.raises(ValueError, match="physical layout"):
        writer.write(value_batch(schema, 3))
    writer.write(kv_batch(schema, 3))
    (meta,) = writer.close()
    path = storage.join("bucket-0", meta.file_name)
    assert storage.exists(path)
    writer.abort()
    assert not storage.exists(path)
    for fmt in FORMATS:
        storage.write_bytes(path, b"not a data file at all" * 3)
        with pytest.raises(CorruptFileError, match=re.escape(path)):
            list(read_data_file(storage, path, file_format=fmt, file_schema=schema, read_schema=schema,
                                key_value=True))
    assert RollingDataFileWriter(storage, "bucket-0", schema, TableOptions.of(schema), level=1,
                                 key_value=True, file_source=1, now_millis=lambda: 0).close() == []


def test_timestamp_stats_keep_nanoseconds(storage: Storage) -> None:
    schema = schema_of([("t", TimestampType(precision=9))])
    batch = pa.RecordBatch.from_arrays([pa.array([1_000_000_007, -3], pa.timestamp("ns"))],
                                       schema=physical_arrow_schema(schema.row_type))
    (meta,) = write(storage, schema, [batch], key_value=False, level=0)
    bounds = (Timestamp.from_nanos(-3), Timestamp.from_nanos(1_000_000_007), 0)
    assert _value_stats(meta, schema)["t"] == bounds


def test_parquet_leaf_paths_match_pyarrow() -> None:
    import io

    import pyarrow.parquet as pq

    from paimond.table.data_files.file_formats import parquet_leaf_paths

    schema = schema_of(_all_types("parquet"))
    arrow_schema = physical_arrow_schema(schema.row_type)
    sink = io.BytesIO()
    pq.write_table(arrow_schema.empty_table(), sink, store_decimal_as_integer=True)
    parquet_schema = pq.ParquetFile(io.BytesIO(sink.getvalue())).schema
    written = [parquet_schema.column(i).path for i in range(len(parquet_schema))]
    assert [p for f in arrow_schema for p in parquet_leaf_paths(f)] == written


def test_parquet_dictionary_only_for_repeating_columns(storage: Storage) -> None:
    import pyarrow.parquet as pq

    schema = schema_of([("id", IntType(nullable=False)), ("tag", STRING), ("n", BigIntType()),
                        ("z", ArrayType(element=STRING))], primary_keys=("id",))
    rows = 5000
    values = pa.RecordBatch.from_arrays(
        [pa.array(range(rows), pa.int32()), pa.array([f"tag-{i % 7}" for i in range(rows)]),
         pa.array(range(0, 3 * rows, 3), pa.int64()), pa.array([["x"]] * rows)],
        schema=physical_arrow_schema(schema.row_type))
    batch = to_key_value_batch(values, schema, pa.array(range(rows)), pa.array([0] * rows))
    (meta,) = write(storage, schema, [batch], key_value=True)
    assert read_all(storage, meta, schema, key_value=True).equals(pa.Table.from_batches([batch]))
    with storage.open_input(storage.join("bucket-0", meta.file_name)) as f:
        group = pq.ParquetFile(f).metadata.row_group(0)
        encodings = {group.column(i).path_in_schema: group.column(i).encodings
                     for i in range(group.num_columns)}
    dictionary = {p for p, e in encodings.items() if "RLE_DICTIONARY" in e}
    assert dictionary == {"_VALUE_KIND", "tag", "z.list.element"}


@pytest.mark.parametrize("file_format", FORMATS)
def test_reading_streams_batches_of_batch_rows(storage: Storage, file_format: str) -> None:
    # One large Parquet row group (or ORC stripe, Avro file, .row file) still reads in
    # pieces of batch_rows: a merge holds a batch per run, not a file per run.
    schema = schema_of([("id", IntType(nullable=False)), ("v", STRING)], primary_keys=("id",),
                       options={"file.format": file_format})
    whole = kv_batch(schema, 5000, seed=8)
    (meta,) = write(storage, schema, [whole], key_value=True)
    batches = list(read_data_file(storage, storage.join("bucket-0", meta.file_name),
                                  file_format=file_format, file_schema=schema, read_schema=schema,
                                  key_value=True, batch_rows=700))
    assert max(b.num_rows for b in batches) <= 700 and len(batches) >= 5000 // 700
    assert pa.Table.from_batches(batches).equals(pa.Table.from_batches([whole]))
