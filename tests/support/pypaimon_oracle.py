"""pypaimon's view of a table's metadata and rows: the oracle paimond's scan is checked against.

The live files of a snapshot are computed the way pypaimon 2.1.0 does it: the manifest
files of the base and delta manifest lists (`ManifestListManager.read_all`), each read by
`ManifestFileManager.read(drop_stats=False)`, and the ADD/DELETE entries merged by
`FileEntry.merge_entries` (`manifest/schema/file_entry.py`).

pypaimon keeps no raw bytes for a partition or key: `ManifestFileManager.read` decodes
`_PARTITION`, `_MIN_KEY` and `_MAX_KEY` into GenericRows (stats stay raw in `BinaryRow.data`).
So each manifest file is also read with fastavro, record by record in the same order, and
the raw values (`_PARTITION`: 4-byte big-endian arity + BinaryRow, as stored) come from
there. `GenericRowSerializer.to_bytes(entry.partition)` re-serializes a partition in that
same framing; the tests check it matches the stored bytes for every table written here.

pypaimon-rust 0.4.0 reads local (and S3) tables through
`pypaimon_rust.datafusion.PaimonCatalog`; `read_rows_rust` uses it.
"""

from __future__ import annotations

import datetime as dt
import io
from typing import Any

import fastavro
import pyarrow as pa
from pypaimon.manifest.index_manifest_file import IndexManifestFile
from pypaimon.manifest.manifest_file_manager import ManifestFileManager
from pypaimon.manifest.manifest_list_manager import ManifestListManager
from pypaimon.manifest.schema.file_entry import FileEntry
from pypaimon.schema.data_types import PyarrowFieldParser
from pypaimon.utils.file_store_path_factory import canonical_data_file_path

from support.pypaimon_tables import catalog_for, sort_columns_of, sort_rows

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MILLISECOND = dt.timedelta(milliseconds=1)


def pypaimon_table(warehouse: str, table_name: str, catalog_options: dict[str, str] | None) -> Any:
    return catalog_for(warehouse, catalog_options).get_table(table_name)


def _snapshot(table: Any, snapshot_id: int) -> Any:
    snapshot = table.snapshot_manager().get_snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise LookupError(f"{table.table_path}: no snapshot {snapshot_id}")
    return snapshot


def _avro_records(table: Any, file_name: str) -> list[dict[str, Any]]:
    path = f"{table.table_path.rstrip('/')}/manifest/{file_name}"
    with table.file_io.new_input_stream(path) as stream:
        return list(fastavro.reader(io.BytesIO(stream.read())))


def snapshot_ids(warehouse: str, table_name: str,
                 catalog_options: dict[str, str] | None = None) -> list[int]:
    table = pypaimon_table(warehouse, table_name, catalog_options)
    return sorted(s.id for s in table.snapshot_manager().list_snapshots())


def _stats(stats: Any, raw: dict[str, Any]) -> dict[str, Any]:
    return {"min_values": raw["_MIN_VALUES"], "max_values": raw["_MAX_VALUES"],
            "null_counts": list(stats.null_counts) if stats.null_counts is not None else None}


def _file_dict(table: Any, entry: Any, record: dict[str, Any]) -> dict[str, Any]:
    meta, raw = entry.file, record["_FILE"]
    creation = raw["_CREATION_TIME"]
    return {
        "partition": record["_PARTITION"], "partition_values": tuple(entry.partition.values),
        "bucket": entry.bucket, "total_buckets": entry.total_buckets,
        "file_name": meta.file_name, "file_size": meta.file_size, "row_count": meta.row_count,
        "level": meta.level, "min_sequence_number": meta.min_sequence_number,
        "max_sequence_number": meta.max_sequence_number, "schema_id": meta.schema_id,
        "min_key": raw["_MIN_KEY"], "max_key": raw["_MAX_KEY"],
        "min_key_values": tuple(meta.min_key.values), "max_key_values": tuple(meta.max_key.values),
        "key_stats": _stats(meta.key_stats, raw["_KEY_STATS"]),
        "value_stats": _stats(meta.value_stats, raw["_VALUE_STATS"]),
        # As stored: avro timestamp-millis of the writer's local wall clock.
        "creation_time": None if creation is None else (creation - _EPOCH) // _MILLISECOND,
        "delete_row_count": meta.delete_row_count, "extra_files": list(meta.extra_files or []),
        "embedded_index": meta.embedded_index, "file_source": meta.file_source,
        "value_stats_cols": meta.value_stats_cols, "external_path": meta.external_path,
        "first_row_id": meta.first_row_id, "write_cols": meta.write_cols,
        "path": meta.external_path or canonical_data_file_path(
            table, entry.partition.values, entry.bucket, meta.file_name),
    }


