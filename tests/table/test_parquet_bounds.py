"""Parquet data files take their columns' min and max from the statistics the writer puts in
the footer (table/data_files/parquet_bounds.py). Differential: the same batches written with the
footer's bounds and with paimond's own computation (``track_bounds`` answering none) give
equal file metadata, byte for byte, for every type and stats mode, in both layouts, with
nulls, NaN, empty, long (> 16 code points, multi-byte at the cut) and very long (> 4096 bytes,
left out of the footer) strings over several row groups."""

from __future__ import annotations

import dataclasses
import io
import math
import random
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from paimond.format.meta.manifest import DataFileMeta, ManifestEntry, encode_manifest
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
    RowType,
    SmallIntType,
    TimestampType,
    TimeType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
)
from paimond.table.data_files import file_formats
from paimond.table.data_files.arrow_io import FILE_SOURCE_COMPACT, RollingDataFileWriter
from paimond.table.data_files.kv_layout import physical_arrow_schema, to_key_value_batch
from paimond.table.data_files.parquet_bounds import LONG_VALUE_BYTES, ParquetBounds
from paimond.table.options.core import TableOptions
from paimond.table.storage.interface import Storage, open_storage

STRING = VarCharType(length=2147483647)
TYPES: tuple[tuple[str, DataType], ...] = (
    ("boolean", BooleanType()), ("tinyint", TinyIntType()), ("smallint", SmallIntType()),
    ("int", IntType()), ("bigint", BigIntType()), ("float", FloatType()), ("double", DoubleType()),
    ("decimal_5_0", DecimalType(precision=5, scale=0)),
    ("decimal_10_2", DecimalType(precision=10, scale=2)),
    ("decimal_18_3", DecimalType(precision=18, scale=3)),
    ("decimal_38_4", DecimalType(precision=38, scale=4)), ("char", CharType(length=5)),
    ("varchar", VarCharType(length=40)), ("string", STRING), ("binary", BinaryType(length=4)),
    ("bytes", VarBinaryType(length=2147483647)), ("date", DateType()), ("time", TimeType(precision=3)),
    ("timestamp_0", TimestampType(precision=0)), ("timestamp_3", TimestampType(precision=3)),
    ("timestamp_6", TimestampType(precision=6)), ("timestamp_9", TimestampType(precision=9)),
    ("timestamp_ltz_3", LocalZonedTimestampType(precision=3)),
    ("timestamp_ltz_6", LocalZonedTimestampType(precision=6)),
    ("timestamp_ltz_9", LocalZonedTimestampType(precision=9)),
    ("array_int", ArrayType(element=IntType())), ("map_string_int", MapType(key=STRING, value=IntType())),
    ("row", RowType(fields=(DataField(100, "x", IntType()), DataField(101, "y", STRING)))),
)
_UNIT = {0: 10**9, 3: 10**6, 6: 10**3, 9: 1}
# Strings that test the cut of truncate(N): longer than 16 code points, multi-byte UTF-8 at
# the cut, U+10FFFF runs (no upper bound), the empty string, and values over 4096 bytes.
TEXTS = ("", "a", "é" * 20, "a" * 15 + "€" * 3, "\U0010ffff" * 18, "z" * 17 + "\U0001f600",
         "zz" + "\U0010ffff" * 20, "m" * (LONG_VALUE_BYTES + 1), "\U0010ffff" * 2000, " ")
BLOBS = (b"", b"\x00", b"\xff" * 20, b"\x7f" * 17, b"\xff" * (LONG_VALUE_BYTES + 3), b"a" * 5000)
MODES = (
    {},  # truncate(16)
    {"metadata.stats-mode": "full"},
    {"metadata.stats-mode": "counts"},
    {"metadata.stats-mode": "none", "fields.v_string.stats-mode": "truncate(3)",
     "fields.v_bytes.stats-mode": "full", "fields.v_int.stats-mode": "full"},
    {"metadata.stats-mode": "truncate(1)", "metadata.stats-dense-store": "false"},
    {"metadata.stats-keep-first-n-columns": "9", "fields.v_char.stats-mode": "counts"},
    {"metadata.stats-mode.per.level": "1:full", "file.compression": "none"},
)


