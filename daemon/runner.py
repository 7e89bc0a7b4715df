"""Running one table's jobs under its warehouse lease, one after another, emitting a job
event for each (started, then finished or failed, and conflicted when commits met conflicts).
The runner decides nothing: what to run comes from ``evaluate``, what it means for the table's
backoff is the service's business."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import structlog

from paimond.clock import Clock
from paimond.config.settings import JobsSettings, Settings
from paimond.daemon.events import CommitConflicted, Events, JobFailed, JobFinished, JobStarted
from paimond.daemon.lease import Leases
from paimond.daemon.logging import get_logger
from paimond.daemon.outcomes import JobOutcome, run_job
from paimond.daemon.tables import pace
from paimond.errors import ErrorKind, JobCancelledError, PaimondError, kind_of
from paimond.maintenance.compact.memory import MemoryBudget
from paimond.maintenance.execution import LookupCacheSettings
from paimond.maintenance.job_cleanup import clean_dead_jobs
from paimond.maintenance.jobs import JOBS, JobContext
from paimond.maintenance.regenerate.pending import RegenerationMemory
from paimond.spark.executor import daemon_executor
from paimond.table.catalog import Table
from paimond.table.commit.gate import commits_cancelled_when

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class TableRun:
    table: str
    reports: dict[str, JobOutcome]
    error: str | None = None  # "TypeName: message" of the failure that ended the run
    error_kind: ErrorKind | None = None
    finished_at: Mapping[str, float] = field(default_factory=dict)  # job -> wall seconds
    compacted_snapshot_id: int | None = None  # the latest id after a successful compaction


def skipped(table: str, jobs: Sequence[str], why: str) -> TableRun:
    return TableRun(table, {job: JobOutcome("skipped", why) for job in jobs})


@dataclass(frozen=True, slots=True)
class TableWork:
    """One submission: a table, its jobs in order, and what the run needs of its state."""

    table: Table
    warehouse: int  # index into the settings' warehouses (and the runner's leases)
    jobs: tuple[str, ...]
    base_snapshot_id: int | None
    picker_states: MutableMapping[Any, Any]
    job_settings: JobsSettings | None = None  # the table's policy (table_policy); None: [jobs]
    regeneration: RegenerationMemory | None = None  # rebuild_dv / rewrite_index passes' memory


class Runner:
    def __init__(self, settings: Settings, leases: Sequence[Leases], events: Events,
                 clock: Clock, *, stopping: Callable[[], bool],
                 cancelled: Callable[[], bool]) -> None:
        """``stopping``: start no further job; ``cancelled``: running jobs abandon their work
        before committing."""
        self.settings, self.leases, self.events, self.clock = settings, leases, events, clock
        self._stopping, self._cancelled = stopping, cancelled
        self._swept: set[tuple[int, str]] = set()  # (warehouse, table): dead jobs cleaned
        self._lookup_cache = (LookupCacheSettings(settings.lookup_cache_dir,
                                                  settings.lookup_cache_max_mb << 20)
                              if settings.lookup_cache_dir else None)
        # one budget for every table's compaction tasks: it bounds what runs at once
        self.memory = MemoryBudget.of_mb(settings.memory_budget_mb)

    def run_table(self, work: TableWork) -> TableRun:
        """Never raises: a failure ends the run and is carried in ``TableRun.error``."""
        name = work.table.name
        leases = self.leases[work.warehouse]
        stream = _Stream(self, work)
        reports, finished_at = stream.reports, stream.finished_at
        in_job = False
        try:
            if not leases.acquire(name):
                return skipped(name, work.jobs, "leased by another replica")
            try:
                self._sweep_once(work)
                for job in work.jobs:
                    if self._stopping() or stream.lease_lost:
                        break
                    if job != "compact":  # writers went on during the jobs before it
                        stream.compact_if_due()
                    in_job = True
                    before = work.table.snapshots.latest_id() if job == "compact" else None
                    reports[job] = report = self._run_job(
                        work, job, stream.compact_if_due if job == "expire" else None)
                    in_job = False
                    finished_at[job] = self.clock.wall_ms() / 1000
                    if job == "compact":
                        stream.compacted_by(report, before)
                    stream.keep_lease()
            finally:
                leases.release(name)
            if stream.lease_lost:
                log.warning("lease_lost", table=name, jobs_done=list(reports),
                            jobs_left=[j for j in work.jobs if j not in reports])
        except Exception as error:  # the table's boundary: a job's failure was its event
            message = f"{type(error).__name__}: {error}"
            if not in_job:
                log.error("table_run_failed", table=name, error_kind=kind_of(error),
                          error=message)
            return TableRun(name, reports, message, kind_of(error), finished_at,
                            stream.compacted)
        return TableRun(name, reports, finished_at=finished_at,
                        compacted_snapshot_id=stream.compacted)

    def _sweep_once(self, work: TableWork) -> None:
        """The first time this process holds a table's lease: delete what killed jobs left
        (a restart after a kill), whichever job runs first. A failure is logged and left to
        the table's next writing job."""
        key = (work.warehouse, work.table.name)
        if key in self._swept:
            return
        try:
            cleaned = clean_dead_jobs(work.table, self.clock.wall_ms())
        except PaimondError as error:
            log.warning("dead_jobs_sweep_failed", table=work.table.name,
                        error_kind=kind_of(error), error=f"{type(error).__name__}: {error}")
            return
        self._swept.add(key)
        if cleaned.records_removed:
            log.info("dead_jobs_cleaned", table=work.table.name, records=cleaned.records_removed,
                     files_deleted=cleaned.files_deleted)

    def _abandon_if_cancelled(self, *_: object) -> None:
        """A job's progress callback: abandon the job before it commits once cancelled."""
        if self._cancelled():
            raise JobCancelledError()

    def _run_job(self, work: TableWork, job: str,
                 between_rounds: Callable[[], None] | None = None) -> JobOutcome:
        """``between_rounds``: called where the job reports progress (an expiry, between its
        bounded rounds), after the cancellation check."""
        name = work.table.name
        spec = JOBS[job]
        # the daemon's typed section (enabled, interval_s and the job's own keys); bucket
        # tasks run in threads here (a process pool per job would cost more than it saves)
        settings = (work.job_settings or self.settings.jobs).by_name(job).settings
        if job == "compact":
            settings = dataclasses.replace(settings, use_processes=False)
        context = JobContext(self.clock, executor=daemon_executor(self.settings.executor),
                             progress=self._abandon_if_cancelled if between_rounds is None
                             else _then(self._abandon_if_cancelled, between_rounds),
                             lookup_cache=self._lookup_cache, picker_states=work.picker_states,
                             memory_budget=self.memory, regeneration=work.regeneration)
        job_id = uuid.uuid4().hex[:12]
        started = self.clock.monotonic_s()
        with structlog.contextvars.bound_contextvars(table=name, job=job, job_id=job_id,
                                                     base_snapshot_id=work.base_snapshot_id):
            self.events.emit(JobStarted(name, job, job_id))
            try:
                with commits_cancelled_when(self._cancelled):
                    report = run_job(spec, work.table, settings, context)
            except Exception as error:
                self.events.emit(JobFailed(name, job, job_id, self.clock.monotonic_s() - started,
                                           kind_of(error), f"{type(error).__name__}: {error}"))
                raise
            duration = self.clock.monotonic_s() - started
            if report.conflicts:
                self.events.emit(CommitConflicted(name, job, job_id, report.conflicts,
                                                  _retries(report)))
            self.events.emit(JobFinished(name, job, job_id, duration, report))
        return report


