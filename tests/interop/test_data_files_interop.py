"""Data files against pypaimon, both ways.

pypaimon writes, paimond reads: every data file of the latest snapshot of the oracle tables
(tests/pypaimon_tables.py: parquet, orc and avro files, every data type) reads as pypaimon's
table read (append tables) or as the file's raw content (primary-key tables, physical
layout), and the metadata paimond computes for those rows equals pypaimon's manifest entry
except where pypaimon diverges from Java (explained below).

paimond writes, pypaimon reads: files paimond writes into copies of those tables, committed
by the test helper, are read by pypaimon with exactly the expected rows, for parquet, orc,
avro and .row files in primary-key and append tables.
"""

from __future__ import annotations

import datetime as dt
import io
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest
from pypaimon import Schema
from support.pypaimon_oracle import live_files, read_rows
from support.pypaimon_tables import catalog_for, sort_rows
from support.table_append import append_files

from paimond.format.binary.binary_row import decode_manifest_row
from paimond.format.meta.schema import TableSchema
from paimond.table.catalog import Table, open_table
from paimond.table.data_files.arrow_io import (
    FILE_SOURCE_APPEND,
    DataFileWriter,
    RollingDataFileWriter,
    read_data_file,
)
from paimond.table.data_files.kv_layout import (
    conform,
    physical_arrow_schema,
    physical_row_type,
    to_key_value_batch,
)
from paimond.table.options.core import TableOptions
from paimond.table.scan.snapshot_scan import LiveFile, bucket_path, data_file_path, scan_snapshot
from paimond.table.storage.interface import open_storage

APPEND_TABLES = ("db.append_unaware", "db.append_fixed_bucket", "db.all_types_partitioned",
                 "db.float_partitions", "db.binary_partition")
# db.append_deletion_vectors is left out of the union check: its deletion vectors hide rows
# that its files still hold.
PK_TABLES = ("db.pk_deduplicate", "db.pk_deduplicate_orc", "db.pk_partial_update",
             "db.pk_aggregation", "db.pk_first_row", "db.pk_deletion_vectors", "db.all_types_pk")
NOW_MILLIS = 1_750_000_000_000


def _open(warehouse: str, name: str) -> Table:
    return open_table(open_storage(warehouse), warehouse, name)


def _live(table: Table) -> list[LiveFile]:
    latest = table.snapshots.latest()
    assert latest is not None
    return scan_snapshot(table, latest).files


def _format(file_name: str) -> str:
    return file_name.rsplit(".", 1)[-1]


def _read(table: Table, live: LiveFile, *, key_value: bool, path: str | None = None) -> pa.Table:
    file_schema = table.schema(live.meta.schema_id)
    read_schema = table.latest_schema()
    batches = read_data_file(table.storage, path or data_file_path(table, read_schema, live),
                             file_format=_format(live.meta.file_name), file_schema=file_schema,
                             read_schema=read_schema, key_value=key_value, batch_rows=7)
    row_type = physical_row_type(read_schema, key_value=key_value)
    return pa.Table.from_batches(list(batches), schema=physical_arrow_schema(row_type))


def _canonical(rows: pa.Table, schema: TableSchema, sort_columns: tuple[str, ...]) -> pa.Table:
    """Rows in paimond's Arrow types (pypaimon names list items and types some columns
    differently), sorted like the oracle."""
    target = physical_arrow_schema(schema.row_type)
    columns = [conform(rows.column(f.name).combine_chunks(), f.type) for f in target]
    return sort_rows(pa.Table.from_arrays(columns, schema=target), sort_columns)


@pytest.mark.parametrize("name", APPEND_TABLES)
def test_append_files_read_as_pypaimon_reads_the_table(oracle_warehouse: tuple[str, list], name: str) -> None:
    warehouse, specs = oracle_warehouse
    spec = next(s for s in specs if s.name == name)
    table = _open(warehouse, name)
    schema = table.latest_schema()
    files = _live(table)
    # Where pypaimon put them: it names BYTES partition directories with Python's repr.
    paths = {d["file_name"]: d["path"] for d in live_files(warehouse, name, table.snapshots.latest().id)}
    ours = pa.concat_tables([_read(table, live, key_value=False, path=paths[live.meta.file_name])
                             for live in files])
    expected = read_rows(warehouse, name)
    assert ours.num_rows == expected.num_rows == spec.expected_rows.num_rows
    assert _canonical(ours, schema, spec.sort_columns).equals(
        _canonical(expected, schema, spec.sort_columns))
    assert {_format(f.meta.file_name) for f in files} == {"avro" if "fixed" in name else "parquet"}