def _value(rng: random.Random, t: DataType, column: int) -> Any:
    if isinstance(t, BooleanType):
        return rng.random() < 0.5
    if isinstance(t, (TinyIntType, SmallIntType, IntType, BigIntType)):
        bits = {TinyIntType: 8, SmallIntType: 16, IntType: 32, BigIntType: 64}[type(t)]
        return rng.randint(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if isinstance(t, (FloatType, DoubleType)):
        return rng.choice([0.0, -0.0, 1.5, -2.25, math.inf, rng.randrange(-4000, 4000) / 8])
    if isinstance(t, DecimalType):
        return Decimal(rng.randrange(-(10 ** t.precision) + 1, 10 ** t.precision)).scaleb(-t.scale)
    if isinstance(t, CharType):
        return "".join(rng.choices("abé€", k=rng.randrange(0, 6)))
    if isinstance(t, VarCharType):
        short = "".join(rng.choices("abé€\U0001f600\U0010ffff", k=rng.randrange(0, 24)))
        return short if t.length < 100 or rng.random() < 0.7 else rng.choice(TEXTS)
    if isinstance(t, BinaryType):
        return rng.randbytes(4)
    if isinstance(t, VarBinaryType):
        return rng.randbytes(rng.randrange(0, 24)) if rng.random() < 0.7 else rng.choice(BLOBS)
    if isinstance(t, DateType):
        return rng.randrange(-30000, 40000)
    if isinstance(t, TimeType):
        return rng.randrange(86_400_000)
    if isinstance(t, (TimestampType, LocalZonedTimestampType)):
        return rng.randrange(-(10**18), 4 * 10**18) // _UNIT[t.precision]
    if isinstance(t, ArrayType):
        return [rng.randrange(100) for _ in range(rng.randrange(3))]
    if isinstance(t, MapType):
        return [(str(k), k) for k in range(rng.randrange(3))]
    if isinstance(t, RowType):
        return {"x": rng.randrange(100), "y": None if rng.random() < 0.3 else "y"}
    raise AssertionError(t)


def _storage_type(arrow_type: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(arrow_type):
        return pa.int64()
    if pa.types.is_date32(arrow_type) or pa.types.is_time32(arrow_type):
        return pa.int32()
    return arrow_type


def _batches(schema: TableSchema, *, key_value: bool, seed: int) -> list[pa.RecordBatch]:
    """Six batches of 40 rows: random values with nulls; batch 2 all null (but the key),
    batch 3 NaN in the floating columns."""
    rng = random.Random(seed)
    arrow_schema = physical_arrow_schema(schema.row_type)
    keys = iter(sorted(rng.sample(range(-10**6, 10**6), 240)))
    batches = []
    for number in range(6):
        columns = []
        for column, (field, data) in enumerate(zip(arrow_schema, schema.fields, strict=True)):
            if column == 0:
                columns.append(pa.array([next(keys) for _ in range(40)], pa.int32()))
                continue
            values = [None if number == 2 or rng.random() < 0.2 else _value(rng, data.type, column)
                      for _ in range(40)]
            if number == 3 and isinstance(data.type, (FloatType, DoubleType)):
                values[7] = math.nan
            columns.append(pa.array(values, type=_storage_type(field.type)).cast(field.type))
        values_batch = pa.RecordBatch.from_arrays(columns, schema=arrow_schema)
        if key_value:
            sequences = pa.array(range(1000 + 40 * number, 1040 + 40 * number))
            kinds = pa.array([rng.choice([0, 0, 1, 2, 3]) for _ in range(40)], pa.int8())
            values_batch = to_key_value_batch(values_batch, schema, sequences, kinds)
        batches.append(values_batch)
    return batches


def _schema(options: dict[str, str], key_value: bool) -> TableSchema:
    fields = (DataField(0, "id", IntType(nullable=False)),
              *(DataField(i + 1, f"v_{name}", t) for i, (name, t) in enumerate(TYPES)))
    return TableSchema(0, fields, len(fields) - 1, (), ("id",) if key_value else (),
                       {"bucket": "1", "file.format": "parquet", **options})


def _write(storage: Storage, schema: TableSchema, batches: list[pa.RecordBatch], *,
           key_value: bool) -> list[DataFileMeta]:
    writer = RollingDataFileWriter(storage, "bucket-0", schema, TableOptions.of(schema), level=1,
                                   key_value=key_value, file_source=FILE_SOURCE_COMPACT,
                                   now_millis=lambda: 1_700_000_000_000)
    for batch in batches:
        writer.write(batch)
    return writer.close()


def _manifest(metas: list[DataFileMeta]) -> bytes:
    entries = [ManifestEntry(kind=0, partition=b"", bucket=0, total_buckets=1,
                             file=dataclasses.replace(m, file_name=f"f-{i}.parquet"))
               for i, m in enumerate(metas)]
    data = encode_manifest(entries, compression="none")
    return data.replace(data[-16:], bytes(16))  # fastavro's random sync marker


@pytest.mark.parametrize("key_value", [True, False], ids=["primary-key", "append"])
@pytest.mark.parametrize("options", MODES, ids=[str(i) for i in range(len(MODES))])
def test_footer_bounds_give_the_same_metadata_as_computed_ones(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch, options: dict[str, str], key_value: bool) -> None:
    monkeypatch.setattr(file_formats, "_ROW_GROUP_BYTES", 6000)  # several row groups a file
    schema = _schema(options, key_value)
    batches = _batches(schema, key_value=key_value, seed=len(str(options)))
    taken: list[int] = []
    real_bounds = file_formats._ParquetWriter.bounds

    def spied(self: Any, index: int) -> Any:
        taken.append(index)
        return real_bounds(self, index)

    monkeypatch.setattr(file_formats._ParquetWriter, "bounds", spied)
    footer = _write(open_storage(str(tmp_path / "footer")), schema, batches, key_value=key_value)
    monkeypatch.setattr(file_formats._ParquetWriter, "track_bounds", lambda self, columns: frozenset())
    computed = _write(open_storage(str(tmp_path / "computed")), schema, batches, key_value=key_value)
    assert len(footer) == len(computed) == 1
    assert dataclasses.replace(footer[0], file_name="") == dataclasses.replace(computed[0], file_name="")
    assert _manifest(footer) == _manifest(computed)
    if options.get("metadata.stats-mode") != "counts":
        assert taken  # the footer's bounds were used, not the computed path twice


def _parquet_file(tables: list[pa.Table], *, statistics: bool = True) -> tuple[ParquetBounds, bytes]:
    bounds = ParquetBounds({i: (i, f.type) for i, f in enumerate(tables[0].schema)})
    sink = io.BytesIO()
    writer = pq.ParquetWriter(sink, tables[0].schema, write_statistics=statistics)
    for table in tables:
        bounds.note(table)
        writer.write_table(table, row_group_size=max(table.num_rows, 1))
    writer.close()
    bounds.resolve(writer.writer.metadata)
    return bounds, sink.getvalue()


def test_long_values_left_out_of_the_footer_are_bounded_by_min_max() -> None:
    long_low, long_high = "a" * (LONG_VALUE_BYTES + 1), "z" * 5000
    schema = pa.schema([("s", pa.string()), ("b", pa.binary())])
    groups = [pa.table({"s": ["m", long_high, None], "b": [b"k", b"\x00" * 5000, b"l"]}, schema=schema),
              pa.table({"s": ["n", "o", None], "b": [b"p", None, b"q"]}, schema=schema),
              pa.table({"s": [long_low, "p", "q"], "b": [None, None, None]}, schema=schema)]
    bounds, data = _parquet_file(groups)
    footer = pq.ParquetFile(io.BytesIO(data)).metadata
    assert not footer.row_group(0).column(0).statistics.has_min_max  # the writer left it out
    assert bounds.bounds(0) == (long_low, long_high)
    assert bounds.bounds(1) == (b"\x00" * 5000, b"q")


def test_values_up_to_the_limit_come_exact_from_the_footer() -> None:
    low, high = "a" * LONG_VALUE_BYTES, "\U0001f600" * (LONG_VALUE_BYTES // 4)
    schema = pa.schema([("s", pa.string()), ("b", pa.binary())])
    table = pa.table({"s": [high, "b" * 300, low], "b": [b"\xff" * 4096, b"\x01" * 200, b"\x00" * 70]},
                     schema=schema)
    bounds, data = _parquet_file([table])
    stats = pq.ParquetFile(io.BytesIO(data)).metadata.row_group(0).column(0).statistics
    assert (stats.min_raw, stats.max_raw) == (low.encode(), high.encode())  # from the footer
    assert bounds.bounds(0) == (low, high)
    assert bounds.bounds(1) == (b"\x00" * 70, b"\xff" * 4096)


def test_missing_statistics_make_bounds_unknown_and_all_nulls_none() -> None:
    table = pa.table({"i": pa.array([3, 1, None], pa.int64()), "n": pa.array([None] * 3, pa.string())})
    bounds, _ = _parquet_file([table], statistics=False)
    assert bounds.bounds(0) is None and bounds.bounds(1) is None
    bounds, _ = _parquet_file([table])
    assert bounds.bounds(0) == (1, 3) and bounds.bounds(1) == (None, None)
