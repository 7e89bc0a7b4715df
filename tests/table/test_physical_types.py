"""Physical encodings of the data files paimond writes, against Java's ``ParquetSchemaConverter``
(apache/paimon 5dacde516b): TIMESTAMP(7..9) and TIMESTAMP_LTZ(7..9) as INT96 (bytes as
pyarrow's own INT96 writer lays them out, values as Java's ``int96ToTimestamp`` decodes them),
every other type as Java declares it; INT64-nanosecond and all-INT96 files still read; and
pypaimon reads a table back exactly, nanoseconds included, after paimond compacted it."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import MergeModel, TableSpec, TableWriter, catalog_for

from paimond.clock import SYSTEM_CLOCK
from paimond.errors import CodecError
from paimond.format.parquet.int96 import (
    JULIAN_DAY_OF_EPOCH,
    NANOS_PER_DAY,
    declare_int96,
    encode_int96,
    storage_type,
)
from paimond.format.parquet.thrift_compact import decode_struct, encode_struct
from paimond.format.types.data_types import (
    ArrayType,
    BigIntType,
    DataField,
    DataType,
    DecimalType,
    IntType,
    LocalZonedTimestampType,
    MapType,
    RowType,
    SmallIntType,
    TimestampType,
    TinyIntType,
    VarCharType,
)
from paimond.format.types.values import Timestamp
from paimond.maintenance.compact.job import CompactJob
from paimond.table.catalog import open_table
from paimond.table.data_files.file_formats import open_format_writer, read_format_batches
from paimond.table.data_files.kv_layout import physical_arrow_schema
from paimond.table.options.core import TableOptions
from paimond.table.storage.interface import open_storage

# Arrow's timestamp[ns] range, as int64 nanoseconds.
NANOS = st.integers(-(2**63) + 1, 2**63 - 1)
ROW_TYPE = RowType(fields=(
    DataField(0, "ts_3", TimestampType(precision=3)),
    DataField(1, "ts_6", TimestampType(precision=6)),
    DataField(2, "ts_9", TimestampType(precision=9)),
    DataField(3, "ltz_3", LocalZonedTimestampType(precision=3)),
    DataField(4, "ltz_6", LocalZonedTimestampType(precision=6)),
    DataField(5, "ltz_9", LocalZonedTimestampType(precision=9, nullable=False)),
    DataField(6, "ts_7", TimestampType(precision=7)),
    DataField(7, "array_ts_9", ArrayType(element=TimestampType(precision=9))),
    DataField(8, "map_ltz_8", MapType(key=IntType(nullable=False),
                                      value=LocalZonedTimestampType(precision=8))),
    DataField(9, "row", RowType(fields=(DataField(10, "x", TimestampType(precision=9)),
                                        DataField(11, "y", IntType())))),
))


def write_parquet(row_type: RowType, batches: list[pa.RecordBatch]) -> bytes:
    sink = io.BytesIO()
    writer = open_format_writer("parquet", sink, row_type, compression="zstd",
                                options=TableOptions({}))
    for batch in batches:
        writer.write(batch)
    writer.finish()
    return sink.getvalue()


def read_back(data: bytes, row_type: RowType, file_format: str = "parquet") -> pa.Table:
    batches = read_format_batches(file_format, io.BytesIO(data), row_type, row_type, path="f",
                                  file_size=len(data), batch_rows=1000)
    return pa.Table.from_batches(list(batches), schema=physical_arrow_schema(row_type))


def column_of(nanos: list[int | None], arrow_type: pa.DataType) -> pa.Array:
    """Values given in nanoseconds, as ``arrow_type`` (a timestamp of any unit)."""
    per_unit = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[arrow_type.unit]
    return pa.array([None if n is None else n // per_unit for n in nanos],
                    pa.int64()).cast(arrow_type)


def batch_of(nanos: list[int | None]) -> pa.RecordBatch:
    """One row per value: every timestamp column of ROW_TYPE, nested ones included."""
    schema = physical_arrow_schema(ROW_TYPE)
    flat = [column_of(nanos if f.nullable else [n or 0 for n in nanos], f.type)
            for f in list(schema)[:7]]
    ts_9 = schema.field("ts_9").type
    ltz_8 = schema.field("map_ltz_8").type.item_type
    array = pa.array([None if n is None else [n, None, n // 2] for n in nanos],
                     pa.list_(pa.int64())).cast(pa.list_(ts_9))
    maps = pa.array([None if n is None else [(1, n), (2, None)] for n in nanos],
                    pa.map_(pa.int32(), pa.int64()))
    maps = pa.MapArray.from_arrays(maps.offsets, maps.keys, maps.items.cast(ltz_8),
                                   mask=maps.is_null())
    rows = pa.StructArray.from_arrays([column_of(nanos, ts_9), pa.array([7] * len(nanos),
                                                                        pa.int32())],
                                      names=["x", "y"])
    columns = [*flat, array, maps, rows]
    return pa.RecordBatch.from_arrays([c.cast(f.type) for c, f in zip(columns, schema, strict=True)],
                                      schema=schema)


# ---- what the footer declares ------------------------------------------------------------


def java_parquet_type(data_type: DataType) -> tuple[str, str | None]:
    """(physical type, logical type) of a flat type, from Java ``convertToParquetType``."""
    if isinstance(data_type, (TimestampType, LocalZonedTimestampType)):
        utc = "true" if isinstance(data_type, LocalZonedTimestampType) else "false"
        if data_type.precision > 6:
            return "INT96", None
        unit = "milliseconds" if data_type.precision <= 3 else "microseconds"
        return "INT64", f"Timestamp(isAdjustedToUTC={utc}, timeUnit={unit}"
    if isinstance(data_type, DecimalType):
        physical = ("INT32" if data_type.precision <= 9 else "INT64" if data_type.precision <= 18
                    else "FIXED_LEN_BYTE_ARRAY")
        return physical, f"Decimal(precision={data_type.precision}, scale={data_type.scale})"
    return {TinyIntType: ("INT32", "Int(bitWidth=8, isSigned=true)"),
            SmallIntType: ("INT32", "Int(bitWidth=16, isSigned=true)"),
            IntType: ("INT32", None), BigIntType: ("INT64", None),
            VarCharType: ("BYTE_ARRAY", "String")}[type(data_type)]


FLAT_TYPES: list[DataType] = [
    *(TimestampType(precision=p) for p in range(10)),
    *(LocalZonedTimestampType(precision=p) for p in range(10)),
    *(DecimalType(precision=p, scale=min(p, 2)) for p in (1, 9, 10, 18, 19, 38)),
    TinyIntType(), SmallIntType(), IntType(), BigIntType(), VarCharType(length=10),
]


def test_flat_columns_have_javas_physical_types() -> None:
    row_type = RowType(fields=tuple(DataField(i, f"c{i}", t) for i, t in enumerate(FLAT_TYPES)))
    parquet = pq.ParquetFile(io.BytesIO(write_parquet(row_type, [])))
    for i, data_type in enumerate(FLAT_TYPES):
        column = parquet.schema.column(i)
        physical, logical = java_parquet_type(data_type)
        assert column.physical_type == physical, data_type
        written = None if column.logical_type.type == "NONE" else str(column.logical_type)
        assert (written is None) if logical is None else written.startswith(logical), (
            data_type, written)


def test_nested_nanosecond_leaves_are_int96_with_their_field_ids() -> None:
    parquet = pq.ParquetFile(io.BytesIO(write_parquet(ROW_TYPE, [batch_of([1, None])])))
    leaves = {parquet.schema.column(i).path: parquet.schema.column(i)
              for i in range(len(parquet.schema))}
    int96 = {path for path, column in leaves.items() if column.physical_type == "INT96"}
    assert int96 == {"ts_7", "ts_9", "ltz_9", "array_ts_9.list.element",
                     "map_ltz_8.key_value.value", "row.x"}
    # Field ids are kept (e.g. an array element's, SpecialFields.getArrayElementFieldId).
    element = parquet.schema_arrow.field("array_ts_9").type.value_field
    assert element.metadata == physical_arrow_schema(ROW_TYPE).field(
        "array_ts_9").type.value_field.metadata
    assert parquet.metadata.row_group(0).column(2).statistics is None  # as pyarrow's INT96


def test_int96_pages_are_pyarrows_own_int96_bytes() -> None:
    """For values after the epoch pyarrow's INT96 writer and paimond agree byte for byte on
    the whole file (before it, pyarrow writes a negative nanos-of-day, paimond normalizes)."""
    row_type = RowType(fields=(DataField(0, "a", TimestampType(precision=9)),
                               DataField(1, "b", LocalZonedTimestampType(precision=7,
                                                                         nullable=False))))
    schema = physical_arrow_schema(row_type)
    nanos = [0, 1, None, 10**18 + 123_456_789, NANOS_PER_DAY - 1, NANOS_PER_DAY]
    batch = pa.RecordBatch.from_arrays(
        [column_of(nanos, schema[0].type), column_of([n or 5 for n in nanos], schema[1].type)],
        schema=schema)
    reference = io.BytesIO()
    pq.write_table(pa.Table.from_batches([batch]), reference, compression="zstd",
                   compression_level=1, use_dictionary=False, write_page_index=True,
                   store_decimal_as_integer=True, use_deprecated_int96_timestamps=True)
    assert write_parquet(row_type, [batch]) == reference.getvalue()


# ---- values ------------------------------------------------------------------------------


def java_int96_to_timestamp(nanos_of_day: int, julian_day: int) -> Timestamp:
    """Java ``ParquetVectorUpdaterFactory.int96ToTimestamp`` (utcTimestamp), with Java's
    truncating ``/`` and ``%``."""
    millis = (julian_day - JULIAN_DAY_OF_EPOCH) * 86_400_000 + int(nanos_of_day / 10**6)
    nano_of_milli = nanos_of_day - int(nanos_of_day / 10**6) * 10**6
    if nano_of_milli < 0:
        millis, nano_of_milli = millis - 1, nano_of_milli + 10**6
    return Timestamp(millis, nano_of_milli)


@given(st.lists(st.one_of(st.none(), NANOS), max_size=30))
def test_int96_bytes_decode_as_java_does(nanos: list[int | None]) -> None:
    encoded = encode_int96(pa.array(nanos, pa.int64()).cast(pa.timestamp("ns")),
                           storage_type(pa.timestamp("ns")))
    assert encoded.type == pa.binary(12)
    for value, raw in zip(nanos, encoded.to_pylist(), strict=True):
        assert (value is None) == (raw is None)
        if value is not None:
            nanos_of_day = int.from_bytes(raw[:8], "little", signed=True)
            julian_day = int.from_bytes(raw[8:], "little", signed=True)
            assert 0 <= nanos_of_day < NANOS_PER_DAY  # Impala's layout, every Java path reads it
            assert java_int96_to_timestamp(nanos_of_day, julian_day) == Timestamp.from_nanos(value)


@given(st.lists(st.one_of(st.none(), NANOS), min_size=1, max_size=20), st.integers(0, 5))
def test_every_timestamp_reads_back_exactly(nanos: list[int | None], offset: int) -> None:
    batch = batch_of(nanos)
    sliced = batch.slice(min(offset, batch.num_rows - 1))  # arrays with an offset
    data = write_parquet(ROW_TYPE, [batch, sliced])
    expected = pa.Table.from_batches([batch, sliced])
    assert read_back(data, ROW_TYPE).equals(expected)
    # Plain pyarrow too (as pypaimon reads): same instants, LTZ columns without their zone.
    plain = pq.read_table(io.BytesIO(data))
    for name in ("ts_7", "ts_9", "ltz_9", "row"):
        assert plain.column(name).cast(expected.schema.field(name).type).equals(
            expected.column(name))


# ---- files written before ----------------------------------------------------------------


@pytest.mark.parametrize("int96", [False, True], ids=["int64-nanos", "all-int96"])
def test_files_of_other_writers_read_as_the_logical_types(int96: bool) -> None:
    """INT64 nanoseconds (pypaimon, paimond before) and INT96 for every timestamp column
    (``use_deprecated_int96_timestamps``, e.g. Spark's legacy default)."""
    batch = batch_of([0, -1, 1_234_567_891, None, 4 * 10**18 + 999, -(10**18) - 1])
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_batches([batch]), sink, use_deprecated_int96_timestamps=int96)
    parquet = pq.ParquetFile(io.BytesIO(sink.getvalue()))
    assert (parquet.schema.column(0).physical_type == "INT96") is int96
    assert parquet.schema.column(2).physical_type == ("INT96" if int96 else "INT64")
    assert read_back(sink.getvalue(), ROW_TYPE).equals(pa.Table.from_batches([batch]))


