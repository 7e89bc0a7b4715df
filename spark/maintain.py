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
own credentials) and commits one COMPACT snapshot from the driver; then the other jobs run
on the driver. ``examples/spark_ingest.py`` is a whole ingestion job ending with this call.

Two other ways to maintain after an ingestion commits:

- A running daemon (``paimond run``): ``paimond trigger http://paimond:9181 --table db.events
  --wait`` (token from ``PAIMOND_TRIGGER_TOKEN`` or ``--token-file``) runs every enabled job
  of the table now and, with ``--wait``, returns when they finished (exit 1 if one failed).
- The one-shot CLI, as the pipeline's next step: ``paimond compact WAREHOUSE --table db.events
  [--executor spark --spark-master URL]``, then ``paimond expire-snapshots WAREHOUSE --table
  db.events``; ``paimond run-once --config paimond.toml`` runs every configured job once.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from paimond.clock import SYSTEM_CLOCK
from paimond.config.settings import JOB_NAMES
from paimond.errors import ConfigError, PaimondError
from paimond.maintenance.compact import CompactionSummary, CompactJob
from paimond.maintenance.expire import ExpireJob, ExpireResult
from paimond.maintenance.manifests import ManifestMergeJob, ManifestMergeResult
from paimond.maintenance.orphans import OrphanJob, OrphanResult
from paimond.spark.executor import SparkExecutor
from paimond.table.catalog import open_table
from paimond.table.storage import open_storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["MaintenanceFailedError", "MaintenanceSummary", "maintain"]


@dataclass
class MaintenanceSummary:
    table_name: str
    compaction: CompactionSummary | None = None
    expiration: ExpireResult | None = None
    manifests: ManifestMergeResult | None = None
    orphans: OrphanResult | None = None
    durations_s: dict[str, float] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.compaction is not None and bool(self.compaction.failures)

    def describe(self) -> str:
        parts = [self.compaction, self.expiration, self.manifests, self.orphans]
        return "\n".join(p.describe() for p in parts if p is not None)


class MaintenanceFailedError(PaimondError):
    """Some bucket could not be compacted; the other buckets and jobs did their work."""

    def __init__(self, summary: MaintenanceSummary) -> None:
        self.summary = summary
        super().__init__(f"maintenance of {summary.table_name} failed:\n{summary.describe()}")


def maintain(spark: SparkSession, warehouse: str, table: str, *,
             storage_options: Mapping[str, Any] | None = None,
             jobs: Sequence[str] = ("compact", "expire"), full: bool = False
             ) -> MaintenanceSummary:
    """Run ``jobs`` (compact, expire, merge_manifests, remove_orphans; always in that order)
    on ``table`` (``db.name``) with the table's own options; compaction's bucket tasks run on
    ``spark``'s executors, ``full`` compacts every bucket to one sorted run.

    Raises MaintenanceFailedError after every job ran if a bucket failed, ConfigError for an
    unknown job, and what the jobs raise (CommitConflictError after repeated conflicts)."""
    unknown = sorted(set(jobs) - set(JOB_NAMES))
    if unknown:
        raise ConfigError("jobs", f"unknown job {unknown[0]!r}; known: {', '.join(JOB_NAMES)}")
    storage = open_storage(warehouse, storage_options)
    opened = open_table(storage, storage.root, table)
    summary = MaintenanceSummary(opened.name)
    for job in (j for j in JOB_NAMES if j in jobs):
        started = time.monotonic()
        if job == "compact":
            summary.compaction = CompactJob(opened, clock=SYSTEM_CLOCK, full=full,
                                            executor=SparkExecutor(spark)).run()
        elif job == "expire":
            summary.expiration = ExpireJob(opened, clock=SYSTEM_CLOCK).run()
        elif job == "merge_manifests":
            summary.manifests = ManifestMergeJob(opened, clock=SYSTEM_CLOCK).run()
        else:
            summary.orphans = OrphanJob(opened, clock=SYSTEM_CLOCK).run()
        summary.durations_s[job] = time.monotonic() - started
    if summary.failed:
        raise MaintenanceFailedError(summary)
    return summary
