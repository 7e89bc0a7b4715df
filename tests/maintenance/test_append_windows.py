"""The append table's plan from live files read a window of partitions at a time without
statistics (maintenance.append_windows) is the plan from every whole live entry (the planner
before, kept here as the reference: scan_snapshot, then the same pickers), on pypaimon-written
tables and on synthetic ones whose delta manifests delete, re-add and span windows."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from support.append_windows import NOON, add_vectors, window_count, write_append

from paimond.format.meta.index_manifest import INDEX_TYPE_DELETION_VECTORS
from paimond.format.meta.manifest import (
    ManifestEntry,
)
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
from paimond.table.indexes.deletion_vectors import bucket_dv_entry
from paimond.table.layout import partition_text
from paimond.table.options.core import TableOptions
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage


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
    assert window_count(table, 300) > 2  # small wide delta manifests are read by several
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
    assert window_count(table, 300) > 1
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
