"""Every metric paimond exports, on a registry passed in (prometheus-client).

Names: ``paimond_`` prefix, base units, ``_total`` counters. Labels are bounded: ``job``,
``outcome``, ``error_kind`` (errors.ErrorKind), ``table`` (only tables the config selects);
never partition, bucket or file. Job figures arrive as job events (:meth:`Metrics.on_event`).
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from paimond.clock import SYSTEM_CLOCK, Clock
from paimond.daemon.events import CommitConflicted, JobEvent, JobFailed, JobFinished, JobStarted
from paimond.daemon.job_tally import JobTally
from paimond.daemon.table_gauges import CHANGELOG, LEVEL0, POSTPONE, TableGauges

_DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


@dataclass
class Metrics:
    registry: CollectorRegistry
    clock: Clock = SYSTEM_CLOCK  # its monotonic reading times "seconds since last success"

    def __post_init__(self) -> None:
        r = self.registry
        self.up = Gauge("paimond_up", "1 while the daemon runs", registry=r)
        self.up.set(1)
        # per job and table: runs, bytes, rows, seconds, the last success (daemon.job_tally)
        self.tally = JobTally(self.clock)
        r.register(self.tally)
        self.job_duration = Histogram("paimond_job_duration_seconds", "Job duration, per job "
                                      "(per table: paimond_job_seconds_total)", ["job"],
                                      buckets=_DURATION_BUCKETS, registry=r)
        self.rows_superseded = Counter(
            "paimond_dv_rows_superseded", "Higher-level rows compaction marked in deletion "
            "vectors", ["table"], registry=r)
        self.lookup_cache_files = Counter(
            "paimond_lookup_cache_files", "Files of levels >= 1 whose keys a lookup took from "
            "the key-lookup cache (hit), cached first (miss), or found damaged and rebuilt "
            "(discarded)", ["table", "result"], registry=r)
        self.job_failures = Counter("paimond_job_failures", "Jobs failed, by the remedy their "
                                    "error calls for", ["job", "table", "error_kind"], registry=r)
        self.commit_conflicts = Counter("paimond_commit_conflicts", "Commits that conflicted",
                                        ["table"], registry=r)
        self.commit_retries = Counter("paimond_commit_retries", "Job attempts re-planned",
                                      ["table"], registry=r)
        self.quarantined_tables = Gauge("paimond_quarantined_tables", "Tables in quarantine",
                                        registry=r)
        self.table_quarantined = Gauge("paimond_table_quarantined", "1 if quarantined",
                                       ["table"], registry=r)
        # per table: its figures and the ages that grow with the clock (daemon.table_gauges)
        self.tables = TableGauges(self.clock)
        r.register(self.tables)

    def on_event(self, event: JobEvent) -> None:
        """The job events' subscriber."""
        if isinstance(event, JobStarted):
            self.job_started(event.job, event.table)
        elif isinstance(event, JobFailed):
            self.job_finished(event.job, event.table, "failure", event.duration_s)
            self.job_failures.labels(event.job, event.table, event.error_kind).inc()
        elif isinstance(event, CommitConflicted):
            self.commit_conflicts.labels(event.table).inc(event.conflicts)
            if event.retries:
                self.commit_retries.labels(event.table).inc(event.retries)
        elif isinstance(event, JobFinished):
            report, table = event.report, event.table
            self.job_finished(event.job, table, report.outcome, event.duration_s)
            self.io(event.job, table, read_bytes=report.read_bytes,
                    written_bytes=report.written_bytes, read_rows=report.read_rows,
                    written_rows=report.written_rows)
            if report.rows_superseded:
                self.rows_superseded.labels(table).inc(report.rows_superseded)
            for result, files in report.lookup_cache.items():
                if files:
                    self.lookup_cache_files.labels(table, result).inc(files)

    def job_started(self, job: str, table: str) -> None:
        self.tally.started(job, table)

    def job_finished(self, job: str, table: str, outcome: str, duration_s: float) -> None:
        self.tally.finished(job, table, outcome, duration_s)
        self.job_duration.labels(job).observe(duration_s)

    def io(self, job: str, table: str, *, read_bytes: int = 0, written_bytes: int = 0,
           read_rows: int = 0, written_rows: int = 0) -> None:
        self.tally.io(job, table, read_bytes, written_bytes, read_rows, written_rows)

    def set_table(self, table: str, **values: float) -> None:
        self.tables.set(table, **values)

    def set_level0_oldest(self, table: str, local_millis: int | None) -> None:
        """The creation time of the table's oldest level-0 file (data files record local
        wall-clock millis); the lag gauge ages with the clock between refreshes."""
        self.tables.set_age(table, LEVEL0, local_millis)

    def set_changelog_pending(self, table: str, local_millis: int | None) -> None:
        """The creation time of the oldest file still waiting for its changelog
        (table/status/health.py); the latency gauge ages with the clock between refreshes."""
        self.tables.set_age(table, CHANGELOG, local_millis)

    def set_postpone_oldest(self, table: str, local_millis: int | None) -> None:
        """The creation time of the table's oldest postpone file; the age gauge ages with the
        clock between refreshes."""
        self.tables.set_age(table, POSTPONE, local_millis)

    def set_quarantine(self, quarantined: set[str], known: set[str]) -> None:
        self.quarantined_tables.set(len(quarantined))
        for table in known:
            self.table_quarantined.labels(table).set(1 if table in quarantined else 0)