# ---- the footer rewrite ------------------------------------------------------------------


def test_footer_rewrite_keeps_every_other_byte_and_refuses_unknown_columns() -> None:
    sink = io.BytesIO()
    pq.write_table(pa.table({"a": pa.array([b"x" * 12], pa.binary(12)), "b": [1]}), sink)
    data = sink.getvalue()
    footer = data[-8 - int.from_bytes(data[-8:-4], "little"):-8]
    assert encode_struct(decode_struct(footer)) == footer
    logical = pa.schema([("a", pa.timestamp("ns")), ("b", pa.int64())])
    declared = declare_int96(footer, frozenset({("a",)}), logical)
    assert len(declared) == len(footer) - 2  # one type byte the same size, type_length gone
    with pytest.raises(CodecError, match="lacks the INT96 columns"):
        declare_int96(footer, frozenset({("c",)}), logical)
    with pytest.raises(CodecError, match="not FIXED_LEN_BYTE_ARRAY"):
        declare_int96(footer, frozenset({("b",)}), logical)
    with pytest.raises(CodecError):
        decode_struct(footer[: len(footer) // 2])


# ---- pypaimon reads paimond's output -----------------------------------------------------


def build_timestamps_pk(warehouse: str) -> TableSpec:
    """pypaimon writes a deduplicate table of every timestamp precision class, nanoseconds
    in TIMESTAMP(9)/LTZ(9) and in an ARRAY<TIMESTAMP(9)>, 4 overlapping commits to 1 bucket."""
    ns, ltz_ns = pa.timestamp("ns"), pa.timestamp("ns", tz="UTC")
    schema = pa.schema([pa.field("id", pa.int32(), nullable=False),
                        ("ts_3", pa.timestamp("ms")), ("ts_6", pa.timestamp("us")), ("ts_9", ns),
                        ("ltz_3", pa.timestamp("ms", tz="UTC")),
                        ("ltz_6", pa.timestamp("us", tz="UTC")), ("ltz_9", ltz_ns),
                        ("array_ts_9", pa.list_(ns))])
    writer = TableWriter(catalog_for(warehouse), "db.timestamps", schema, primary_keys=("id",),
                     options={"bucket": "1", "file.format": "parquet"})
    rng, model = random.Random(9), MergeModel("deduplicate", ("id",))

    def nanos() -> int | None:
        return None if rng.random() < 0.2 else rng.randrange(-(10**18), 4 * 10**18)

    for _ in range(4):
        rows = []
        for key in rng.sample(range(40), 25):
            row = {"id": key, "ts_3": nanos(), "ts_6": nanos(), "ts_9": nanos(),
                   "ltz_3": nanos(), "ltz_6": nanos(), "ltz_9": nanos(),
                   "array_ts_9": [nanos(), nanos()]}
            for name, per_unit in (("ts_3", 10**6), ("ltz_3", 10**6), ("ts_6", 10**3),
                                   ("ltz_6", 10**3)):
                row[name] = None if row[name] is None else row[name] // per_unit
            model.apply(row)
            rows.append(row)
        writer.commit(rows)
    return writer.spec(model.rows())


def test_pypaimon_reads_nanoseconds_back_after_compaction(tmp_path: Path) -> None:
    """After paimond's full compaction of a pypaimon-written table the new files hold INT96
    for TIMESTAMP(9)/LTZ(9) (nested too) and INT64 millis/micros below, and pypaimon reads
    exactly the rows its writes made, nanoseconds included (one sorted run at the max level
    reads without merging, so pypaimon does not truncate to microseconds)."""
    warehouse = str(tmp_path / "wh")
    spec = build_timestamps_pk(warehouse)
    before_files = set(Path(warehouse).rglob("*.parquet"))
    table = open_table(open_storage(warehouse), warehouse, spec.name)
    summary = CompactJob(table, clock=SYSTEM_CLOCK, full=True, parallelism=1, use_processes=False).run()
    assert not summary.failures and summary.files_out > 0, summary.describe()

    written = set(Path(warehouse).rglob("*.parquet")) - before_files
    assert written
    for path in written:
        parquet_schema = pq.ParquetFile(path).schema
        types = {parquet_schema.column(i).path: parquet_schema.column(i).physical_type
                 for i in range(len(parquet_schema))}
        assert {n for n, t in types.items() if t == "INT96"} == {
            "ts_9", "ltz_9", "array_ts_9.list.element"}
        assert types["ts_3"] == types["ts_6"] == types["ltz_3"] == types["ltz_6"] == "INT64"
    after = read_rows(warehouse, spec.name)
    assert after.equals(spec.compacted_rows)
    nanos = after.column("ts_9").cast(pa.int64()).to_pylist()
    assert any(n is not None and n % 1000 for n in nanos), "the table holds nanoseconds"
