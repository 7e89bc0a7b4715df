"""Compaction on ``local-cluster[2,1,1024]``: executors are separate JVMs whose Python is the
packed environment ``spark.archives`` shipped (not the driver's venv) and whose S3 credentials
come from ``spark.executorEnv.*``, never from a task; an executor JVM killed in the middle of
a task is replaced, the task retried, and the job commits once with nothing left over."""

from __future__ import annotations

import datetime
import os
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_append_fixed_bucket, build_pk_deduplicate
from support.s3_endpoint import S3Endpoint
from support.spark_session import ENVIRONMENT, EXECUTOR_ENV
from support.table_garbage import unreferenced_files

from paimond.clock import Clock
from paimond.lsm.task import CompactResult, CompactTask
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.execution import BucketFailure, TaskRunner
from paimond.spark.executor import SparkExecutor, ship_package
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

# Executors cannot import this test: Spark pickles its functions by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])
CLOCK = Clock(fixed_ms=int(datetime.datetime(2026, 11, 22, 12).timestamp() * 1000))


def _where_am_i(_: int) -> dict[str, Any]:
    import os
    import sys

    import pyarrow

    import paimond

    return {"executable": sys.executable, "prefix": sys.prefix, "path": list(sys.path),
            "pyarrow": pyarrow.__file__, "paimond": paimond.__file__, "cwd": os.getcwd(),
            "pid": os.getpid(), "secret": os.environ.get("AWS_SECRET_ACCESS_KEY")}


def test_executors_run_from_the_packed_environment(spark: Any) -> None:
    shipped = os.path.basename(ship_package(spark))
    found = spark.sparkContext.parallelize(range(8), 8).map(_where_am_i).collect()

    driver_site = sysconfig.get_paths()["purelib"]
    suffix = f"{os.sep}{ENVIRONMENT}{os.sep}bin{os.sep}python"
    for task in found:
        assert task["executable"].endswith(suffix), task["executable"]
        assert task["executable"] != sys.executable and task["pid"] != os.getpid()
        assert task["prefix"] == task["executable"].removesuffix(f"{os.sep}bin{os.sep}python")
        assert task["pyarrow"].startswith(task["prefix"]), task["pyarrow"]
        assert f"{shipped}{os.sep}paimond{os.sep}__init__.pyc" in task["paimond"]
        assert driver_site not in task["path"] and sys.prefix != task["prefix"]
        assert task["secret"] == EXECUTOR_ENV["AWS_SECRET_ACCESS_KEY"]
    assert len({t["cwd"] for t in found}) == 2, "two executors, each in its own directory"


def _checking_credentials(runner: TaskRunner, secret: str) -> Callable[[CompactTask], Any]:
    """A runner that fails the task if it carries a credential; the executor's storage then
    finds the credentials in its own environment. Pickled by value (executors cannot import
    this test)."""

    def run(task: CompactTask) -> CompactResult:
        import os
        import pickle

        # No assert here: pytest rewrites asserts into calls executors cannot import.
        options = task.table.location.options
        if {"key", "secret"} & set(options) or secret.encode() in pickle.dumps(task):
            raise RuntimeError(f"a credential reached the task: {sorted(options)}")
        if os.environ.get("AWS_SECRET_ACCESS_KEY") != secret:
            raise RuntimeError("the executor's environment has no credentials")
        return runner(task)

    return run


@dataclass
class CheckingExecutor:
    inner: SparkExecutor
    secret: str

    def execute(self, tasks: Any, runner: TaskRunner, progress: Any
                ) -> tuple[list[CompactResult], list[BucketFailure]]:
        return self.inner.execute(tasks, _checking_credentials(runner, self.secret),  # type: ignore[arg-type]
                                  progress)


@pytest.mark.s3
def test_compaction_on_s3_with_credentials_only_in_the_executors_environment(
        spark: Any, s3_endpoint: S3Endpoint, capsys: pytest.CaptureFixture[str]) -> None:
    bucket = s3_endpoint.make_bucket("cluster")
    warehouse = f"{bucket}/wh"
    options = s3_endpoint.storage_options
    catalog_options = {"s3.endpoint": s3_endpoint.endpoint_url, "s3.access-key": options["key"],
                       "s3.secret-key": options["secret"], "s3.region": s3_endpoint.region,
                       "s3.path.style.access": "true"}
    spec = build_pk_deduplicate(warehouse, catalog_options)
    content = read_rows(warehouse, spec.name, catalog_options=catalog_options)
    table = open_table(open_storage(warehouse, options), warehouse, spec.name)
    before = table.snapshots.latest_id()

    summary = CompactJob(table, full=True, use_processes=False, clock=CLOCK,
                         executor=CheckingExecutor(SparkExecutor(spark), options["secret"])).run()

    assert not summary.failures, summary.describe()
    assert summary.snapshot is not None and summary.snapshot.id == (before or 0) + 1
    assert read_rows(warehouse, spec.name, catalog_options=catalog_options).equals(content)
    out = capsys.readouterr()
    assert options["secret"] not in out.out + out.err