def _raw(path: str, file_format: str) -> pa.Table | list[dict[str, Any]]:
    local = path.removeprefix("file://")
    if file_format == "parquet":
        return pq.ParquetFile(local).read()  # read_table would add hive partition columns
    if file_format == "orc":
        return orc.read_table(local)
    with open(local, "rb") as f:
        return list(fastavro.reader(f))


@pytest.mark.parametrize("name", PK_TABLES)
def test_primary_key_files_read_as_stored(oracle_warehouse: tuple[str, list], name: str) -> None:
    warehouse, _ = oracle_warehouse
    table = _open(warehouse, name)
    schema = table.latest_schema()
    names = physical_row_type(schema, key_value=True).field_names
    for live in _live(table):
        ours = _read(table, live, key_value=True)
        fmt = _format(live.meta.file_name)
        raw = _raw(data_file_path(table, schema, live), fmt)
        assert ours.num_rows == live.meta.row_count
        if isinstance(raw, list):  # avro: compare Python values
            assert ours.to_pylist() == raw, live.meta.file_name
            continue
        assert raw.column_names == names  # _KEY_*, _SEQUENCE_NUMBER, _VALUE_KIND, values
        target = physical_arrow_schema(physical_row_type(schema, key_value=True))
        raw = pa.Table.from_arrays([conform(raw.column(f.name).combine_chunks(), f.type) for f in target],
                                   schema=target)
        assert ours.equals(raw), live.meta.file_name


@pytest.mark.parametrize("name", PK_TABLES)
def test_metadata_of_pypaimon_files_as_paimond_computes_it(oracle_warehouse: tuple[str, list],
                                                           name: str, tmp_path: Path) -> None:
    """Rewrite each file's rows with paimond and compare the metadata with pypaimon's entry.

    Known pypaimon divergences, both valid for Java readers: it writes empty value stats
    (``_VALUE_STATS_COLS = []``) where Java (and paimond) keep truncate(16) stats of every
    column, and ``_DELETE_ROW_COUNT = 0`` even for files holding -U/-D rows, where paimond
    writes the true count (shared/reference Gotchas)."""
    warehouse, _ = oracle_warehouse
    table = _open(warehouse, name)
    scratch = open_storage(str(tmp_path))
    oracle = {(d["file_name"]): d for d in live_files(warehouse, name, table.snapshots.latest().id)}
    hidden_deletes = 0
    for live in _live(table):
        meta = live.meta
        file_schema = table.schema(meta.schema_id)
        writer = DataFileWriter(scratch, f"{meta.file_name}.copy", file_schema, TableOptions.of(file_schema),
                                level=meta.level, key_value=True, file_source=FILE_SOURCE_APPEND,
                                now_millis=lambda: NOW_MILLIS)
        rows = _read(table, live, key_value=True)
        for batch in rows.to_batches():
            writer.write(batch)
        ours = writer.close()
        assert ours is not None
        theirs = oracle[meta.file_name]
        assert (ours.row_count, ours.min_key, ours.max_key) == (
            theirs["row_count"], theirs["min_key"], theirs["max_key"]), meta.file_name
        assert (ours.min_sequence_number, ours.max_sequence_number) == (
            theirs["min_sequence_number"], theirs["max_sequence_number"])
        assert (ours.key_stats.min_values, ours.key_stats.max_values, list(ours.key_stats.null_counts)) == (
            theirs["key_stats"]["min_values"], theirs["key_stats"]["max_values"],
            theirs["key_stats"]["null_counts"]), meta.file_name
        kinds = rows.column("_VALUE_KIND").to_pylist()
        assert ours.delete_row_count == kinds.count(1) + kinds.count(3)
        assert theirs["delete_row_count"] in (0, ours.delete_row_count)
        hidden_deletes += theirs["delete_row_count"] < ours.delete_row_count  # pypaimon's zero
        assert theirs["value_stats_cols"] == [] and ours.value_stats_cols is None
        values = decode_manifest_row(ours.value_stats.min_values, file_schema.row_type)
        assert len(values) == len(file_schema.fields)
    assert hidden_deletes > 0 or name not in ("db.pk_deduplicate", "db.pk_deduplicate_orc",
                                              "db.pk_deletion_vectors")


# ---- paimond writes, pypaimon reads ----------------------------------------------------


def _copy(warehouse: str, name: str, target: Path) -> str:
    database, table_name = name.split(".")
    shutil.copytree(Path(warehouse) / f"{database}.db" / table_name, target / f"{database}.db" / table_name)
    return str(target)


