"""A postpone-bucket table with the Spark executor (``local-cluster``): each partition's
postpone rows are moved in one Spark task (then the buckets' compaction runs as tasks too),
and ``rescale`` rewrites each partition in one task; the files and the rows equal the
single-process run's on a copy of the same table, and nothing is left behind, also when every
task's first attempt is lost after writing its files (Spark runs it again)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import TableWriter, catalog_for
from support.spark_faults import failing_first_attempts
from support.table_garbage import unreferenced_files

from paimond.clock import Clock
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.compact.rescale import RescaleSummary, rescale
from paimond.spark.executor import SparkExecutor
from paimond.table.catalog import Table, open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

NAME = "db.t"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False),
                    pa.field("dt", pa.string(), nullable=False), pa.field("v", pa.string())])
CLOCK = Clock(fixed_ms=1_700_000_000_000)


def _layout(table: Table) -> list[tuple[str, int, int, int, int]]:
    """The live files, named by what they hold (file names are random)."""
    latest = table.snapshots.latest()
    assert latest is not None
    return sorted((e.partition.hex(), e.bucket, e.total_buckets, e.file.row_count, e.file.level)
                  for e in (f.entry for f in scan_snapshot(table, latest).files))


@pytest.mark.parametrize("lost", [False, True], ids=["spark", "first-attempts-lost"])
def test_postpone_moves_and_rescales_run_as_spark_tasks(spark: Any, tmp_path: Path,
                                                        lost: bool) -> None:
    local = str(tmp_path / "local" / "wh")
    writer = TableWriter(catalog_for(local), NAME, SCHEMA, primary_keys=("id", "dt"),
                         partition_keys=("dt",),
                         options={"bucket": "-2", "postpone.default-bucket-num": "2"})
    for commit in range(2):
        writer.commit([{"id": i, "dt": f"2024-01-0{1 + i % 3}", "v": f"c{commit}"}
                       for i in range(commit, 90, 2)])
    cluster = str(tmp_path / "cluster" / "wh")
    shutil.copytree(local, cluster)
    tracker = spark.sparkContext.statusTracker()
    outcomes = []
    remote = (failing_first_attempts(spark, tmp_path / "flags") if lost
              else SparkExecutor(spark))
    for warehouse, executor in ((local, None), (cluster, remote)):
        table = open_table(open_storage(warehouse), warehouse, NAME)
        jobs = len(tracker.getJobIdsForGroup())
        summary = CompactJob(table, clock=CLOCK, use_processes=False, executor=executor).run()
        assert summary.postpone is not None and summary.postpone.snapshot is not None
        assert len(summary.postpone.moved) == 3  # partitions
        # a job for the three partitions' moves (the buckets' compaction: none due)
        assert len(tracker.getJobIdsForGroup()) - jobs == (1 if executor else 0)
        moved = _layout(table)
        result = rescale(table, 4, clock=CLOCK, mapper=executor)
        assert isinstance(result, RescaleSummary) and result.snapshot is not None
        assert len(tracker.getJobIdsForGroup()) - jobs == (2 if executor else 0)
        assert unreferenced_files(warehouse, NAME) == []  # no task left a stray file
        outcomes.append((moved, _layout(table), read_rows(warehouse, NAME)))
    assert outcomes[0][0] == outcomes[1][0] and outcomes[0][1] == outcomes[1][1]
    assert outcomes[0][2].equals(outcomes[1][2]) and outcomes[0][2].num_rows == 90
    if lost:
        assert remote.retried() == 3 + 3  # the partitions' moves, then their rescales
