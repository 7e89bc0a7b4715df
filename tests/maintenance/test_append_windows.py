"""The append table's plan from live files read a window of partitions at a time without
statistics (maintenance.append_windows) is the plan from every whole live entry (the planner
before, kept here as the reference: scan_snapshot, then the same pickers), on pypaimon-written
tables and on synthetic ones whose delta manifests delete, re-add and span windows."""

from __future__ import annotations

import dataclasses
import datetime
import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from paimond.clock import Clock
from paimond.format.binary.binary_row import encode_manifest_row
from paimond.format.meta.index_manifest import INDEX_TYPE_DELETION_VECTORS
from paimond.format.meta.manifest import (
    FILE_KIND_ADD,
    FILE_KIND_DELETE,
    DataFileMeta,
    ManifestEntry,
    SimpleStats,
)
from paimond.format.meta.schema import decode_schema
from paimond.format.meta.snapshot import Snapshot, encode_snapshot
from paimond.lsm.deletion_vectors import vector_of
from paimond.lsm.task import CompactTask
from paimond.maintenance.compact.append_plan import (
    AppendCompactOptions,
    AppendPlanner,
    file_vectors,
    pick_bucket,
    pick_file,
    pick_unaware,
    plan_append_compaction,
    should_compact,
)
from paimond.maintenance.compact.plan import CompactionPlan, expired_partitions
from paimond.table.catalog import Table, open_table
from paimond.table.commit.committer import CommitChanges, Committer
from paimond.table.commit.manifest_files import ManifestWriter
from paimond.table.indexes.deletion_vectors import bucket_dv_entry, write_deletion_vectors
from paimond.table.layout import partition_text
from paimond.table.options.core import TableOptions
from paimond.table.scan.partition_windows import partition_windows
from paimond.table.scan.snapshot_scan import read_manifest_list, scan_snapshot
from paimond.table.storage.interface import open_storage

NOON = datetime.datetime(2026, 11, 22, 12, 0)
CLOCK = Clock(fixed_ms=int(NOON.timestamp() * 1000))


def eager_plan(table: Table, *, full: bool = False,
               partitions: Mapping[str, str] | None = None) -> CompactionPlan:
    """The plan from ``scan_snapshot`` (the append planner before windows)."""
    schema = table.latest_schema()
    options = TableOptions.of(schema)
    snapshot = table.snapshots.latest()
    if snapshot is None:
        return CompactionPlan(table.name, None, (), 0)
    planner = AppendPlanner(table, snapshot, AppendCompactOptions.of(options), NOON, partitions)
    scanned = scan_snapshot(table, snapshot)
    tasks: list[CompactTask] = []
    if options.bucket_mode(schema) == "BUCKET_UNAWARE":
        vectors: dict[bytes, Any] = {}
        chosen: dict[tuple[bytes, int, int], list[ManifestEntry]] = {}
        count = 0
        for live in scanned.files:
            entry = live.entry
            if not planner.wanted(entry.partition):
                continue
            if entry.partition not in vectors:
                vectors[entry.partition] = (file_vectors(scanned.index_entries, entry.partition)
                                            if planner.dv else None)
            if not should_compact(pick_file(entry), planner.options, vectors[entry.partition]):
                continue
            if count == planner.options.file_num_limit:
                planner.skipped.append(f"more files than compaction.file-num-limit="
                                       f"{planner.options.file_num_limit}; the next run continues")
                break
            count += 1
            chosen.setdefault((entry.partition, entry.bucket, entry.total_buckets),
                              []).append(entry)
        planner.seen = len({(f.entry.partition, f.entry.bucket) for f in scanned.files
                            if planner.wanted(f.entry.partition)})
        for (partition, bucket, total_buckets), entries in chosen.items():
            by_name = {e.file.file_name: e for e in entries}
            found = vectors[partition] or {}
            for group in pick_unaware([pick_file(e) for e in entries], planner.options,
                                      vectors[partition]):
                held = {found[f.name].index_file for f in group if f.name in found}
                index_files = tuple(e for e in scanned.index_entries
                                    if e.partition == partition
                                    and e.index_file.index_type == INDEX_TYPE_DELETION_VECTORS
                                    and e.index_file.file_name in held)
                tasks.append(planner.task(partition, bucket, total_buckets,
                                          tuple(by_name[f.name] for f in group), None,
                                          "bucket-unaware", index_files))
    else:
        expired = expired_partitions(schema, options, NOON)
        for (partition, bucket), files in scanned.buckets().items():
            if not planner.wanted(partition):
                continue
            planner.seen += 1
            text = partition_text(schema, partition)
            if expired(partition):
                planner.skipped.append(f"{text} bucket {bucket}: partition expired "
                                       "(compaction.skip-expired-partitions)")
                continue
            if bucket < 0:
                planner.skipped.append(f"{text} bucket {bucket}: not a fixed bucket")
                continue
            by_name = {f.entry.file.file_name: f.entry for f in files.files}
            dv_index = (bucket_dv_entry(scanned.index_entries, partition, bucket)
                        if planner.dv else None)
            with_vector = None
            if planner.dv:
                with_vector = frozenset(file_vectors([dv_index], partition) if dv_index else ())
            picked = pick_bucket([pick_file(e) for e in by_name.values()], planner.options,
                                 full=full, with_vector=with_vector)
            if picked:
                tasks.append(planner.task(partition, bucket, files.total_buckets,
                                          tuple(by_name[f.name] for f in picked), dv_index,
                                          "full" if full else "min-file-num"))
    return CompactionPlan(table.name, snapshot.id, tuple(tasks), planner.seen,
                          tuple(planner.skipped))


