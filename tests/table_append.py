"""Test scaffolding: append data files that a test wrote into a table as one APPEND snapshot.

Built only from paimond's codecs, so pypaimon (the oracle) can then read files paimond wrote.
It takes no lock and checks no conflicts: the production commit path with conflict checks is
``table/commit`` (compaction issue); this exists so format tests need not wait for it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

from paimond.format.binary_row import decode_manifest_row, encode_manifest_row
from paimond.format.manifest import FILE_KIND_ADD, DataFileMeta, ManifestEntry, SimpleStats, encode_manifest
from paimond.format.manifest_list import ManifestFileMeta, decode_manifest_list, encode_manifest_list
from paimond.format.snapshot import BATCH_COMMIT_IDENTIFIER, Snapshot, encode_snapshot
from paimond.table.catalog import Table


def _partition_stats(table: Table, partitions: Sequence[bytes]) -> SimpleStats:
    types = table.latest_schema().partition_type.field_types
    rows = [decode_manifest_row(p, types) for p in partitions]
    mins, maxs, nulls = [], [], []
    for i in range(len(types)):
        present = [r[i] for r in rows if r[i] is not None]
        mins.append(min(present) if present else None)
        maxs.append(max(present) if present else None)
        nulls.append(len(rows) - len(present))
    return SimpleStats(encode_manifest_row(mins, types), encode_manifest_row(maxs, types),
                       tuple(nulls))


def append_files(table: Table, files: Sequence[tuple[bytes, int, int, DataFileMeta]]) -> int:
    """Commit (partition bytes, bucket, total_buckets, meta) as ADD entries; returns the id."""
    storage = table.storage
    latest = table.snapshots.latest()
    prefix = uuid.uuid4()
    entries = [ManifestEntry(FILE_KIND_ADD, p, b, tb, meta) for p, b, tb, meta in files]
    manifest_name = f"manifest-{prefix}-0"
    manifest = encode_manifest(entries)
    storage.write_bytes(table.file_path("manifest", manifest_name), manifest)
    meta = ManifestFileMeta(
        file_name=manifest_name, file_size=len(manifest), num_added_files=len(entries),
        num_deleted_files=0, partition_stats=_partition_stats(table, [e.partition for e in entries]),
        schema_id=max(e.file.schema_id for e in entries),
        min_bucket=min(e.bucket for e in entries), max_bucket=max(e.bucket for e in entries),
        min_level=min(e.file.level for e in entries), max_level=max(e.file.level for e in entries),
        min_row_id=None, max_row_id=None)
    previous: list[ManifestFileMeta] = []
    if latest is not None:
        for name in (latest.base_manifest_list, latest.delta_manifest_list):
            previous += decode_manifest_list(storage.read_bytes(table.file_path("manifest", name)))
    lists = {}
    for suffix, metas in (("0", previous), ("1", [meta])):
        name = f"manifest-list-{prefix}-{suffix}"
        data = encode_manifest_list(metas)
        storage.write_bytes(table.file_path("manifest", name), data)
        lists[suffix] = (name, len(data))
    added = sum(e.file.row_count for e in entries)
    snapshot_id = (latest.id if latest else 0) + 1
    snapshot = Snapshot(
        id=snapshot_id, schema_id=table.latest_schema().id,
        base_manifest_list=lists["0"][0], base_manifest_list_size=lists["0"][1],
        delta_manifest_list=lists["1"][0], delta_manifest_list_size=lists["1"][1],
        index_manifest=latest.index_manifest if latest else None,
        commit_user=f"paimond-test-{prefix}", commit_identifier=BATCH_COMMIT_IDENTIFIER,
        commit_kind="APPEND", time_millis=int(time.time() * 1000),
        total_record_count=(latest.total_record_count or 0 if latest else 0) + added,
        delta_record_count=added, next_row_id=latest.next_row_id if latest else None)
    if not storage.create_exclusive(table.snapshots.path(snapshot_id), encode_snapshot(snapshot)):
        raise RuntimeError(f"snapshot {snapshot_id} appeared concurrently")
    storage.write_bytes(table.snapshots.hint_path("LATEST"), str(snapshot_id).encode())
    return snapshot_id