def _fresh(arrow_type: pa.DataType, i: int) -> Any:
    """A value of a value column that differs from everything the builders write."""
    if pa.types.is_string(arrow_type):
        return f"paimond-{i}"
    if pa.types.is_integer(arrow_type):
        return 4200 + i
    if pa.types.is_floating(arrow_type):
        return 0.25 + i
    if pa.types.is_decimal(arrow_type):
        return Decimal(1234 + i).scaleb(-arrow_type.scale)
    if pa.types.is_timestamp(arrow_type):
        return dt.datetime(2030, 1, 2, 3, 4, 5, 6 + i)
    if pa.types.is_list(arrow_type):
        return [_fresh(arrow_type.value_type, i)]
    raise AssertionError(arrow_type)


def _bucket_rows(table: Table, live_in_bucket: list[LiveFile]) -> pa.Table:
    return pa.concat_tables([_read(table, live, key_value=True) for live in live_in_bucket])


@pytest.mark.parametrize(("name", "file_format"), [
    ("db.pk_deduplicate", "parquet"), ("db.pk_deduplicate_orc", "orc"),
    ("db.pk_partial_update", "avro"), ("db.pk_deduplicate", "row")])
def test_pypaimon_reads_primary_key_files_paimond_wrote(oracle_warehouse: tuple[str, list], tmp_path: Path,
                                                        name: str, file_format: str) -> None:
    """One existing key gets a newer value (higher sequence number), three new keys appear."""
    warehouse = _copy(oracle_warehouse[0], name, tmp_path)
    table = _open(warehouse, name)
    schema = table.latest_schema()
    before = read_rows(warehouse, name)
    (partition, bucket), files = next(iter(scan_snapshot(table, table.snapshots.latest()).buckets().items()))
    existing = _bucket_rows(table, files.files)
    keys = schema.trimmed_primary_keys
    live_keys = {tuple(r[k] for k in schema.primary_keys) for r in before.to_pylist()}
    chosen = next(r for r in existing.to_pylist() if tuple(r[k] for k in schema.primary_keys) in live_keys)
    values = [f.name for f in schema.fields if f.name not in schema.primary_keys]
    arrow_schema = physical_arrow_schema(schema.row_type)
    updated = {**{f.name: chosen[f.name] for f in schema.fields},
               **{c: _fresh(arrow_schema.field(c).type, 0) for c in values}}
    fresh = [{**updated, keys[-1]: 900_000 + i, **{c: _fresh(arrow_schema.field(c).type, i) for c in values}}
             for i in range(1, 4)]
    rows = sorted([updated, *fresh], key=lambda r: tuple(r[k] for k in keys))
    sequence = max(existing.column("_SEQUENCE_NUMBER").to_pylist()) + 1
    batch = to_key_value_batch(
        pa.RecordBatch.from_pylist(rows, schema=arrow_schema), schema,
        pa.array(range(sequence, sequence + len(rows))), pa.array([2 if r is updated else 0 for r in rows]))
    options = TableOptions({**schema.options, "file.format": file_format})
    writer = RollingDataFileWriter(table.storage, bucket_path(table, schema, partition, bucket), schema,
                                   options, level=0, key_value=True, file_source=FILE_SOURCE_APPEND,
                                   now_millis=lambda: NOW_MILLIS)
    writer.write(batch)
    (meta,) = writer.close()
    assert meta.file_name.endswith(f".{file_format}")
    append_files(table, [(partition, bucket, files.total_buckets, meta)])
    after = read_rows(warehouse, name)
    chosen_key = tuple(chosen[k] for k in schema.primary_keys)
    expected = [r for r in before.to_pylist() if tuple(r[k] for k in schema.primary_keys) != chosen_key]
    expected = pa.Table.from_pylist(expected + rows, schema=before.schema)
    assert after.num_rows == before.num_rows + 3
    assert after.equals(sort_rows(expected, schema.primary_keys))


def _orc_append_table(warehouse: str) -> str:
    """An append table of ORC files written by pypaimon (the shared builders have none)."""
    schema = pa.schema([("dt", pa.string()), pa.field("id", pa.int64(), nullable=False),
                        ("amount", pa.decimal128(12, 2)), ("at", pa.timestamp("us")),
                        ("tags", pa.list_(pa.string()))])
    catalog = catalog_for(warehouse)
    catalog.create_database("db", True)
    catalog.create_table("db.append_orc", Schema.from_pyarrow_schema(
        schema, partition_keys=["dt"], options={"bucket": "-1", "file.format": "orc"}), False)
    table = catalog.get_table("db.append_orc")
    for commit in range(2):
        builder = table.new_batch_write_builder()
        write, committer = builder.new_write(), builder.new_commit()
        rows = [{"dt": ("a", "b")[i % 2], "id": commit * 100 + i, "amount": Decimal(i).scaleb(-2),
                 "at": dt.datetime(2024, 1, 1, 0, 0, i), "tags": [str(i)] if i % 3 else None}
                for i in range(10)]
        write.write_arrow(pa.Table.from_pylist(rows, schema=schema))
        committer.commit(write.prepare_commit())
        write.close()
        committer.close()
    return "db.append_orc"


