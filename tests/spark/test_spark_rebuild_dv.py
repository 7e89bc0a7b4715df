"""rebuild-dv with the Spark executor (``local-cluster``): each bucket's vectors computed and
its DV file written in one Spark task, committed once by the driver; the outcome equals the
single-process job's on a copy of the same table (the same vectors of the same files, one DV
file per bucket), the table reads right, and nothing is left behind; a run that fails after
its tasks wrote their DV files deletes them (the job's record noted them first)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.dv_layered import CLOCK, enable_vectors, layered
from support.pypaimon_oracle import read_rows
from support.spark_faults import failing_first_attempts
from support.table_garbage import unreferenced_files

from paimond.lsm.lookup.deletion_vectors import deleted_positions
from paimond.maintenance.regenerate.rebuild_dv import RebuildDvJob
from paimond.spark.executor import SparkExecutor
from paimond.table.catalog import open_table
from paimond.table.indexes.deletion_vectors import read_deletion_vectors
from paimond.table.layout import INDEX_DIR
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage


def _vectors(warehouse: str, name: str) -> list[tuple[bytes, int, list[tuple[str, list[int]]]]]:
    """Per (partition, bucket) DV file of the latest snapshot: each data file's positions."""
    table = open_table(open_storage(warehouse), warehouse, name)
    latest = table.snapshots.latest()
    assert latest is not None
    out = []
    for entry in scan_snapshot(table, latest).index_entries:
        vectors = read_deletion_vectors(table, entry)
        out.append((entry.partition, entry.bucket,
                    sorted((file, deleted_positions(v).tolist()) for file, v in vectors.items())))
    return sorted(out)


def test_rebuild_dv_runs_one_spark_task_per_bucket_like_the_local_job(
        spark: Any, tmp_path: Path) -> None:
    live = layered(tmp_path)
    enable_vectors(live)
    name = live.name
    shutil.copytree(live.warehouse, tmp_path / "cluster")
    shutil.copytree(live.warehouse, tmp_path / "lost")
    tracker = spark.sparkContext.statusTracker()
    outcomes = []
    lost = failing_first_attempts(spark, tmp_path / "flags")  # each task's first attempt
    for warehouse, executor in ((live.warehouse, None),
                                (str(tmp_path / "cluster"), SparkExecutor(spark)),
                                (str(tmp_path / "lost"), lost)):
        table = open_table(open_storage(warehouse), warehouse, name)
        jobs_before = len(tracker.getJobIdsForGroup())

        summary = RebuildDvJob(table, clock=CLOCK, executor=executor).run()

        assert len(tracker.getJobIdsForGroup()) - jobs_before == (1 if executor else 0)
        assert summary.snapshot is not None and len(summary.changed) > 1, summary.describe()
        assert read_rows(warehouse, name).equals(live.expected())
        assert unreferenced_files(warehouse, name) == []  # no task left a stray file
        outcomes.append(([b.describe() for b in summary.buckets], _vectors(warehouse, name)))
    assert outcomes[0] == outcomes[1] == outcomes[2]
    assert sum(len(files) for _, _, files in outcomes[1][1]) > 0
    assert lost.retried() == len(outcomes[0][0])  # every bucket's task ran twice


@dataclass
class FailingAfterTasks:
    """Runs the tasks (they write their DV files), then fails as a lost task would."""

    inner: SparkExecutor
    written: tuple[str, ...] = ()

    def map_tasks(self, function: Callable[[Any], Any], items: Sequence[Any],
                  description: str) -> list[Any]:
        outcomes = self.inner.map_tasks(function, items, description)
        self.written = tuple(o.written[1] for o in outcomes if o.written is not None)
        assert all(Path(p.removeprefix("file://")).is_file() for p in self.written)
        raise RuntimeError("a task failed for good")


def test_a_failed_spark_rebuild_leaves_no_dv_file_behind(spark: Any, tmp_path: Path) -> None:
    """The tasks' DV files were noted in the job's record before they were written: the job
    deletes them when it fails, and the table is as it was."""
    live = layered(tmp_path)
    enable_vectors(live)
    table = live.table
    before = table.snapshots.latest_id()
    index_dir = Path(table.file_path(INDEX_DIR, "x").removeprefix("file://")).parent
    existing = sorted(index_dir.iterdir()) if index_dir.exists() else []

    failing = FailingAfterTasks(SparkExecutor(spark))

    with pytest.raises(RuntimeError, match="failed for good"):
        RebuildDvJob(table, clock=CLOCK, executor=failing).run()

    assert len(failing.written) > 1  # the tasks wrote DV files, and the job deleted them

    assert table.snapshots.latest_id() == before
    assert (sorted(index_dir.iterdir()) if index_dir.exists() else []) == existing
    assert unreferenced_files(live.warehouse, live.name) == []
