"""Planning from the streamed, statistics-free live-file index (table.bucket_scan) plans
exactly what planning from every whole live entry (table.scan.scan_snapshot) plans."""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path
from typing import Any

import pytest
from support.append_windows import window_count
from support.streaming_tables import write_synthetic

from paimond.errors import CorruptFileError
from paimond.format.meta.snapshot import encode_snapshot
from paimond.lsm.picker import PickerState
from paimond.lsm.plan import BucketSnapshot, plan_bucket
from paimond.lsm.task import CompactTask, TaskTable
from paimond.maintenance.compact import plan as compact_plan
from paimond.maintenance.compact.plan import plan_compaction
from paimond.table.catalog import Table, open_table
from paimond.table.commit.manifest_files import ManifestWriter
from paimond.table.indexes.deletion_vectors import bucket_dv_entry
from paimond.table.layout import partition_text
from paimond.table.options.core import TableOptions
from paimond.table.scan.snapshot_scan import bucket_path, read_manifest_list, scan_snapshot
from paimond.table.storage.interface import open_storage

NOON = datetime.datetime(2026, 11, 22, 12, 0)


def eager_plan(table: Table, *, full: bool) -> tuple[list[CompactTask], dict[Any, PickerState]]:
    """Every bucket of the latest snapshot planned from whole entries (the planner before)."""
    schema = table.latest_schema()
    options = TableOptions.of(schema)
    spec = TaskTable(table.name, table.path, table.location, schema, options)
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    scanned = scan_snapshot(table, snapshot)
    tasks, states = [], {}
    for (partition, bucket), files in scanned.buckets().items():
        dv_index = (bucket_dv_entry(scanned.index_entries, partition, bucket)
                    if options.deletion_vectors_enabled else None)
        whole = BucketSnapshot(snapshot.id, partition, partition_text(schema, partition), bucket,
                               files.total_buckets, bucket_path(table, schema, partition, bucket),
                               tuple(f.entry for f in files.files), dv_index)
        state = PickerState(local_hour=NOON.hour, now_millis=int(NOON.timestamp() * 1000))
        task, states[(partition, bucket)] = plan_bucket(whole, spec, options.compaction, state,
                                                        full=full)
        if task is not None:
            tasks.append(compact_plan._with_file_schemas(table, task))
    return tasks, states


def assert_plans_as_before(table: Table, window_entries: int = 200_000) -> int:
    """Both plans, normal and full, are equal; returns how many tasks they hold."""
    planned = 0
    for full in (False, True):
        plan = plan_compaction(table, full=full, moment=NOON, window_entries=window_entries)
        tasks, states = eager_plan(table, full=full)
        assert list(plan.tasks) == tasks
        assert dict(plan.picker_states) == states
        assert plan.buckets_seen == len(states) and plan.skipped == ()
        planned += len(tasks)
    return planned


@pytest.mark.parametrize("name", ["db.pk_deduplicate", "db.pk_partial_update",
                                  "db.pk_aggregation", "db.pk_first_row",
                                  "db.pk_deletion_vectors"])
def test_pypaimon_tables_plan_as_before(oracle_warehouse: tuple[str, list[Any]],
                                        name: str) -> None:
    warehouse, _ = oracle_warehouse
    table = open_table(open_storage(warehouse), warehouse, name)
    assert assert_plans_as_before(table) > 0
    assert assert_plans_as_before(table, window_entries=1) > 0  # every manifest a window's


@pytest.mark.parametrize("options", [{}, {"deletion-vectors.enabled": "true"},
                                     {"num-sorted-run.compaction-trigger": "3",
                                      "compaction.size-ratio": "20"}])
@pytest.mark.parametrize("seed", [1, 2])
def test_synthetic_tables_plan_as_before(tmp_path: Path, options: dict[str, str],
                                         seed: int) -> None:
    table = write_synthetic(tmp_path, options, seed)
    assert assert_plans_as_before(table) > 0
    if options:  # lookup tables plan the files above the output level too
        lookups = [t for t in plan_compaction(table, moment=NOON).tasks if t.lookup_files]
        assert lookups or "deletion-vectors.enabled" not in options


def test_a_file_added_twice_is_refused_as_before(tmp_path: Path) -> None:
    table = write_synthetic(tmp_path, {}, 3)
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    files = scan_snapshot(table, snapshot).files
    writer = ManifestWriter(table.storage, table.path, table.latest_schema()
                            .partition_type.field_types)
    twice = writer.write_manifest([files[3].entry])
    lists = writer.write_manifest_list([twice])
    changed = dataclasses.replace(snapshot, delta_manifest_list=lists[0],
                                  delta_manifest_list_size=lists[1])
    (Path(table.path) / "snapshot" / "snapshot-1").write_bytes(encode_snapshot(changed))
    with pytest.raises(CorruptFileError) as before:
        scan_snapshot(table, changed)
    with pytest.raises(CorruptFileError) as now:
        plan_compaction(table, moment=NOON)
    assert str(now.value) == str(before.value) and "added twice" in str(now.value)


@pytest.mark.parametrize("options", [{}, {"deletion-vectors.enabled": "true"}])
def test_windows_of_partitions_plan_as_before(tmp_path: Path, options: dict[str, str]) -> None:
    table = write_synthetic(tmp_path, options, 4, partitions=40, delta_chunk=2)
    assert window_count(table, 300) > 2  # small wide delta manifests are read by several
    assert assert_plans_as_before(table, window_entries=300) > 0


def test_partition_statistics_that_lie_fall_back_to_one_window(tmp_path: Path) -> None:
    table = write_synthetic(tmp_path, {}, 5, partitions=40, delta_chunk=2)
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    base = read_manifest_list(table, snapshot.base_manifest_list, "test")
    lying = [dataclasses.replace(m, partition_stats=base[0].partition_stats) for m in base]
    writer = ManifestWriter(table.storage, table.path, table.latest_schema()
                            .partition_type.field_types)
    name, size = writer.write_manifest_list(lying)
    changed = dataclasses.replace(snapshot, base_manifest_list=name, base_manifest_list_size=size)
    (Path(table.path) / "snapshot" / "snapshot-1").write_bytes(encode_snapshot(changed))
    assert window_count(table, 300) == 1  # every base manifest claims the first partitions
    lying[-1] = base[-1]  # ... but one: windows, and entries outside their stated ranges
    name, size = writer.write_manifest_list(lying)
    changed = dataclasses.replace(snapshot, base_manifest_list=name, base_manifest_list_size=size)
    (Path(table.path) / "snapshot" / "snapshot-1").write_bytes(encode_snapshot(changed))
    assert window_count(table, 300) > 1
    assert assert_plans_as_before(table, window_entries=300) > 0
