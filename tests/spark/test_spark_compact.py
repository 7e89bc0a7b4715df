"""Compaction with ``--executor spark`` (PySpark local mode): pypaimon reads the same rows, the
file layout equals the local pool's, failed attempts are retried, a bucket that keeps failing
commits nothing while the others commit, and paimond reaches the executors as a zip."""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import (
    build_all_types_pk,
    build_pk_aggregation,
    build_pk_deduplicate,
    build_pk_deletion_vectors,
    build_pk_first_row,
    build_pk_partial_update,
)

from paimond.cli.main import main
from paimond.clock import Clock
from paimond.daemon.outcomes import run_job
from paimond.lsm.task import CompactResult, CompactTask
from paimond.maintenance.compact.job import CompactionSummary, CompactJob
from paimond.maintenance.execution import BucketFailure, TaskRunner
from paimond.maintenance.jobs import JOBS, JobContext
from paimond.spark import executor as executors
from paimond.spark.executor import SparkExecutor, package_zip
from paimond.table.catalog import Table, open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

BUILDERS = {
    "deduplicate": build_pk_deduplicate,
    "partial-update": build_pk_partial_update,
    "aggregation": build_pk_aggregation,
    "first-row": build_pk_first_row,
    "all-types": build_all_types_pk,
    "deletion-vectors": build_pk_deletion_vectors,
}
SAME_LAYOUT = sorted(BUILDERS)
NOW = datetime.datetime(2026, 11, 22, 12)
CLOCK = Clock(fixed_ms=int(NOW.timestamp() * 1000))  # its local time is NOW


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    root = tmp_path_factory.mktemp("spark")
    return {name: (root / name, build(str(root / name))) for name, build in BUILDERS.items()}


def _copy(pristine: dict[str, tuple[Path, Any]], name: str, target: Path) -> tuple[str, str]:
    source, spec = pristine[name]
    shutil.copytree(source, target)
    return str(target), spec.name


def _table(warehouse: str, name: str) -> Table:
    return open_table(open_storage(warehouse), warehouse, name)


def _job(warehouse: str, name: str, *, full: bool, executor: Any = None) -> CompactJob:
    return CompactJob(_table(warehouse, name), full=full, parallelism=2,
                      use_processes=False, clock=CLOCK, executor=executor)


Layout = dict[tuple[bytes, int], tuple[list[tuple[int, int, int]], list[tuple[str, int, list[int]]]]]


def _layout(warehouse: str, name: str) -> Layout:
    """Per (partition, bucket): (level, rows, deleted rows) of each live file and the DV
    index files' vector counts and cardinalities. File names differ from run to run."""
    table = _table(warehouse, name)
    latest = table.snapshots.latest()
    assert latest is not None
    files = scan_snapshot(table, latest)
    out: Layout = {}
    for key, bucket in files.buckets().items():
        out[key] = (sorted((f.meta.level, f.meta.row_count, f.meta.delete_row_count or 0)
                           for f in bucket.files), [])
    for entry in files.index_entries:
        index = entry.index_file
        cardinalities = sorted(r.cardinality or 0 for r in index.dv_ranges or ())
        out.setdefault((entry.partition, entry.bucket), ([], []))[1].append(
            (index.index_type, index.row_count, cardinalities))
    return {k: (files_, sorted(indexes)) for k, (files_, indexes) in out.items()}


@pytest.mark.parametrize("name", SAME_LAYOUT)
def test_spark_executor_matches_the_local_pool(name: str, spark: Any,
                                               pristine: dict[str, tuple[Path, Any]],
                                               tmp_path: Path) -> None:
    local, table_name = _copy(pristine, name, tmp_path / "local")
    remote, _ = _copy(pristine, name, tmp_path / "spark")
    content = read_rows(remote, table_name, include_level0=True)

    for full in (False, True):
        local_summary = _job(local, table_name, full=full).run()
        if full:  # the one-shot CLI, on the test's running session
            argv = ["compact", remote, "--table", table_name, "--full", "--executor", "spark",
                    "--spark-master", "local[2]"]
            assert main(argv) == 0
        else:
            summary = _job(remote, table_name, full=False, executor=SparkExecutor(spark)).run()
            assert not summary.failures, summary.describe()
            assert len(summary.results) == len(local_summary.results)
        assert _layout(remote, table_name) == _layout(local, table_name), f"{name} full={full}"
        assert read_rows(remote, table_name, include_level0=True).equals(content), name

    latest = _table(remote, table_name).snapshots.latest()
    assert latest is not None and latest.commit_kind == "COMPACT"
    assert {lv for files, _ in _layout(remote, table_name).values() for lv, _, _ in files} == {5}
    assert spark.sparkContext._jsc.sc().isStopped() is False  # the CLI left our session running


