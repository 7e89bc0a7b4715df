"""Sort compaction across Spark tasks (``local-cluster``): the driver samples the order keys in
tasks, cuts each partition into ranges, Spark's shuffle takes each row to its range's task,
which sorts and writes it; the driver commits once. Against the single-process sort of a copy
of the same table: the same rows in the same key order, numbered alike, through deletion
vectors; only the cuts between files differ. Tasks whose first attempts are lost after
their work (a range task's after writing its files) are retried, and nothing they wrote
stays."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import TableWriter, catalog_for
from support.sorted_tables import CLOCK, NAME, SCHEMA, write_sorted_table
from support.spark_faults import failing_first_attempts
from support.table_garbage import unreferenced_files

from paimond.format.binary.sort_keys import zorder_key
from paimond.format.types.data_types import IntType
from paimond.lsm.lookup.deletion_vectors import vector_of
from paimond.maintenance.compact.sort_compact import SortCompactJob
from paimond.maintenance.jobs import JOBS, JobContext
from paimond.spark.executor import SparkExecutor
from paimond.table.catalog import Table, open_table
from paimond.table.commit.committer import CommitChanges, Committer
from paimond.table.data_files.arrow_io import read_data_file
from paimond.table.indexes.deletion_vectors import write_deletion_vectors
from paimond.table.scan.snapshot_scan import bucket_path, scan_snapshot
from paimond.table.storage.interface import open_storage


def _table(warehouse: str) -> Table:
    return open_table(open_storage(warehouse), warehouse, NAME)


def _build(warehouse: str) -> None:
    """Two partitions of 12 overlapping commits (``a`` with nulls), files of 6 KB, and a
    deletion vector on one file."""
    write_sorted_table(warehouse, {"deletion-vectors.enabled": "true"})
    table = _table(warehouse)
    entry = scan_snapshot(table, table.snapshots.latest()).files[0].entry
    index, _ = write_deletion_vectors(
        table, {entry.file.file_name: vector_of(np.array([0, 5, 7], dtype=np.int64),
                                                bitmap64=False)},
        entry.partition, entry.bucket, bitmap64=False)
    Committer(table, commit_kind="APPEND", clock=CLOCK).commit(CommitChanges(index_added=[index]))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    warehouse = tmp_path_factory.mktemp("sort") / "wh"
    _build(str(warehouse))
    return warehouse


def _copy(pristine: Path, to: Path) -> str:
    import shutil

    shutil.copytree(pristine, to)
    return str(to)


def _partitions(warehouse: str) -> dict[bytes, list[tuple[int, int, pa.Table, str]]]:
    """Each partition's live files in sequence order: (min, max sequence, rows, the writer's
    uuid in the file's name)."""
    table = _table(warehouse)
    schema = table.latest_schema()
    out: dict[bytes, list[tuple[int, int, pa.Table, str]]] = {}
    for live in scan_snapshot(table, table.snapshots.latest()).files:
        meta = live.entry.file
        path = table.storage.join(bucket_path(table, schema, live.entry.partition,
                                              live.entry.bucket), meta.file_name)
        rows = pa.Table.from_batches(list(read_data_file(
            table.storage, path, file_format="parquet", file_schema=schema, read_schema=schema,
            key_value=False)), pa.schema([f.remove_metadata() for f in SCHEMA]))
        out.setdefault(live.entry.partition, []).append(
            (meta.min_sequence_number, meta.max_sequence_number, rows,
             meta.file_name.rsplit("-", 1)[0]))
    return {p: sorted(files, key=lambda f: f[0]) for p, files in out.items()}


def _keys(rows: pa.Table, strategy: str) -> list[Any]:
    if strategy == "order":
        return rows.column("a").to_pylist()
    return [zorder_key(row, [IntType(), IntType()])
            for row in zip(rows.column("a").to_pylist(), rows.column("b").to_pylist(), strict=True)]


def _sorted_alike(local: str, cluster: str, strategy: str) -> None:
    """Per partition: the same key sequence over the files in sequence order, the sequences
    contiguous over the same span, the cluster's written by several range tasks (each its own
    writer), the local ones by one."""
    local_parts, cluster_parts = _partitions(local), _partitions(cluster)
    assert local_parts.keys() == cluster_parts.keys() and len(local_parts) == 2
    for partition, files in cluster_parts.items():
        expected = local_parts[partition]
        keys = _keys(pa.concat_tables(rows for _, _, rows, _ in files), strategy)
        assert keys == _keys(pa.concat_tables(rows for _, _, rows, _ in expected), strategy)
        nulls = keys.count(None)
        assert keys[nulls:] == sorted(keys[nulls:]) and None not in keys[nulls:]
        for (_, high, _, _), (low, _, _, _) in zip(files, files[1:], strict=False):
            assert low == high + 1
        assert (files[0][0], files[-1][1]) == (expected[0][0], expected[-1][1])
        assert all(rows.num_rows == high - low + 1 for low, high, rows, _ in files)
        assert len({writer for *_, writer in expected}) == 1
        assert len({writer for *_, writer in files}) > 2


