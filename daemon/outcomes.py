"""What a job's run means to the daemon: an outcome (success, conflict, skipped) with the
figures metrics and logs need. Jobs themselves come from the one registry
(``paimond.maintenance.jobs``), the same code the CLI and Spark run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from paimond.errors import (
    BucketsFailedError,
    CommitCancelledError,
    CommitConflictError,
    JobCancelledError,
    RefusedError,
    UnsupportedError,
)
from paimond.maintenance.jobs import Job, JobContext, JobReport
from paimond.table.catalog import Table


@dataclass(frozen=True, slots=True)
class JobOutcome:
    outcome: str  # success, conflict, skipped (failures raise)
    detail: str = ""
    read_bytes: int = 0
    written_bytes: int = 0
    read_rows: int = 0
    written_rows: int = 0
    conflicts: int = 0
    rows_superseded: int = 0  # compaction: higher-level rows newly deleted by vectors
    lookup_cache: Mapping[str, int] = field(default_factory=dict)  # hit/miss/discarded files
    # skipped because the job refused the table at plan time: the schema/options fingerprint
    # it refused (the job is not due again until the table's fingerprint changes)
    refused: str | None = None
    # nothing done, and nothing to do at the same snapshot and schema before this wall ms
    # (JobReport.quiet_until_ms; daemon.tables.duty_skip)
    quiet_until_ms: float | None = None

    @classmethod
    def of(cls, report: JobReport) -> JobOutcome:
        return cls("success", report.result.describe(), read_bytes=report.read_bytes,
                   written_bytes=report.written_bytes, read_rows=report.read_rows,
                   written_rows=report.written_rows, conflicts=report.replans,
                   rows_superseded=report.rows_superseded, lookup_cache=report.lookup_cache,
                   quiet_until_ms=report.quiet_until_ms)


def run_job(job: Job[object], table: Table, settings: object, context: JobContext) -> JobOutcome:
    """Raises what the job raises, but for a table paimond does not handle (skipped), repeated
    commit conflicts (conflict) and cancellation (skipped); a job that failed in part (a
    bucket) raises BucketsFailedError after committing the rest."""
    try:
        report = job.run(table, settings, context)
    except (JobCancelledError, CommitCancelledError):
        return JobOutcome("skipped", "abandoned: the daemon is stopping")
    except RefusedError as error:
        return JobOutcome("skipped", f"refused: {error.reason}", refused=error.fingerprint)
    except UnsupportedError as error:
        return JobOutcome("skipped", str(error))
    except CommitConflictError as error:
        return JobOutcome("conflict", str(error), conflicts=1)
    if report.failed:
        raise BucketsFailedError(table.name, job.name, report.result.describe())
    return JobOutcome.of(report)
