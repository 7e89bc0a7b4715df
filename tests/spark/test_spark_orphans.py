"""Orphan removal, snapshot and changelog expiry, tag deletion and rewrite-index with the Spark
executor (``local-cluster``): the directories are listed and the orphans deleted in Spark tasks,
the files only expired snapshots, changelogs or a deleted tag kept deleted in Spark tasks, each
bucket re-indexed in one Spark task, and the outcome equals the single-process job's on a copy
of the same table: the same files removed and tallied, every referenced file kept; the same
indexes, placed alike, nothing stray. A third copy runs on Spark losing every task's first
attempt after its work: Spark runs it again, and the table ends the same."""

from __future__ import annotations

import dataclasses
import datetime
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
from pypaimon.schema.schema_change import SchemaChange
from support.file_index_checks import index_files, placed_index
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import TableWriter, build_pk_deduplicate, catalog_for
from support.spark_faults import failing_first_attempts
from support.table_garbage import unreferenced_files

from paimond.clock import Clock
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.distributed import DeleteFiles, mapper_of
from paimond.maintenance.expire.orphans import OrphanJob
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.maintenance.regenerate.rewrite_index import IndexRewriteJob
from paimond.maintenance.tags.job import delete_tag
from paimond.spark.executor import SparkExecutor, _item_without_credentials
from paimond.table.catalog import open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import StorageLocation, open_storage

NOW = datetime.datetime(2026, 11, 22, 12, tzinfo=datetime.timezone.utc)
CLOCK = Clock(fixed_ms=int(NOW.timestamp() * 1000))
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
OLD = (NOW - datetime.timedelta(days=2)).timestamp()


def _plant(table_root: Path) -> list[str]:
    """Unreferenced files where orphan removal looks: every bucket directory, manifest/,
    index/ and a temp file beside the snapshots; everything aged past the window."""
    planted = []
    for bucket in sorted(table_root.rglob("bucket-*")):
        for i in range(3):
            planted.append(bucket / f"data-orphan-{i}.parquet")
    planted += [table_root / "manifest" / "manifest-orphan-0", table_root / "index" / "index-x",
                table_root / "snapshot" / ".snapshot-9.tmp"]
    for path in planted:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"orphan " + path.name.encode())
    for path in table_root.rglob("*"):
        os.utime(path, (OLD, OLD))
    return sorted(str(p.relative_to(table_root)) for p in planted)


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _executors(spark: Any, tmp_path: Path) -> list[tuple[str, Any]]:
    """Where each copy of the table runs: here, on Spark, and on Spark losing every task's
    first attempt after its work (``lost``; copies made from ``local`` first)."""
    for name in ("cluster", "lost"):
        shutil.copytree(tmp_path / "local", tmp_path / name)
    return [("local", None), ("cluster", SparkExecutor(spark)),
            ("lost", failing_first_attempts(spark, tmp_path / "flags"))]


def test_orphan_removal_lists_and_deletes_in_spark_tasks_like_the_local_job(
        spark: Any, tmp_path: Path) -> None:
    """A task lost after deleting its files is run again: the same files go (the tally
    counts what the attempt that returned deleted)."""
    spec = build_pk_deduplicate(str(tmp_path / "local"))
    results, trees = [], []
    tracker = spark.sparkContext.statusTracker()
    executors = _executors(spark, tmp_path)
    for name, executor in executors:
        warehouse = str(tmp_path / name)
        table = open_table(open_storage(warehouse), warehouse, spec.name)
        root = Path(table.path.removeprefix("file://"))
        planted = _plant(root)
        content = read_rows(warehouse, spec.name)
        jobs_before = len(tracker.getJobIdsForGroup())

        result = OrphanJob(table, clock=CLOCK, executor=executor).run()

        spark_jobs = len(tracker.getJobIdsForGroup()) - jobs_before
        assert spark_jobs == (2 if executor else 0)  # one listing, one deleting
        assert not set(planted) & set(_tree(root))
        assert read_rows(warehouse, spec.name).equals(content)
        results.append(result.removed)
        trees.append(_tree(root))
    assert results[0] == results[1] and results[0].total_files == len(planted)
    assert trees[0] == trees[1] == trees[2]
    assert executors[-1][1].retried() > 0