def assert_plans_as_before(table: Table, window_entries: int = 200_000,
                           partitions: Mapping[str, str] | None = None) -> int:
    """Both plans (normal and full) equal the reference's; returns how many tasks."""
    planned = 0
    for full in (False, True):
        plan = plan_append_compaction(table, full=full, moment=NOON, partitions=partitions,
                                      window_entries=window_entries)
        assert plan == eager_plan(table, full=full, partitions=partitions)
        planned += len(plan.tasks)
    return planned


@pytest.mark.parametrize("name", ["db.append_unaware", "db.append_fixed_bucket",
                                  "db.all_types_partitioned", "db.float_partitions",
                                  "db.binary_partition"])
def test_pypaimon_tables_plan_as_before(oracle_warehouse: tuple[str, list[Any]],
                                        name: str) -> None:
    warehouse, _ = oracle_warehouse
    table = open_table(open_storage(warehouse), warehouse, name)
    for budget in (200_000, 1):  # one window; every manifest its own
        assert_plans_as_before(table, budget)


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
    base_list, base_size = writer.write_manifest_list(base)
    delta_list, delta_size = writer.write_manifest_list(delta)
    snapshot = Snapshot(1, 0, base_list, delta_list, "test", 1, "APPEND", 1_700_000_000_000,
                        base_manifest_list_size=base_size, delta_manifest_list_size=delta_size)
    (table_dir / "snapshot" / "snapshot-1").write_bytes(encode_snapshot(snapshot))
    (table_dir / "snapshot" / "LATEST").write_text("1")
    return open_table(open_storage(str(root)), str(root), "db.t")


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


def _windows(table: Table, budget: int) -> int:
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    lists = (snapshot.base_manifest_list, snapshot.delta_manifest_list)
    metas = [m for name in lists for m in read_manifest_list(table, name, "test")]
    return partition_windows(table.latest_schema(), metas, budget=budget).count


@pytest.mark.parametrize("options", [
    {"bucket": "-1"}, {"bucket": "2"},
    {"bucket": "-1", "compaction.file-num-limit": "40",  # the cut across windows
     "compaction.min.file-num": "2"},
    {"bucket": "-1", "compaction.min.file-num": "2"},
    {"bucket": "2", "compaction.force-rewrite-all-files": "true"}])
@pytest.mark.parametrize("seed", [1, 2])
def test_synthetic_tables_plan_as_before(tmp_path: Path, options: dict[str, str],
                                         seed: int) -> None:
    table = write_append(tmp_path, options, seed, partitions=120, delta_chunk=2)
    assert _windows(table, 300) > 2  # small wide delta manifests are read by several
    planned = sum(assert_plans_as_before(table, budget) for budget in (200_000, 300, 1))
    assert planned > 0
    skipped = plan_append_compaction(table, moment=NOON, window_entries=300).skipped
    assert bool(skipped) == ("compaction.file-num-limit" in options)
    assert assert_plans_as_before(table, 300, {"dt": "2024-01-004"}) >= 0


@pytest.mark.parametrize("bucket", ["-1", "2"])
def test_deletion_vectors_plan_as_before(tmp_path: Path, bucket: str) -> None:
    table = write_append(tmp_path, {"bucket": bucket, "deletion-vectors.enabled": "true",
                                    "manifest.merge-min-count": "1000"},  # windows stay
                         3, partitions=100, delta_chunk=2)
    add_vectors(table, 3)
    snapshot = table.snapshots.latest()
    assert snapshot is not None and snapshot.index_manifest
    assert _windows(table, 300) > 1
    plan = plan_append_compaction(table, moment=NOON, window_entries=300)
    assert any(t.dv_index_files or t.dv_index for t in plan.tasks)
    for budget in (200_000, 300, 1):
        assert_plans_as_before(table, budget)


def test_one_partition_and_empty_tables(tmp_path: Path) -> None:
    one = write_append(tmp_path / "one", {"bucket": "-1", "compaction.min.file-num": "2"}, 4,
                       partitions=1)
    assert_plans_as_before(one, 1)
    fixed = write_append(tmp_path / "fixed", {"bucket": "2", "compaction.min.file-num": "2"},
                         4, partitions=1)
    assert assert_plans_as_before(fixed, 1) > 0
    empty = write_append(tmp_path / "empty", {"bucket": "2"}, 5, partitions=0)
    assert plan_append_compaction(empty, moment=NOON, window_entries=1) == eager_plan(empty)
    assert plan_append_compaction(empty, moment=NOON).buckets_seen == 0


@pytest.mark.parametrize("cap", [0, 3])
def test_entries_not_kept_whole_are_read_again(tmp_path: Path, cap: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A window keeps at most ``whole_cap`` entries whole from the first read; the others a
    task needs are read back, to the same plan."""
    from paimond.table.scan import bucket_scan

    table = write_append(tmp_path, {"bucket": "-1", "compaction.min.file-num": "2"}, 8,
                         partitions=60, delta_chunk=2)
    monkeypatch.setitem(bucket_scan.scan_live_windows.__kwdefaults__, "whole_cap", cap)
    assert assert_plans_as_before(table, 300) > 0