def _faulty(runner: TaskRunner, flag_dir: str, always: tuple[str, int] | None
            ) -> Callable[[CompactTask], CompactResult]:
    """A runner that records each attempt in ``flag_dir`` and raises on a bucket's first
    attempt (and on every attempt of the bucket ``always``: partition text, bucket). Defined
    inside a function so that Spark pickles it by value: executors cannot import this test."""

    def run(task: CompactTask) -> CompactResult:
        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = context.attemptNumber() if context is not None else 0
        flag = os.path.join(flag_dir, f"{task.partition.hex()}.{task.bucket}.{attempt}")
        open(flag, "x").close()
        if attempt == 0 or (task.partition_text, task.bucket) == always:
            raise RuntimeError(f"injected failure of bucket {task.bucket}, attempt {attempt}")
        return runner(task)

    return run


@dataclass
class FaultyExecutor:
    inner: SparkExecutor
    flag_dir: str
    always: tuple[str, int] | None = None

    def execute(self, tasks: Any, runner: TaskRunner, progress: Any
                ) -> tuple[list[CompactResult], list[BucketFailure]]:
        return self.inner.execute(tasks, _faulty(runner, self.flag_dir, self.always),  # type: ignore[arg-type]
                                  progress)


def _run_faulty(spark: Any, warehouse: str, name: str, flags: Path,
                always: tuple[str, int] | None) -> CompactionSummary:
    flags.mkdir()
    executor = FaultyExecutor(SparkExecutor(spark), str(flags), always)
    return _job(warehouse, name, full=True, executor=executor).run()


def test_a_failed_attempt_is_retried_and_the_result_is_exact(
        spark: Any, pristine: dict[str, tuple[Path, Any]], tmp_path: Path) -> None:
    local, name = _copy(pristine, "deduplicate", tmp_path / "local")
    remote, _ = _copy(pristine, "deduplicate", tmp_path / "spark")
    content = read_rows(remote, name, include_level0=True)
    _job(local, name, full=True).run()

    summary = _run_faulty(spark, remote, name, tmp_path / "flags", always=None)

    assert not summary.failures, summary.describe()
    tasks = summary.plan.tasks if summary.plan else ()
    attempts = sorted(p.name for p in (tmp_path / "flags").iterdir())
    assert attempts == sorted(f"{t.partition.hex()}.{t.bucket}.{a}" for t in tasks
                              for a in (0, 1))
    assert _layout(remote, name) == _layout(local, name)
    assert read_rows(remote, name, include_level0=True).equals(content)
    assert read_rows(remote, name).equals(content)  # everything left level 0


def test_a_bucket_that_keeps_failing_commits_nothing_while_the_others_commit(
        spark: Any, pristine: dict[str, tuple[Path, Any]], tmp_path: Path) -> None:
    warehouse, name = _copy(pristine, "deduplicate", tmp_path / "wh")
    content = read_rows(warehouse, name, include_level0=True)
    before = _layout(warehouse, name)
    victim = _job(warehouse, name, full=True).plan().tasks[0]
    failing = (victim.partition_text, victim.bucket)

    summary = _run_faulty(spark, warehouse, name, tmp_path / "flags", always=failing)

    assert [(f.task.partition_text, f.task.bucket) for f in summary.failures] == [failing]
    assert summary.failures[0].error == (f"RuntimeError: injected failure of bucket "
                                         f"{victim.bucket}, attempt 2 (attempt 3 of 3)")
    assert summary.snapshot is not None and len(summary.results) > 1
    assert "FAILED" in summary.describe() and "injected failure" in summary.describe()
    after = _layout(warehouse, name)
    assert after.keys() == before.keys()
    for key, layout in after.items():
        if key == (victim.partition, victim.bucket):
            assert layout == before[key]  # untouched: still its level-0 files
        else:
            assert {level for level, _, _ in layout[0]} == {5}
    assert read_rows(warehouse, name, include_level0=True).equals(content)


def _crashing(runner: TaskRunner, victim: tuple[str, int]
              ) -> Callable[[CompactTask], CompactResult]:
    """A runner whose Python worker dies (no exception to report) on the victim bucket."""

    def run(task: CompactTask) -> CompactResult:
        if (task.partition_text, task.bucket) == victim:
            os._exit(3)
        return runner(task)

    return run