def test_file_tasks_reach_cluster_executors_without_credentials() -> None:
    location = StorageLocation("s3://b/wh", {"endpoint_url": "http://127.0.0.1:1", "key": "k",
                                             "secret": "s"})
    task = _item_without_credentials(DeleteFiles(location, ("s3://b/wh/x",)))
    assert dict(task.location.options) == {"endpoint_url": "http://127.0.0.1:1"}
    assert task.paths == ("s3://b/wh/x",)


def _indexes(warehouse: str, name: str) -> list[tuple[str, int, str, Any]]:
    """Each live file: name, level, where its index is (embedded / file / none), container."""
    table = open_table(open_storage(warehouse), warehouse, name)
    latest = table.snapshots.latest()
    assert latest is not None
    out = []
    for live in scan_snapshot(table, latest).files:
        container = placed_index(table, live)
        where = ("file" if index_files(live.meta) else
                 "embedded" if live.meta.embedded_index is not None else "none")
        out.append((live.meta.file_name, live.meta.level, where,
                    None if container is None else sorted(container)))
    return sorted(out)


def test_rewrite_index_runs_one_spark_task_per_bucket_like_the_local_job(
        spark: Any, tmp_path: Path) -> None:
    """Bloom filters above the in-manifest threshold (index files, written by the tasks
    through the job's journal) and bitmaps embedded: the same result as the local job."""
    spec = build_pk_deduplicate(str(tmp_path / "local"))
    catalog_for(str(tmp_path / "local")).alter_table(spec.name, [
        SchemaChange.set_option("file-index.bloom-filter.columns", "id"),
        SchemaChange.set_option("file-index.bloom-filter.id.items", "2000"),
        SchemaChange.set_option("file-index.bitmap.columns", "v")], False)
    tracker = spark.sparkContext.statusTracker()
    outcomes = []
    executors = _executors(spark, tmp_path)
    for name, executor in executors:
        warehouse = str(tmp_path / name)
        table = open_table(open_storage(warehouse), warehouse, spec.name)
        content = read_rows(warehouse, spec.name)
        jobs_before = len(tracker.getJobIdsForGroup())

        summary = IndexRewriteJob(table, clock=CLOCK, executor=executor).run()

        assert len(tracker.getJobIdsForGroup()) - jobs_before == (1 if executor else 0)
        assert summary.snapshot is not None and summary.changes
        assert read_rows(warehouse, spec.name).equals(content)
        assert unreferenced_files(warehouse, spec.name) == []  # no task left a stray file
        outcomes.append((len(summary.changes), _indexes(warehouse, spec.name)))
    assert outcomes[0] == outcomes[1] == outcomes[2]
    assert executors[-1][1].retried() > 0
    assert any(where == "file" for _, _, where, _ in outcomes[1][1])


def test_snapshot_expiry_deletes_in_spark_tasks_like_the_local_job(spark: Any,
                                                                   tmp_path: Path) -> None:
    """A full compaction leaves the level-0 files to the old snapshots; expiring all but the
    latest deletes them and the old metadata, in Spark tasks, exactly as the local job."""
    spec = build_pk_deduplicate(str(tmp_path / "local"))
    tracker = spark.sparkContext.statusTracker()
    tallies, trees = [], []
    executors = _executors(spark, tmp_path)
    for name, executor in executors:
        warehouse = str(tmp_path / name)
        table = open_table(open_storage(warehouse), warehouse, spec.name)
        CompactJob(table, full=True, use_processes=False, clock=CLOCK).run()
        content = read_rows(warehouse, spec.name)
        settings = dataclasses.replace(ExpireSettings.of(table.options()), retain_min=1,
                                       retain_max=1, time_retained_ms=0)
        jobs_before, latest = len(tracker.getJobIdsForGroup()), table.snapshots.latest_id()

        result = ExpireJob(table, clock=CLOCK, settings=settings, executor=executor).run()

        assert len(tracker.getJobIdsForGroup()) - jobs_before == (2 if executor else 0)
        assert result.deleted.total_files > 0 and table.snapshots.list_ids() == [latest]
        assert read_rows(warehouse, spec.name).equals(content)
        assert unreferenced_files(warehouse, spec.name) == []
        tallies.append(result.deleted)
        # the compactions named their files apart: compare the layouts with names' UUIDs out
        trees.append(sorted(re.sub(UUID, "*", p)
                            for p in _tree(Path(table.path.removeprefix("file://")))))
    assert tallies[0] == tallies[1]
    assert trees[0] == trees[1] == trees[2]
    assert executors[-1][1].retried() > 0


