"""Incremental clustering planned from live files read a window of partitions at a time
without statistics (maintenance.cluster_plan) plans what the planner before planned from every
whole live entry (kept here as the reference: scan_snapshot, live_by_bucket, the same picker)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest
from support.append_windows import add_vectors, window_count, write_append

from paimond.maintenance.compact.cluster_plan import (
    clustering_of,
    partition_runs,
    pick_cluster,
    plan_incremental_clustering,
)
from paimond.maintenance.compact.sort_compact import SortPlan, SortTask, dv_index_files, live_by_bucket
from paimond.table.catalog import Table
from paimond.table.layout import partition_text
from paimond.table.options.compaction import CompactionOptions
from paimond.table.options.core import TableOptions
from paimond.table.scan.snapshot_scan import bucket_path, scan_snapshot

CLUSTERED = {"bucket": "-1", "clustering.columns": "a,b", "clustering.incremental": "true",
             "manifest.merge-min-count": "1000"}


def eager_plan(table: Table, *, full: bool, partitions: Mapping[str, str] | None = None
               ) -> SortPlan:
    schema = table.latest_schema()
    options = TableOptions.of(schema)
    columns, strategy = clustering_of(options)
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    compaction = CompactionOptions(
        num_sorted_run_trigger=options.compaction.num_sorted_run_trigger,
        max_size_amp_percent=options.compaction.max_size_amp_percent,
        size_ratio=options.compaction.size_ratio)
    scanned = scan_snapshot(table, snapshot)
    tasks = []
    for (partition, bucket, total_buckets), entries in live_by_bucket(
            scanned, schema, partitions).items():
        runs = partition_runs(entries)
        top = runs[-1].files[0] if runs else None
        same_keys = top is not None and clustering_of(
            TableOptions.of(table.schema(top.schema_id)))[0] == columns
        unit = pick_cluster(runs, options.compaction.num_levels, compaction, full=full,
                            same_keys=same_keys)
        if unit is None or not unit.files:
            continue
        by_name = {e.file.file_name: e for e in entries}
        tasks.append(SortTask(partition, partition_text(schema, partition), bucket,
                              total_buckets, bucket_path(table, schema, partition, bucket),
                              tuple(by_name[f.file_name] for f in unit.files),
                              dv_index_files(scanned, partition), unit.output_level))
    return SortPlan(table.name, snapshot.id, strategy, columns, tuple(tasks))


def assert_plans_as_before(table: Table, budget: int,
                           partitions: Mapping[str, str] | None = None) -> int:
    planned = 0
    for full in (False, True):
        plan = plan_incremental_clustering(table, full=full, partitions=partitions,
                                           window_entries=budget)
        assert plan == eager_plan(table, full=full, partitions=partitions)
        planned += len(plan.tasks)
    return planned


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("options", [{}, {"num-sorted-run.compaction-trigger": "3"},
                                     {"deletion-vectors.enabled": "true"}])
def test_synthetic_tables_plan_as_before(tmp_path: Path, options: dict[str, str],
                                         seed: int) -> None:
    table = write_append(tmp_path, {**CLUSTERED, **options}, seed, partitions=80,
                         delta_chunk=2, levels=True)
    if options.get("deletion-vectors.enabled"):
        add_vectors(table, seed)
    assert window_count(table, 300) > 1
    planned = sum(assert_plans_as_before(table, budget) for budget in (200_000, 300, 1))
    assert planned > 0
    assert assert_plans_as_before(table, 300, {"dt": "2024-01-007"}) > 0
    if options.get("deletion-vectors.enabled"):
        assert any(t.dv_index_files for t in plan_incremental_clustering(
            table, full=True, window_entries=300).tasks)


def test_one_partition_and_empty_tables(tmp_path: Path) -> None:
    one = write_append(tmp_path / "one", CLUSTERED, 3, partitions=1, levels=True)
    assert assert_plans_as_before(one, 1) > 0
    empty = write_append(tmp_path / "empty", CLUSTERED, 3, partitions=0)
    assert assert_plans_as_before(empty, 1) == 0