@dataclass
class CrashingExecutor:
    inner: SparkExecutor
    victim: tuple[str, int]

    def execute(self, tasks: Any, runner: TaskRunner, progress: Any
                ) -> tuple[list[CompactResult], list[BucketFailure]]:
        return self.inner.execute(tasks, _crashing(runner, self.victim), progress)  # type: ignore[arg-type]


def test_a_worker_that_dies_on_every_attempt_fails_the_whole_job(
        spark: Any, pristine: dict[str, tuple[Path, Any]], tmp_path: Path) -> None:
    """No result comes back from a failed Spark job: every bucket is reported failed with
    Spark's error and nothing is committed (other tasks' files are left to remove-orphans)."""
    warehouse, name = _copy(pristine, "deduplicate", tmp_path / "wh")
    content = read_rows(warehouse, name, include_level0=True)
    before = _table(warehouse, name).snapshots.latest_id()
    victim = _job(warehouse, name, full=True).plan().tasks[0]
    executor = CrashingExecutor(SparkExecutor(spark), (victim.partition_text, victim.bucket))

    summary = _job(warehouse, name, full=True, executor=executor).run()

    assert summary.snapshot is None and not summary.results
    assert len(summary.failures) == len(summary.plan.tasks if summary.plan else ())
    assert all(f.error.startswith("Spark job failed: ") for f in summary.failures)
    assert _table(warehouse, name).snapshots.latest_id() == before
    assert read_rows(warehouse, name, include_level0=True).equals(content)


def test_the_cli_exits_1_when_a_bucket_fails(spark: Any, pristine: dict[str, tuple[Path, Any]],
                                             tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                             ) -> None:
    warehouse, name = _copy(pristine, "deduplicate", tmp_path / "wh")
    victim = next(p for p in Path(warehouse).rglob("*.parquet") if "bucket-" in str(p.parent))
    victim.write_bytes(b"PAR1 not really parquet PAR1")

    assert main(["compact", warehouse, "--table", name, "--full", "--executor", "spark"]) == 1

    out = capsys.readouterr().out
    assert "FAILED" in out and "CorruptFileError" in out and victim.name in out
    assert "attempt" not in out.split("FAILED", 1)[1]  # a corrupt file is not retried


def test_the_package_zip_is_importable_and_reaches_the_executors(spark: Any,
                                                                 tmp_path: Path) -> None:
    path = package_zip(str(tmp_path))
    names = set(zipfile.ZipFile(path).namelist())
    assert {"paimond/__init__.py", "paimond/spark/maintain.py", "paimond/errors.py",
            "paimond/spark/executor.py", "paimond/lsm/rewrite.py",
            "paimond/format/file_index/__init__.py"} <= names
    assert not any(n.startswith(("paimond/tests/", "paimond/.venv/", "paimond/examples/",
                                 "paimond/bench/")) for n in names)
    assert package_zip(str(tmp_path)) == path  # named by content

    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import paimond.spark, "
             "paimond.spark.executor, paimond.lsm.rewrite; print(paimond.__file__)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", probe, path], capture_output=True, text=True,
                         cwd=tmp_path, env=env, check=True).stdout
    # compiled by this interpreter, beside its source: imported without compiling
    assert out.strip() == os.path.join(path, "paimond", "__init__.pyc")
    assert {n + "c" for n in names if n.endswith(".py")} <= names

    shipped = executors.ship_package(spark)
    where = spark.sparkContext.parallelize([0, 1], 2).map(
        lambda _: __import__("paimond").__file__).collect()
    name = os.path.basename(shipped)
    assert all(f"{name}{os.sep}paimond{os.sep}__init__.pyc" in w for w in where), where


def test_the_daemon_runs_compaction_on_spark_when_configured(
        spark: Any, pristine: dict[str, tuple[Path, Any]], tmp_path: Path) -> None:
    warehouse, name = _copy(pristine, "partial-update", tmp_path / "wh")
    content = read_rows(warehouse, name, include_level0=True)
    tracker = spark.sparkContext.statusTracker()
    jobs_before = len(tracker.getJobIdsForGroup())
    compact = JOBS["compact"]  # as the daemon's runner composes it, executor = "spark"
    report = run_job(compact, _table(warehouse, name),
                     compact.settings(full=True, parallelism=1, use_processes=False),
                     JobContext(CLOCK, executor=executors.daemon_executor("spark")))

    assert report.outcome == "success" and report.read_rows > 0, report.detail
    assert len(tracker.getJobIdsForGroup()) > jobs_before
    assert read_rows(warehouse, name).equals(content)