def _executor_jvm() -> int:
    """The pid of the executor JVM this Python worker serves (an ancestor process)."""
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            if b"CoarseGrainedExecutorBackend" in cmdline.read():
                return pid
        with open(f"/proc/{pid}/stat") as stat:
            pid = int(stat.read().rsplit(")", 1)[1].split()[1])
    raise RuntimeError("no executor JVM among this worker's ancestors")


def _killing(runner: TaskRunner, victim: tuple[str, int], flag_dir: str
             ) -> Callable[[CompactTask], CompactResult]:
    """A runner that, on the victim bucket's first attempt, writes the bucket's files and then
    kills its executor's JVM (SIGKILL: no result, no cleanup); later attempts run normally."""
    def run(task: CompactTask) -> CompactResult:
        import os
        import signal

        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = context.attemptNumber() if context is not None else 0
        open(os.path.join(flag_dir, f"{task.bucket}.{task.partition.hex()}.{attempt}"),
             "x").close()
        result = runner(task)
        if (task.partition_text, task.bucket) == victim and attempt == 0:
            os.kill(_executor_jvm(), signal.SIGKILL)
            os._exit(1)
        return result

    return run


@dataclass
class KillingExecutor:
    inner: SparkExecutor
    victim: tuple[str, int]
    flag_dir: str

    def execute(self, tasks: Any, runner: TaskRunner, progress: Any
                ) -> tuple[list[CompactResult], list[BucketFailure]]:
        return self.inner.execute(tasks, _killing(runner, self.victim, self.flag_dir),  # type: ignore[arg-type]
                                  progress)


def _files_per_bucket(warehouse: str, name: str) -> dict[tuple[bytes, int], list[tuple[int, int]]]:
    from paimond.table.scan.snapshot_scan import scan_snapshot

    table = open_table(open_storage(warehouse), warehouse, name)
    latest = table.snapshots.latest()
    assert latest is not None
    return {key: sorted((f.meta.level, f.meta.row_count) for f in bucket.files)
            for key, bucket in scan_snapshot(table, latest).buckets().items()}


def test_an_executor_killed_mid_task_is_retried_and_the_job_commits_once(
        spark: Any, tmp_path: Path) -> None:
    """Append table (a duplicated file would show as duplicated rows): the killed attempt's
    files are the job's own garbage, deleted when it ends."""
    local, remote = str(tmp_path / "local"), str(tmp_path / "cluster")
    spec = build_append_fixed_bucket(local)
    build_append_fixed_bucket(remote)
    CompactJob(open_table(open_storage(local), local, spec.name), full=True,
               use_processes=False, clock=CLOCK).run()
    table = open_table(open_storage(remote), remote, spec.name)
    before = table.snapshots.latest_id() or 0
    plan = CompactJob(table, full=True, clock=CLOCK).plan()
    victim = plan.tasks[len(plan.tasks) // 2]
    flags = tmp_path / "flags"
    flags.mkdir()

    summary = CompactJob(table, full=True, use_processes=False, clock=CLOCK, executor=KillingExecutor(
        SparkExecutor(spark), (victim.partition_text, victim.bucket), str(flags))).run()

    assert not summary.failures, summary.describe()
    attempts = sorted(p.name for p in flags.iterdir()
                      if p.name.startswith(f"{victim.bucket}.{victim.partition.hex()}."))
    assert attempts[:2] == [f"{victim.bucket}.{victim.partition.hex()}.{a}" for a in (0, 1)]
    assert table.snapshots.list_ids()[-1] == before + 1  # one commit
    assert summary.snapshot is not None and summary.snapshot.commit_kind == "COMPACT"
    assert _files_per_bucket(remote, spec.name) == _files_per_bucket(local, spec.name)
    assert read_rows(remote, spec.name).equals(spec.expected_rows)
    assert unreferenced_files(remote, spec.name) == []
