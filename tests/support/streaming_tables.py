"""Primary-key tables of synthetic data files over many partitions and levels, committed
directly (``write_synthetic``): planner inputs without writing any rows."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

from paimond.format.binary.binary_row import encode_manifest_row
from paimond.format.meta.manifest import (
    FILE_KIND_ADD,
    FILE_KIND_DELETE,
    DataFileMeta,
    ManifestEntry,
    SimpleStats,
)
from paimond.format.meta.manifest_list import ManifestFileMeta
from paimond.format.meta.schema import decode_schema
from paimond.format.meta.snapshot import Snapshot, encode_snapshot
from paimond.table.catalog import Table, open_table
from paimond.table.commit.manifest_files import ManifestWriter
from paimond.table.storage.interface import open_storage

SCHEMA = {"version": 3, "id": 0,
          "fields": [{"id": 0, "name": "dt", "type": "STRING NOT NULL"},
                     {"id": 1, "name": "k", "type": "BIGINT NOT NULL"},
                     {"id": 2, "name": "v", "type": "STRING"}],
          "highestFieldId": 2, "partitionKeys": ["dt"], "primaryKeys": ["dt", "k"],
          "options": {"bucket": "2"}, "timeMillis": 0}


def synthetic_file(rng: random.Random, n: int, level: int, min_key: int) -> DataFileMeta:
    key = encode_manifest_row([min_key], decode_schema(json.dumps(SCHEMA).encode())
                              .key_type.field_types)
    stats = SimpleStats(key, key, (0,))
    return DataFileMeta(
        f"data-{n}.parquet", rng.randint(1, 64) << 20, 100, key, key, stats, stats, n * 10,
        n * 10 + 9, 0, level, (f"data-{n}.parquet.index",) if n % 7 == 0 else (),
        None if n % 5 == 0 else 1_700_000_000_000 + rng.randrange(10**6), 0, None,
        1 if level else 0, None, "s3://elsewhere/x" if n % 11 == 0 else None, None, None, None)


def write_synthetic(root: Path, options: dict[str, str], seed: int, *, partitions: int = 4,
                    delta_chunk: int = 7) -> Table:
    """A table of ``partitions`` x 2 buckets over base manifests of 13 entries in partition
    order, then delta manifests of ``delta_chunk`` entries that delete files (one never
    added), upgrade one and re-add a deleted one; min-key ties, extra files, external paths
    and missing creation times mixed in."""
    table_dir = root / "db.db" / "t"
    for sub in ("schema", "snapshot", "manifest"):
        (table_dir / sub).mkdir(parents=True)
    schema_json = json.dumps({**SCHEMA, "options": {**SCHEMA["options"], **options}}).encode()
    (table_dir / "schema" / "schema-0").write_bytes(schema_json)
    schema = decode_schema(schema_json)
    rng = random.Random(seed)
    writer = ManifestWriter(open_storage(str(root)), str(table_dir),
                            schema.partition_type.field_types)
    added, n = [], 0
    for p in range(partitions):
        partition = encode_manifest_row([f"2024-01-{p:03d}"], schema.partition_type.field_types)
        for bucket in (0, 1):
            layout = [(0, 0)] * rng.randint(1, 7) + [(3, k) for k in (5, 5, 9)] + [
                (5, k) for k in range(0, 40, 4)]
            for level, key in layout:
                n += 1
                added.append(ManifestEntry(FILE_KIND_ADD, partition, bucket, 2,
                                           synthetic_file(rng, n, level, key)))
    base = [writer.write_manifest(added[i:i + 13]) for i in range(0, len(added), 13)]
    gone = rng.sample(added, 12)
    never = dataclasses.replace(added[0], file=dataclasses.replace(added[0].file, file_name="x"))
    delta_entries = [dataclasses.replace(e, kind=FILE_KIND_DELETE) for e in (*gone, never)]
    moved = next(e for e in added if e.file.level == 3 and e not in gone)
    ends = added[::-1] if added.index(gone[0]) < len(added) // 2 else added
    far = next(e for e in ends if e not in (*gone, moved))  # the farthest partition from it
    delta_entries += [dataclasses.replace(moved, kind=FILE_KIND_DELETE),
                      dataclasses.replace(moved, file=dataclasses.replace(moved.file, level=4)),
                      gone[0],  # deleted above, added again: now last in first-seen order
                      dataclasses.replace(far, kind=FILE_KIND_DELETE)]  # same manifest, far
    if len(delta_entries) % delta_chunk == 1:  # keep the last two in one manifest
        delta_entries.insert(0, dataclasses.replace(never, file=dataclasses.replace(
            never.file, file_name="y")))
    delta = [writer.write_manifest(delta_entries[i:i + delta_chunk])
             for i in range(0, len(delta_entries), delta_chunk)]
    return commit_first_snapshot(root, table_dir, writer, base, delta, "COMPACT")


def commit_first_snapshot(root: Path, table_dir: Path, writer: ManifestWriter,
                          base: list[ManifestFileMeta], delta: list[ManifestFileMeta],
                          kind: str) -> Table:
    """Snapshot 1 of the synthetic table ``db.t`` under ``root``: ``base`` and ``delta``'s
    manifest lists, the snapshot file and ``LATEST``; the table opened."""
    base_list, base_size = writer.write_manifest_list(base)
    delta_list, delta_size = writer.write_manifest_list(delta)
    snapshot = Snapshot(1, 0, base_list, delta_list, "test", 1, kind, 1_700_000_000_000,
                        base_manifest_list_size=base_size, delta_manifest_list_size=delta_size)
    (table_dir / "snapshot" / "snapshot-1").write_bytes(encode_snapshot(snapshot))
    (table_dir / "snapshot" / "LATEST").write_text("1")
    return open_table(open_storage(str(root)), str(root), "db.t")
