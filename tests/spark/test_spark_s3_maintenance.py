"""Orphan removal and snapshot expiry with the Spark executor (``local-cluster``) on moto's S3
server: their listing and deleting tasks reach the executors without a credential (each task
is checked where it runs, as compaction's are in ``test_spark_cluster.py``) and the executors
read the storage with the credentials of their own environment (``spark.executorEnv.*``)."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from pyspark import cloudpickle
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_pk_deduplicate_orc
from support.s3_endpoint import S3Endpoint
from support.table_garbage import STATE_DIRS

from paimond.clock import Clock
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.expire.orphans import OrphanJob
from paimond.maintenance.expire.references import referencing_snapshots, used_files
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.spark.executor import SparkExecutor
from paimond.table.catalog import Table, open_table
from paimond.table.storage.interface import Storage, open_storage

# Executors cannot import this test: Spark pickles its functions by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])
# Two days past the wall clock: every file the test wrote is old enough to be an orphan.
CLOCK = Clock(fixed_ms=int(time.time() * 1000) + 2 * 86_400_000)


def _checking(function: Callable[[Any], Any], secret: str) -> Callable[[Any], Any]:
    """``function``, failing the task if it carries a credential or its executor has none in
    its environment. Pickled by value."""

    def run(task: Any) -> Any:
        import os
        import pickle

        # No assert here: pytest rewrites asserts into calls executors cannot import.
        options = task.location.options
        if {"key", "secret"} & set(options) or secret.encode() in pickle.dumps(task):
            raise RuntimeError(f"a credential reached the task: {sorted(options)}")
        if os.environ.get("AWS_SECRET_ACCESS_KEY") != secret:
            raise RuntimeError("the executor's environment has no credentials")
        return function(task)

    return run


@dataclasses.dataclass
class CheckingMapper:
    inner: SparkExecutor
    secret: str
    calls: int = 0

    def map_tasks(self, function: Callable[[Any], Any], items: Sequence[Any],
                  description: str) -> list[Any]:
        self.calls += 1
        return self.inner.map_tasks(_checking(function, self.secret), items, description)


def _walk(storage: Storage, directory: str) -> list[str]:
    out = []
    for status in storage.list_dir(directory):
        out += _walk(storage, status.path) if status.is_dir else [status.path]
    return out


def _unreferenced(table: Table) -> list[str]:
    """Files under the table's own directories no snapshot, tag or branch names."""
    used = used_files(table, referencing_snapshots(table)).all
    root = table.path.rstrip("/") + "/"
    files = [p.removeprefix(root) for p in _walk(table.storage, table.path)]
    return sorted(p for p in files if p.split("/")[0] not in STATE_DIRS
                  and p.rsplit("/", 1)[-1] not in used)


@pytest.mark.s3
def test_orphan_removal_and_expiry_on_s3_with_credentials_only_in_the_executors_environment(
        spark: Any, s3_endpoint: S3Endpoint, capsys: pytest.CaptureFixture[str]) -> None:
    warehouse = f"{s3_endpoint.make_bucket('cluster-maintenance')}/wh"
    options = s3_endpoint.storage_options
    catalog_options = {"s3.endpoint": s3_endpoint.endpoint_url, "s3.access-key": options["key"],
                       "s3.secret-key": options["secret"], "s3.region": s3_endpoint.region,
                       "s3.path.style.access": "true"}
    spec = build_pk_deduplicate_orc(warehouse, catalog_options)
    table = open_table(open_storage(warehouse, options), warehouse, spec.name)
    CompactJob(table, full=True, use_processes=False, clock=CLOCK).run()
    content = read_rows(warehouse, spec.name, catalog_options=catalog_options)
    directories = sorted({p.rsplit("/", 1)[0] for p in _walk(table.storage, table.path)
                          if "/bucket-" in p} | {table.file_path("manifest", "x").rsplit("/", 1)[0]})
    planted = [f"{d}/data-orphan-{i}.parquet" for d in directories for i in range(2)]
    assert len(directories) > 2, directories  # bucket directories and manifest/
    for path in planted:
        table.storage.write_bytes(path, b"orphan")
    mapper = CheckingMapper(SparkExecutor(spark), options["secret"])

    removed = OrphanJob(table, clock=CLOCK, executor=mapper).run().removed

    assert mapper.calls == 2  # one listing, one deleting
    assert removed.total_files == len(planted)
    assert not any(table.storage.exists(p) for p in planted)
    assert read_rows(warehouse, spec.name, catalog_options=catalog_options).equals(content)

    settings = dataclasses.replace(ExpireSettings.of(table.options()), retain_min=1,
                                   retain_max=1, time_retained_ms=0)
    latest = table.snapshots.latest_id()
    expired = ExpireJob(table, clock=CLOCK, settings=settings, executor=mapper).run()

    assert mapper.calls == 4  # then expiry's two deleting jobs
    assert expired.deleted.total_files > 0 and table.snapshots.list_ids() == [latest]
    assert read_rows(warehouse, spec.name, catalog_options=catalog_options).equals(content)
    assert _unreferenced(table) == []
    out = capsys.readouterr()
    assert options["secret"] not in out.out + out.err
