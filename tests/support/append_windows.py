"""Append tables spread over many partitions, written so that the manifests cover them in
several windows (``write_append``), their deletion vectors, and how many windows a budget gives."""

from __future__ import annotations

import dataclasses
import datetime
import json
import random
from pathlib import Path

import numpy as np

from paimond.clock import Clock
from paimond.format.binary.binary_row import encode_manifest_row
from paimond.format.meta.manifest import (
    FILE_KIND_ADD,
    FILE_KIND_DELETE,
    DataFileMeta,
    ManifestEntry,
    SimpleStats,
)
from paimond.format.meta.schema import decode_schema
from paimond.lsm.lookup.deletion_vectors import vector_of
from paimond.table.catalog import Table
from paimond.table.commit.committer import CommitChanges, Committer
from paimond.table.commit.manifest_files import ManifestWriter
from paimond.table.indexes.deletion_vectors import write_deletion_vectors
from paimond.table.scan.partition_windows import partition_windows
from paimond.table.scan.snapshot_scan import read_manifest_list, scan_snapshot
from paimond.table.storage.interface import open_storage
from support.streaming_tables import commit_first_snapshot

NOON = datetime.datetime(2026, 11, 22, 12, 0)


CLOCK = Clock(fixed_ms=int(NOON.timestamp() * 1000))


APPEND_SCHEMA = {"version": 3, "id": 0,
                 "fields": [{"id": 0, "name": "dt", "type": "STRING NOT NULL"},
                            {"id": 1, "name": "v", "type": "BIGINT"},
                            {"id": 2, "name": "a", "type": "INT"},
                            {"id": 3, "name": "b", "type": "INT"}],
                 "highestFieldId": 3, "partitionKeys": ["dt"], "primaryKeys": [],
                 "options": {"target-file-size": "16 mb"}, "timeMillis": 0}


def write_append(root: Path, options: dict[str, str], seed: int, *, partitions: int = 6,
                 delta_chunk: int = 3, levels: bool = False) -> Table:
    """An append table (``bucket`` from ``options``: -1 one bucket 0 of -1 total, else two
    buckets) of ``partitions`` partitions over base manifests of two partitions each, then
    delta manifests of ``delta_chunk`` entries that delete files (one never added), re-add a
    deleted one and delete one of the farthest partition in one manifest; sizes around the
    compaction file size, min sequence numbers out of file order and tied, extra files,
    external paths, missing creation times; ``levels``: some files above level 0."""
    table_dir = root / "db.db" / "t"
    for sub in ("schema", "snapshot", "manifest"):
        (table_dir / sub).mkdir(parents=True)
    schema_json = json.dumps({**APPEND_SCHEMA, "options": {
        **APPEND_SCHEMA["options"], **options}}).encode()
    (table_dir / "schema" / "schema-0").write_bytes(schema_json)
    schema = decode_schema(schema_json)
    unaware = options.get("bucket", "-1") == "-1"
    buckets, total = ((0,), -1) if unaware else ((0, 1), 2)
    rng = random.Random(seed)
    writer = ManifestWriter(open_storage(str(root)), str(table_dir),
                            schema.partition_type.field_types)
    empty = SimpleStats(b"", b"", ())
    added: list[ManifestEntry] = []
    base, written, n = [], 0, 0
    for p in range(partitions):
        partition = encode_manifest_row([f"2024-01-{p:03d}"], schema.partition_type.field_types)
        if p % 2 == 0 and added:  # a manifest per two partitions: windows cut between them
            base.append(writer.write_manifest(added[written:]))
            written = len(added)
        for bucket in buckets:
            for _ in range(rng.randint(2, 14)):
                n += 1
                level = 5 if levels and rng.random() < 0.3 else 0
                sequence = rng.randrange(40) * 10
                meta = DataFileMeta(
                    f"data-{n}.parquet", rng.randint(1, 30) << 20, rng.randint(10, 1000), b"",
                    b"", empty, empty, sequence, sequence + 9, 0, level,
                    (f"data-{n}.parquet.index",) if n % 7 == 0 else (),
                    None if n % 5 == 0 else 1_700_000_000_000 + rng.randrange(10**6), 0, None,
                    0, None, "s3://elsewhere/x" if n % 11 == 0 else None, None, None, None)
                added.append(ManifestEntry(FILE_KIND_ADD, partition, bucket, total, meta))
    if added[written:]:
        base.append(writer.write_manifest(added[written:]))
    delta = []
    if len(added) > 2:
        gone = rng.sample(added, min(8, len(added) // 2))
        never = dataclasses.replace(added[0], file=dataclasses.replace(added[0].file,
                                                                       file_name="x"))
        far = next(e for e in (added[::-1] if added.index(gone[0]) < len(added) // 2
                               else added) if e not in gone)
        delta_entries = [dataclasses.replace(e, kind=FILE_KIND_DELETE) for e in (*gone, never)]
        delta_entries += [gone[0], dataclasses.replace(far, kind=FILE_KIND_DELETE)]
        if len(delta_entries) % delta_chunk == 1:  # keep the last two in one manifest
            delta_entries.insert(0, dataclasses.replace(never, file=dataclasses.replace(
                never.file, file_name="y")))
        delta = [writer.write_manifest(delta_entries[i:i + delta_chunk])
                 for i in range(0, len(delta_entries), delta_chunk)]
    return commit_first_snapshot(root, table_dir, writer, base, delta, "APPEND")


def add_vectors(table: Table, seed: int) -> None:
    """Deletion vectors for some files of every other bucket (one DV index file each), in
    one commit (writers have not compacted the table since)."""
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    rng = random.Random(seed)
    indexes = []
    for i, ((partition, bucket), files) in enumerate(
            scan_snapshot(table, snapshot).buckets().items()):
        if i % 2:
            continue
        picked = rng.sample(files.files, max(1, len(files.files) // 3))
        vectors = {f.meta.file_name: vector_of(np.arange(rng.choice([1, f.meta.row_count // 2]),
                                                         dtype=np.int64), bitmap64=False)
                   for f in picked}
        indexes.append(write_deletion_vectors(table, vectors, partition, bucket,
                                              bitmap64=False)[0])
    Committer(table, commit_kind="APPEND", clock=CLOCK, check_conflicts=False).commit(
        CommitChanges(index_added=indexes))


def window_count(table: Table, budget: int) -> int:
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    lists = (snapshot.base_manifest_list, snapshot.delta_manifest_list)
    metas = [m for name in lists for m in read_manifest_list(table, name, "test")]
    return partition_windows(table.latest_schema(), metas, budget=budget).count
