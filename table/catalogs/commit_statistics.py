"""What a commit changes per partition, as a REST catalog's server is told at each commit
(Java ``PartitionEntry.merge`` of the commit's delta files, ``toPartitionStatistics``): for each
partition the commit touches, the sum over its delta entries of the record count, file size
and file count (a DELETE entry counts negative), the latest file creation time (epoch
millis) and the bucket count of the last entry. The spec names each partition value as
Paimon's partition paths do, unescaped (``partition.default-name`` for a null or blank value,
``partition.legacy-name``).

Read from the new snapshot's delta manifest list, which holds exactly the commit's delta files
(empty for a manifest compaction, as Java sends no statistics for one)."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from paimond.format.binary.binary_row import decode_manifest_row
from paimond.format.meta.manifest import FILE_KIND_DELETE, ManifestEntry, decode_manifest
from paimond.format.meta.manifest_list import decode_manifest_list
from paimond.format.meta.schema import TableSchema, decode_schema
from paimond.format.meta.snapshot import Snapshot
from paimond.table.layout import MANIFEST_DIR, SCHEMA_DIR, SCHEMA_PREFIX, partition_value_text
from paimond.table.options.core import TableOptions
from paimond.table.storage.interface import Storage

_EPOCH = datetime.datetime(1970, 1, 1)


def delta_statistics(storage: Storage, table_path: str, meta_path: str,
                     snapshot: Snapshot) -> list[dict[str, Any]]:
    """The per-partition statistics of ``snapshot``'s commit (Java ``PartitionStatistics``
    JSON). ``table_path`` holds the manifests, ``meta_path`` (a branch's folder, or the table's)
    the schemas."""
    metas = decode_manifest_list(storage.read_bytes(
        storage.join(table_path, MANIFEST_DIR, snapshot.delta_manifest_list)))
    if not metas:
        return []
    schema = decode_schema(storage.read_bytes(
        storage.join(meta_path, SCHEMA_DIR, f"{SCHEMA_PREFIX}{snapshot.schema_id}")))
    merged: dict[bytes, dict[str, Any]] = {}
    for meta in metas:
        for entry in decode_manifest(storage.read_bytes(
                storage.join(table_path, MANIFEST_DIR, meta.file_name))):
            _add(merged, schema, entry)
    return list(merged.values())


def _add(merged: dict[bytes, dict[str, Any]], schema: TableSchema, entry: ManifestEntry) -> None:
    sign = -1 if entry.kind == FILE_KIND_DELETE else 1
    created = _epoch_millis(entry.file.creation_time_millis)
    known = merged.get(entry.partition)
    if known is None:
        merged[entry.partition] = {
            "spec": partition_spec(schema, entry.partition),
            "recordCount": sign * entry.file.row_count,
            "fileSizeInBytes": sign * entry.file.file_size,
            "fileCount": sign,
            "lastFileCreationTime": created,
            "totalBuckets": entry.total_buckets,
        }
        return
    known["recordCount"] += sign * entry.file.row_count
    known["fileSizeInBytes"] += sign * entry.file.file_size
    known["fileCount"] += sign
    known["lastFileCreationTime"] = max(known["lastFileCreationTime"], created)
    known["totalBuckets"] = entry.total_buckets


def partition_spec(schema: TableSchema, partition: bytes) -> Mapping[str, str]:
    """``{key: value text}`` of one partition (Java ``generatePartValues``)."""
    partition_type = schema.partition_type
    if not partition_type.fields:
        return {}
    options = TableOptions.of(schema)
    values = decode_manifest_row(partition, partition_type.field_types)
    spec = {}
    for name, data_type, value in zip(partition_type.field_names, partition_type.field_types,
                                      values, strict=True):
        text = None if value is None else partition_value_text(
            value, data_type, options.partition_legacy_name)
        spec[name] = options.partition_default_name if text is None or not text.strip() else text
    return spec


def _epoch_millis(local_millis: int | None) -> int:
    """Java ``DataFileMeta.creationTimeEpochMillis``: the file's local wall-clock creation time
    in the machine's zone, as epoch millis (0 when unknown)."""
    if local_millis is None:
        return 0
    local = _EPOCH + datetime.timedelta(milliseconds=local_millis)
    return round(local.timestamp() * 1000)  # a naive datetime is taken as local time