CHANGELOGS = "db.changelogs"


def _changelog_table(warehouse: Path) -> None:
    """Ten snapshots of a changelog-producer=input table: commits, full compactions at 4 and 8
    (whose level-0 files only older snapshots keep), a tag on snapshot 2."""
    writer = TableWriter(catalog_for(str(warehouse)), CHANGELOGS,
                         pa.schema([pa.field("id", pa.int32(), nullable=False), ("v", pa.string())]),
                         primary_keys=("id",),
                         options={"bucket": "2", "changelog-producer": "input"})
    table = open_table(open_storage(str(warehouse)), str(warehouse), CHANGELOGS)
    for commit in range(1, 11):
        if commit in (4, 8):
            CompactJob(table, clock=CLOCK, full=True, use_processes=False).run()
        else:
            writer.commit([{"id": (commit * 7 + i) % 13, "v": f"c{commit}-{i}"} for i in range(6)])
    catalog_for(str(warehouse)).get_table(CHANGELOGS).create_tag("kept", 2)


def test_changelog_expiry_and_tag_deletion_delete_in_spark_tasks_like_the_local_jobs(
        spark: Any, tmp_path: Path) -> None:
    """Expiring all snapshots but the latest keeps four of them as changelogs; expiring those
    to two, then deleting the tag that alone keeps snapshot 2, deletes the files only they
    kept, in Spark tasks, exactly as the local jobs."""
    _changelog_table(tmp_path / "local")
    tracker = spark.sparkContext.statusTracker()
    outcomes, trees = [], []
    executors = _executors(spark, tmp_path)
    for name, executor in executors:
        warehouse = str(tmp_path / name)
        table = open_table(open_storage(warehouse), warehouse, CHANGELOGS)
        content = read_rows(warehouse, CHANGELOGS)
        settings = dataclasses.replace(ExpireSettings.of(table.options()), retain_min=1,
                                       retain_max=1, time_retained_ms=0, changelog_retain_min=1,
                                       changelog_retain_max=5, changelog_time_retained_ms=0)
        ExpireJob(table, clock=CLOCK, settings=settings, executor=executor).run()
        assert len(table.snapshots.list_ids()) == 1
        jobs = [len(tracker.getJobIdsForGroup())]

        settings = dataclasses.replace(settings, changelog_retain_max=2)  # above the snapshots'

        changelogs = ExpireJob(table, clock=CLOCK, settings=settings, executor=executor).run()
        jobs.append(len(tracker.getJobIdsForGroup()))
        tag = delete_tag(table, clock=CLOCK, name="kept", mapper=mapper_of(executor))
        jobs.append(len(tracker.getJobIdsForGroup()))

        assert changelogs.changelog is not None
        spark_jobs = [after - before for before, after in zip(jobs, jobs[1:], strict=False)]
        # the changelog expiry's data files and metadata, then the tag's files
        assert spark_jobs == ([2, 1] if executor else [0, 0])
        assert read_rows(warehouse, CHANGELOGS).equals(content)
        assert unreferenced_files(warehouse, CHANGELOGS) == []
        outcomes.append((changelogs.changelog.deleted, tag.files))
        trees.append(sorted(re.sub(UUID, "*", p)
                            for p in _tree(Path(table.path.removeprefix("file://")))))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0].total_files > 0 and outcomes[0][1].total_files > 0
    assert trees[0] == trees[1] == trees[2]
    assert executors[-1][1].retried() > 0
