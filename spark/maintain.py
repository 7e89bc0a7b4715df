"""Maintenance right after a PySpark ingestion: ``paimond.spark.maintain``.

Paimon's own Spark integration runs maintenance as procedures from the same session
(``CALL sys.compact``, ``sys.expire_snapshots``: apache/paimon 5dacde516b,
``paimon-spark-common/.../spark/procedure/``). Here a driver that has just committed calls::

    import paimond.spark
    summary = paimond.spark.maintain(spark, "s3://bucket/warehouse", "db.events",
                                     storage_options={"endpoint_url": "http://minio:9000"})
    print(summary.describe())

Compaction plans on the driver, runs one Spark task per bucket on the session's executors
(paimond's code is shipped with the job; executors need its dependencies and, for S3, their
own credentials) and commits one COMPACT snapshot from the driver. The other jobs plan and
commit on the driver too; expiry's deletions, orphan removal's listing and deleting and
rewrite-index's and rebuild-dv's buckets run as Spark tasks (``paimond.maintenance.distributed``,
``paimond.maintenance.regenerate.dv_bucket``).
``examples/spark_ingest.py`` is a whole ingestion pipeline calling this after each batch.

Two other ways to maintain after an ingestion commits:

- A running daemon (``paimond run``): ``paimond trigger http://paimond:9181 --table db.events
  --wait`` (token from ``PAIMOND_TRIGGER_TOKEN`` or ``--token-file``) runs every enabled job
  of the table now and, with ``--wait``, returns when they finished (exit 1 if one failed).
- The one-shot CLI, as the pipeline's next step: ``paimond compact WAREHOUSE --table db.events
  [--executor spark --spark-master URL]``, then ``paimond expire-snapshots WAREHOUSE --table
  db.events``; ``paimond run-once --config paimond.toml`` runs every configured job once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from paimond.clock import SYSTEM_CLOCK
from paimond.errors import ConfigError, MaintenanceFailedError, RefusedError
from paimond.maintenance.compact.job import CompactionSummary
from paimond.maintenance.expire.orphans import OrphanResult
from paimond.maintenance.expire.rounds import ExpireRounds
from paimond.maintenance.jobs import JOBS, ROUTINE_JOBS, JobContext, JobReport
from paimond.maintenance.manifests import ManifestMergeResult
from paimond.spark.executor import SparkExecutor
from paimond.table.catalog import open_table
from paimond.table.catalogs.catalog_storage import catalog_secret, with_catalog
from paimond.table.storage.interface import open_storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["MaintenanceFailedError", "MaintenanceSummary", "maintain"]


@dataclass
class MaintenanceSummary:
    table_name: str
    reports: dict[str, JobReport] = field(default_factory=dict)  # by job, in the order run
    durations_s: dict[str, float] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # job -> why it refused the table

    def _result(self, job: str) -> Any:
        report = self.reports.get(job)
        return None if report is None else report.result

    @property
    def compaction(self) -> CompactionSummary | None:
        return self._result("compact")  # type: ignore[no-any-return]

    @property
    def expiration(self) -> ExpireRounds | None:
        return self._result("expire")  # type: ignore[no-any-return]

    @property
    def manifests(self) -> ManifestMergeResult | None:
        return self._result("merge_manifests")  # type: ignore[no-any-return]

    @property
    def orphans(self) -> OrphanResult | None:
        return self._result("remove_orphans")  # type: ignore[no-any-return]

    @property
    def failed(self) -> bool:
        return any(report.failed for report in self.reports.values())

    def describe(self) -> str:
        return "\n".join([*(f"{self.table_name}: {job} refused: {reason}"
                            for job, reason in self.refused.items()),
                          *(report.result.describe() for report in self.reports.values())])


def maintain(spark: SparkSession, warehouse: str, table: str, *,
             storage_options: Mapping[str, Any] | None = None,
             catalog_options: Mapping[str, str] | None = None,
             jobs: Sequence[str] = ("compact", "expire"), full: bool = False
             ) -> MaintenanceSummary:
    """Run ``jobs`` (compact, expire, merge_manifests, remove_orphans; always in that order)
    on ``table`` (``db.name``) with the table's own options; compaction's bucket tasks run on
    ``spark``'s executors, ``full`` compacts every bucket to one sorted run.
    ``catalog_options``: the Paimon catalog the warehouse is registered in
    (``table.catalogs``: commits under a JDBC catalog's lock, or through a REST catalog's
    server; the JDBC password from ``PAIMOND_JDBC_PASSWORD``, the REST token from
    ``PAIMOND_REST_TOKEN``).

    A job that refuses the table (options paimond does not implement) is listed in
    ``refused`` and the other jobs still run. Raises MaintenanceFailedError after every job
    ran if a bucket failed, ConfigError for an unknown job, and what the jobs raise
    (CommitConflictError after repeated conflicts)."""
    unknown = sorted(set(jobs) - set(ROUTINE_JOBS))
    if unknown:
        raise ConfigError("jobs", f"unknown job {unknown[0]!r}; known: {', '.join(ROUTINE_JOBS)}")
    catalog = catalog_options or {}
    storage = with_catalog(open_storage(warehouse, storage_options), catalog,
                           secret=catalog_secret(catalog, os.environ))
    opened = open_table(storage, storage.root, table)
    summary = MaintenanceSummary(opened.name)
    context = JobContext(SYSTEM_CLOCK, executor=SparkExecutor(spark))
    for name in (j for j in ROUTINE_JOBS if j in jobs):
        started = time.monotonic()
        job = JOBS[name]
        try:
            settings = job.settings(full=full) if name == "compact" else job.settings()
            summary.reports[name] = job.run(opened, settings, context)
        except RefusedError as error:  # decided before writing anything: the next job runs
            summary.refused[name] = error.reason
        summary.durations_s[name] = time.monotonic() - started
    if summary.failed:
        raise MaintenanceFailedError(summary)
    return summary