def test_orc_append_files_read_as_pypaimon_reads_the_table(tmp_path: Path) -> None:
    warehouse = str(tmp_path)
    name = _orc_append_table(warehouse)
    table = _open(warehouse, name)
    files = _live(table)
    assert {_format(f.meta.file_name) for f in files} == {"orc"}
    ours = pa.concat_tables([_read(table, live, key_value=False) for live in files])
    sort = ("dt", "id", "amount", "at")
    schema = table.latest_schema()
    assert _canonical(ours, schema, sort).equals(_canonical(read_rows(warehouse, name), schema, sort))


@pytest.mark.parametrize(("name", "file_format"), [
    ("db.append_unaware", "parquet"), ("db.append_fixed_bucket", "avro"), ("db.append_orc", "orc"),
    ("db.append_unaware", "row")])
def test_pypaimon_reads_append_files_paimond_wrote(oracle_warehouse: tuple[str, list], tmp_path: Path,
                                                   name: str, file_format: str) -> None:
    if name == "db.append_orc":
        warehouse = str(tmp_path)
        _orc_append_table(warehouse)
    else:
        warehouse = _copy(oracle_warehouse[0], name, tmp_path)
    table = _open(warehouse, name)
    schema = table.latest_schema()
    before = read_rows(warehouse, name)
    (partition, bucket), files = next(iter(scan_snapshot(table, table.snapshots.latest()).buckets().items()))
    template = _read(table, files.files[0], key_value=False).slice(0, 1).to_pylist()[0]
    arrow_schema = physical_arrow_schema(schema.row_type)
    partition_names = set(schema.partition_keys)
    rows = [{**template, **{f.name: _fresh(f.type, i) for f in arrow_schema if f.name not in partition_names}}
            for i in range(5)]
    options = TableOptions({**schema.options, "file.format": file_format})
    writer = RollingDataFileWriter(table.storage, bucket_path(table, schema, partition, bucket), schema,
                                   options, level=0, key_value=False, file_source=FILE_SOURCE_APPEND,
                                   now_millis=lambda: NOW_MILLIS, sequence_start=10_000)
    writer.write(pa.RecordBatch.from_pylist(rows, schema=arrow_schema))
    (meta,) = writer.close()
    append_files(table, [(partition, bucket, files.total_buckets, meta)])
    after = read_rows(warehouse, name)
    sort = tuple(c for c in before.column_names if not pa.types.is_list(before.schema.field(c).type))
    expected = pa.concat_tables([before, pa.Table.from_pylist(rows, schema=before.schema)])
    assert after.num_rows == before.num_rows + 5
    assert _canonical(after, schema, sort).equals(_canonical(expected, schema, sort))


def test_avro_files_use_javas_schema_names_and_codec(tmp_path: Path) -> None:
    from paimond.format.types.data_types import DataField, IntType, RowType, VarCharType

    row = RowType(fields=(DataField(3, "x", IntType()),))
    schema = TableSchema(0, (DataField(0, "id", IntType(nullable=False)), DataField(1, "r", row),
                             DataField(2, "s", VarCharType(length=3))), 3, (), (), {"file.format": "avro"})
    storage = open_storage(str(tmp_path))
    writer = RollingDataFileWriter(storage, "b", schema, TableOptions.of(schema), level=0, key_value=False,
                                   file_source=0, now_millis=lambda: 0)
    writer.write(pa.RecordBatch.from_pylist([{"id": 1, "r": {"x": 2}, "s": "abc"}],
                                            schema=physical_arrow_schema(schema.row_type)))
    (meta,) = writer.close()
    reader = fastavro.reader(io.BytesIO(storage.read_bytes(storage.join("b", meta.file_name))))
    assert reader.codec == "zstandard"
    assert reader.writer_schema["name"] == "org.apache.paimon.avro.generated.record"
    assert reader.writer_schema["fields"][1]["type"][1]["name"] == "org.apache.paimon.avro.generated.record_r"
    assert reader.writer_schema["fields"][0]["type"] == "int"  # NOT NULL: no union
    assert list(reader) == [{"id": 1, "r": {"x": 2}, "s": "abc"}]