def live_files(warehouse: str, table_name: str, snapshot_id: int,
               catalog_options: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every data file live in `snapshot_id`, in pypaimon's merge order, as plain dicts.
    Raw manifest bytes: partition, min_key, max_key, key/value_stats min/max_values.
    Decoded by pypaimon: partition_values, min/max_key_values. `path` is where pypaimon
    locates the file."""
    table = pypaimon_table(warehouse, table_name, catalog_options)
    manifests = ManifestListManager(table).read_all(_snapshot(table, snapshot_id))
    reader, entries, records = ManifestFileManager(table), [], {}
    for manifest in manifests:
        read = reader.read(manifest.file_name, drop_stats=False, file_size=manifest.file_size)
        raw = _avro_records(table, manifest.file_name)
        assert [e.file.file_name for e in read] == [r["_FILE"]["_FILE_NAME"] for r in raw]
        for entry, record in zip(read, raw, strict=False):
            entries.append(entry)
            records[id(entry)] = record
    merged = FileEntry.merge_entries(entries)
    assert all(e.kind == 0 for e in merged), "a DELETE entry outlived its ADD"
    return [_file_dict(table, e, records[id(e)]) for e in merged]


def index_entries(warehouse: str, table_name: str, snapshot_id: int,
                  catalog_options: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The snapshot's index manifest as read by pypaimon's `IndexManifestFile`, in file
    order; `partition` is the raw stored bytes. Empty when the snapshot has none."""
    table = pypaimon_table(warehouse, table_name, catalog_options)
    name = _snapshot(table, snapshot_id).index_manifest
    if not name:
        return []
    entries, raw = IndexManifestFile(table).read(name), _avro_records(table, name)
    assert [e.index_file.file_name for e in entries] == [r["_FILE_NAME"] for r in raw]
    return [{
        "kind": e.kind, "partition": r["_PARTITION"], "partition_values": tuple(e.partition.values),
        "bucket": e.bucket, "index_type": e.index_file.index_type,
        "file_name": e.index_file.file_name, "file_size": e.index_file.file_size,
        "row_count": e.index_file.row_count, "external_path": e.index_file.external_path,
        "dv_ranges": {name: {"offset": m.offset, "length": m.length, "cardinality": m.cardinality}
                      for name, m in (e.index_file.dv_ranges or {}).items()},
        "global_index": r.get("_GLOBAL_INDEX"),
    } for e, r in zip(entries, raw, strict=False)]


def read_rows(warehouse: str, table_name: str, snapshot_id: int | None = None,
              catalog_options: dict[str, str] | None = None, *,
              include_level0: bool = False) -> pa.Table:
    """pypaimon's batch read, sorted by the primary key (or every sortable column).
    `include_level0` merges level-0 files too where a batch read would skip them
    (first-row and deletion-vector tables): the content a full compaction must keep."""
    table = pypaimon_table(warehouse, table_name, catalog_options)
    if snapshot_id is not None:
        table = table.copy({"scan.snapshot-id": str(snapshot_id)})
    builder = table.new_read_builder()
    scan = builder.new_scan()
    if include_level0:
        scan.file_scanner.skip_level0 = False
    rows = builder.new_read().to_arrow(scan.plan().splits())
    return sort_rows(rows, sort_columns_of(rows.schema, table.primary_keys))


def read_rows_rust(warehouse: str, table_name: str, snapshot_id: int | None = None,
                   catalog_options: dict[str, str] | None = None) -> pa.Table | None:
    """pypaimon-rust's batch read, sorted like `read_rows`; None when it is not installed."""
    try:
        from pypaimon_rust.datafusion import PaimonCatalog
    except ImportError:
        return None
    catalog = PaimonCatalog({**(catalog_options or {}), "warehouse": warehouse})
    table = catalog.get_table(table_name)
    options = {} if snapshot_id is None else {"scan.snapshot-id": str(snapshot_id)}
    builder = table.new_read_builder(options)
    batches = builder.new_read().read(builder.new_scan().plan().splits())
    fields = pypaimon_table(warehouse, table_name, catalog_options).table_schema.fields
    arrow_schema = PyarrowFieldParser.from_paimon_schema(fields)
    rows = pa.Table.from_batches(batches) if batches else arrow_schema.empty_table()
    return sort_rows(rows, sort_columns_of(rows.schema, table.schema().primary_keys()))