def _then(first: Callable[..., None], second: Callable[[], None]) -> Callable[..., None]:
    def progress(*args: object) -> None:
        first(*args)
        second()
    return progress


class _Stream:
    """One run's jobs on a table, in order: what they reported, and compaction again between
    them once writers went on (``pace.compact_again``), in the same stream under the lease."""

    def __init__(self, runner: Runner, work: TableWork) -> None:
        self.runner, self.work = runner, work
        self.reports: dict[str, JobOutcome] = {}
        self.finished_at: dict[str, float] = {}
        self.compacted: int | None = None  # the latest id a successful compaction covered
        self.compacted_at: int | None = None  # latest id when the last compaction ended
        self.lease_lost = False  # expired and taken over: no job more in this run

    def keep_lease(self) -> None:
        """Renew the table's lease between jobs; once another replica holds it, the run
        starts nothing more (its commits would race that replica's)."""
        if not self.runner.leases[self.work.warehouse].renew(self.work.table.name):
            self.lease_lost = True

    def compacted_by(self, report: JobOutcome, before: int | None) -> None:
        """A compaction of the run ended: its outcome decides whether it runs again."""
        after = self.work.table.snapshots.latest_id()
        if report.outcome == "success":
            self.compacted = _compacted_through(before, after, report)
            self.compacted_at = after
        else:  # conflicted or skipped: not again in this run (the next run retries)
            self.compacted_at = None

    def compact_if_due(self) -> None:
        """Compact now if writers committed enough since the run's last compaction. Never
        raises: a failed compaction (its event emitted) is left to the next run."""
        if self.compacted_at is None or self.runner._stopping() or self.lease_lost:
            return
        table = self.work.table
        try:
            before = table.snapshots.latest_id()
            if not pace.compact_again(self.compacted_at, before):
                return
            self.reports["compact"] = report = self.runner._run_job(self.work, "compact")
            self.finished_at["compact"] = self.runner.clock.wall_ms() / 1000
            self.compacted_by(report, before)
            self.keep_lease()
        except Exception:  # noqa: BLE001 - the job's failure was its event
            self.compacted_at = None


def _compacted_through(before: int | None, after: int | None, report: JobOutcome) -> int | None:
    """The latest snapshot a compaction accounted for: the one after it, unless writers
    committed while it ran (more than its own commit came): then the one it started from, so
    the table is due again for what they wrote."""
    own = 1 if report.written_bytes or report.read_rows else 0
    if before is None or after is None or after - before <= own:
        return after
    return before


def _retries(report: JobOutcome) -> int:
    """Re-plans a job made: every conflict it saw, except the last one of a job that gave up
    on it (outcome ``conflict``), was followed by a new attempt."""
    return report.conflicts if report.outcome != "conflict" else report.conflicts - 1