@pytest.mark.parametrize(("strategy", "columns"), [("order", ("a",)), ("zorder", ("a", "b"))])
def test_a_sort_across_spark_tasks_writes_what_the_local_sort_writes(
        spark: Any, pristine: Path, tmp_path: Path, strategy: str,
        columns: tuple[str, ...]) -> None:
    local, cluster = _copy(pristine, tmp_path / "local"), _copy(pristine, tmp_path / "cluster")
    expected = read_rows(cluster, NAME)
    assert expected.num_rows == 12 * 400 - 3
    SortCompactJob(_table(local), strategy, columns, clock=CLOCK).run()
    tracker = spark.sparkContext.statusTracker()
    jobs_before = len(tracker.getJobIdsForGroup())

    summary = SortCompactJob(_table(cluster), strategy, columns, clock=CLOCK,
                             executor=SparkExecutor(spark)).run()

    assert len(tracker.getJobIdsForGroup()) - jobs_before == 2  # sampling, then the shuffle
    assert summary.snapshot is not None and summary.snapshot.commit_kind == "COMPACT"
    assert read_rows(cluster, NAME).equals(read_rows(local, NAME))
    assert read_rows(cluster, NAME).equals(expected)
    assert not scan_snapshot(_table(cluster), summary.snapshot).index_entries  # vectors went
    _sorted_alike(local, cluster, strategy)
    assert unreferenced_files(cluster, NAME) == []


def test_a_failed_range_task_is_retried_and_nothing_it_wrote_stays(
        spark: Any, pristine: Path, tmp_path: Path) -> None:
    """Every sampling task and every range task fails once after its work (a range task after
    writing its files), and is retried."""
    cluster = _copy(pristine, tmp_path / "cluster")
    expected = read_rows(cluster, NAME)
    executor = failing_first_attempts(spark, tmp_path / "flags")

    summary = SortCompactJob(_table(cluster), "zorder", ("a", "b"), clock=CLOCK,
                             executor=executor).run()  # type: ignore[arg-type]

    assert summary.snapshot is not None
    assert executor.retried() > 4  # the two partitions' sampling tasks, and their ranges
    assert read_rows(cluster, NAME).equals(expected)
    assert unreferenced_files(cluster, NAME) == []  # the first attempts' files are gone


def test_incremental_clustering_through_the_compact_job_sorts_across_spark_tasks(
        spark: Any, tmp_path: Path) -> None:
    """The ``compact`` job of a ``clustering.incremental`` table, with the Spark executor in
    its context: every level-0 run picked, clustered to the max level by z-order in range
    tasks, the key order and levels of the local job's."""
    name, warehouses = "db.clustered", {}
    for where in ("local", "cluster"):
        warehouse = warehouses[where] = str(tmp_path / where)
        writer = TableWriter(catalog_for(warehouse), name, SCHEMA, partition_keys=("dt",),
                             options={"bucket": "-1", "clustering.columns": "a,b",
                                      "clustering.incremental": "true",
                                      "target-file-size": "4 kb"})
        rng = random.Random(3)
        for commit in range(6):
            writer.commit([{"dt": "x", "id": commit * 1000 + i, "a": rng.randrange(1000),
                            "b": rng.randrange(1000), "s": "s"} for i in range(300)])
    expected = read_rows(warehouses["cluster"], name)
    job = JOBS["compact"]
    layouts = {}
    for where, executor in (("local", None), ("cluster", SparkExecutor(spark))):
        table = open_table(open_storage(warehouses[where]), warehouses[where], name)
        report = job.run(table, job.settings(), JobContext(clock=CLOCK, executor=executor))
        assert report.result.snapshot is not None and report.result.plan.strategy == "zorder"
        assert read_rows(warehouses[where], name).equals(expected)
        files = scan_snapshot(table, table.snapshots.latest()).files
        assert {f.entry.file.level for f in files} == {5}
        layouts[where] = [(f.entry.file.min_sequence_number, f.entry.file.file_name)
                          for f in files]
    # the same key order: read the files of each in sequence order
    keys = {}
    for where, layout in layouts.items():
        table = open_table(open_storage(warehouses[where]), warehouses[where], name)
        schema = table.latest_schema()
        directory = bucket_path(table, schema, scan_snapshot(
            table, table.snapshots.latest()).files[0].entry.partition, 0)
        rows = pa.concat_tables(pa.Table.from_batches(list(read_data_file(
            table.storage, table.storage.join(directory, file_name), file_format="parquet",
            file_schema=schema, read_schema=schema, key_value=False)))
            for _, file_name in sorted(layout))
        keys[where] = _keys(rows, "zorder")
    assert keys["cluster"] == keys["local"] == sorted(keys["local"])
    writers = {w: {n.rsplit("-", 1)[0] for _, n in layout} for w, layout in layouts.items()}
    assert len(writers["local"]) == 1 and len(writers["cluster"]) > 1  # range tasks wrote
    assert unreferenced_files(warehouses["cluster"], name) == []
