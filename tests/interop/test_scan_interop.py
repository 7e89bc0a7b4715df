"""paimond's scan against pypaimon's own metadata view, on every snapshot of every table.

The tables (tests/pypaimon_tables.py) cover each merge engine, partitioned and not, fixed and
unaware buckets, many commits with retractions, every data type in keys, partitions and values,
parquet/orc/avro, and deletion-vector index files.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.pypaimon_oracle import index_entries, live_files, snapshot_ids

from paimond.format.binary.binary_row import decode_manifest_row, encode_manifest_row
from paimond.format.meta.manifest import DataFileMeta, SimpleStats
from paimond.format.meta.schema import TableSchema
from paimond.format.types.data_types import is_fixed_length
from paimond.table.catalog import Table, list_tables, open_table
from paimond.table.scan.snapshot_scan import LiveFile, data_file_path, scan_snapshot
from paimond.table.status.report import table_status
from paimond.table.storage.interface import open_storage

# pypaimon names BYTES partition directories with Python's repr (p=b%27abc%27), which no
# Java reader would find; paimond computes Java's path, so only that table's paths differ.
NON_JAVA_PATHS = {"db.binary_partition"}


def _stats(stats: SimpleStats) -> dict[str, Any]:
    return {"min_values": stats.min_values, "max_values": stats.max_values,
            "null_counts": None if stats.null_counts is None else list(stats.null_counts)}


def _as_oracle_dict(live: LiveFile) -> dict[str, Any]:
    meta: DataFileMeta = live.meta
    entry = live.entry
    return {
        "partition": entry.partition, "bucket": entry.bucket,
        "total_buckets": entry.total_buckets, "file_name": meta.file_name,
        "file_size": meta.file_size, "row_count": meta.row_count, "level": meta.level,
        "min_sequence_number": meta.min_sequence_number,
        "max_sequence_number": meta.max_sequence_number, "schema_id": meta.schema_id,
        "min_key": meta.min_key, "max_key": meta.max_key,
        "key_stats": _stats(meta.key_stats), "value_stats": _stats(meta.value_stats),
        "creation_time": meta.creation_time_millis, "delete_row_count": meta.delete_row_count,
        "extra_files": list(meta.extra_files), "embedded_index": meta.embedded_index,
        "file_source": meta.file_source,
        "value_stats_cols": None if meta.value_stats_cols is None else list(meta.value_stats_cols),
        "external_path": meta.external_path, "first_row_id": meta.first_row_id,
        "write_cols": None if meta.write_cols is None else list(meta.write_cols),
    }


def _table_names(oracle_warehouse: tuple[str, list]) -> list[str]:
    return [spec.name for spec in oracle_warehouse[1]]


@pytest.fixture(scope="module")
def tables(oracle_warehouse: tuple[str, list]) -> dict[str, Table]:
    warehouse, _ = oracle_warehouse
    storage = open_storage(warehouse)
    return {t.name: t for t in list_tables(storage, warehouse)}


def test_every_oracle_table_is_discovered(oracle_warehouse: tuple[str, list],
                                          tables: dict[str, Table]) -> None:
    assert sorted(tables) == sorted(_table_names(oracle_warehouse))


def _assert_round_trip(data: bytes, types: list, what: str) -> None:
    values = decode_manifest_row(data, types)
    encoded = encode_manifest_row(values, types)
    if encoded == data:
        return
    # The one known divergence: Java reserves zeroed variable-part bytes for a NULL DECIMAL
    # (p > 18) or TIMESTAMP (p > 3) (shared/golden/java/binaryrow/all_types_nulls.bin);
    # pypaimon does not. paimond writes Java's layout; both decode to the same values.
    assert any(v is None and not is_fixed_length(t) for v, t in zip(values, types, strict=False)), what
    assert decode_manifest_row(encoded, types) == values, what
    assert len(encoded) > len(data), what


def _value_stats_types(schema: TableSchema, cols: tuple[str, ...] | None) -> list:
    names = schema.field_names if cols is None else list(cols)
    return [schema.field(n).type for n in names]


def test_scan_equals_pypaimon_on_every_snapshot(oracle_warehouse: tuple[str, list],
                                                tables: dict[str, Table]) -> None:
    warehouse, specs = oracle_warehouse
    compared_files = compared_snapshots = 0
    for spec in specs:
        table = tables[spec.name]
        ids = table.snapshots.list_ids()
        assert ids == snapshot_ids(warehouse, spec.name)
        assert len(ids) == spec.snapshot_count
        for snapshot_id in ids:
            scanned = scan_snapshot(table, table.snapshots.load(snapshot_id))
            ours = sorted((_as_oracle_dict(f) for f in scanned.files),
                          key=lambda d: (d["partition"], d["bucket"], d["file_name"]))
            theirs = sorted(
                ({k: v for k, v in d.items()
                  if k not in ("partition_values", "min_key_values", "max_key_values", "path")}
                 for d in live_files(warehouse, spec.name, snapshot_id)),
                key=lambda d: (d["partition"], d["bucket"], d["file_name"]))
            assert ours == theirs, f"{spec.name} snapshot {snapshot_id}"
            compared_files += len(ours)
            compared_snapshots += 1
    assert compared_snapshots >= 50 and compared_files >= 200


def test_binary_rows_of_every_file_re_encode_byte_identically(
        oracle_warehouse: tuple[str, list], tables: dict[str, Table]) -> None:
    rows = 0
    for spec in oracle_warehouse[1]:
        table = tables[spec.name]
        latest = table.snapshots.latest()
        assert latest is not None
        for live in scan_snapshot(table, latest).files:
            schema = table.schema(live.meta.schema_id)
            partition_types = schema.partition_type.field_types
            key_types = schema.key_type.field_types if schema.primary_keys else []
            meta = live.meta
            _assert_round_trip(live.entry.partition, partition_types, f"{spec.name} partition")
            _assert_round_trip(meta.min_key, key_types, f"{spec.name} min key")
            _assert_round_trip(meta.max_key, key_types, f"{spec.name} max key")
            for stats in (meta.key_stats,):
                if schema.primary_keys:
                    _assert_round_trip(stats.min_values, key_types, f"{spec.name} key stats")
                    _assert_round_trip(stats.max_values, key_types, f"{spec.name} key stats")
            value_types = _value_stats_types(schema, meta.value_stats_cols)
            if meta.value_stats.min_values[:4] != b"\0\0\0\0":
                _assert_round_trip(meta.value_stats.min_values, value_types, spec.name)
                _assert_round_trip(meta.value_stats.max_values, value_types, spec.name)
            rows += 1
    assert rows >= 50


def test_data_file_paths_match_where_pypaimon_put_them(
        oracle_warehouse: tuple[str, list], tables: dict[str, Table]) -> None:
    warehouse = oracle_warehouse[0]
    checked = 0
    for spec in oracle_warehouse[1]:
        if spec.name in NON_JAVA_PATHS:
            continue
        table = tables[spec.name]
        latest = table.snapshots.latest()
        assert latest is not None
        schema = table.latest_schema()
        oracle_paths = {d["file_name"]: d["path"] for d in live_files(warehouse, spec.name, latest.id)}
        for live in scan_snapshot(table, latest).files:
            path = data_file_path(table, schema, live)
            assert path == oracle_paths[live.meta.file_name].removeprefix("file://")
            assert table.storage.exists(path)
            checked += 1
    assert checked >= 50


def test_index_manifests_equal_pypaimon(oracle_warehouse: tuple[str, list],
                                        tables: dict[str, Table]) -> None:
    warehouse = oracle_warehouse[0]
    seen = 0
    for spec in oracle_warehouse[1]:
        table = tables[spec.name]
        for snapshot_id in table.snapshots.list_ids():
            scanned = scan_snapshot(table, table.snapshots.load(snapshot_id))
            ours = [{
                "kind": e.kind, "partition": e.partition, "bucket": e.bucket,
                "index_type": e.index_file.index_type, "file_name": e.index_file.file_name,
                "file_size": e.index_file.file_size, "row_count": e.index_file.row_count,
                "external_path": e.index_file.external_path,
                "dv_ranges": {dv.data_file_name: {"offset": dv.offset, "length": dv.length,
                                                  "cardinality": dv.cardinality}
                              for dv in e.index_file.dv_ranges or ()},
            } for e in scanned.index_entries]
            theirs = [{k: v for k, v in d.items() if k not in ("partition_values", "global_index")}
                      for d in index_entries(warehouse, spec.name, snapshot_id)]
            assert ours == theirs, f"{spec.name} snapshot {snapshot_id}"
            seen += len(ours)
    assert seen > 0, "some table must have deletion-vector index files"


def test_status_reports_every_table(oracle_warehouse: tuple[str, list],
                                    tables: dict[str, Table]) -> None:
    for name, table in tables.items():
        status = table_status(table, verify_files=name not in NON_JAVA_PATHS)
        assert status.error is None, status.error
        assert status.latest_snapshot == table.snapshots.latest_id()
        live_rows = sum(level.rows for b in status.buckets for level in b.levels)
        latest = table.snapshots.latest()
        assert latest is not None and live_rows == latest.total_record_count


def test_open_table_by_name(oracle_warehouse: tuple[str, list]) -> None:
    warehouse = oracle_warehouse[0]
    table = open_table(open_storage(warehouse), warehouse, "db.pk_deduplicate")
    assert table.latest_schema().primary_keys
