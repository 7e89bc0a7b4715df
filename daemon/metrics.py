"""Every metric paimond exports, on a registry passed in (prometheus-client).

Names: ``paimond_`` prefix, base units, ``_total`` counters. Labels are bounded: ``job``,
``outcome``, ``error_kind`` (errors.ErrorKind), ``table`` (only tables the config selects);
never partition, bucket or file. Job figures arrive as job events (:meth:`Metrics.on_event`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from paimond.clock import SYSTEM_CLOCK, Clock
from paimond.daemon.events import CommitConflicted, JobEvent, JobFailed, JobFinished, JobStarted
from paimond.daemon.job_tally import JobTally

_DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


@dataclass
class Metrics:
    registry: CollectorRegistry
    clock: Clock = SYSTEM_CLOCK  # its monotonic reading times "seconds since last success"
    _oldest_level0: dict[str, int | None] = field(default_factory=dict)  # local wall millis
    _changelog_pending: dict[str, int | None] = field(default_factory=dict)  # local wall millis
    _postpone_oldest: dict[str, int | None] = field(default_factory=dict)  # local wall millis

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
        gauges = {
            "level0_files": "Level-0 files of the table",
            "max_sorted_runs": "Most sorted runs in any bucket",
            "compaction_trigger": "num-sorted-run.compaction-trigger",
            "stop_trigger": "num-sorted-run.stop-trigger",
            "compaction_debt_bytes": "Bytes in buckets past the compaction trigger",
            "snapshots": "Snapshots retained",
            "manifest_files": "Manifest files of the latest snapshot",
            "dv_cardinality": "Rows deleted by deletion vectors",
            "deleted_row_ratio": "Rows deleted by deletion vectors among the live files' rows",
            "small_files": "Data files under the compaction file size, beyond one per bucket",
            "health": "Health figure, 100 (healthy) to 0: sorted runs vs stop trigger, small "
                      "files, snapshots, manifests (table/status/health.py)",
            "stale_index_files": "Live data files whose file index differs from the "
                                 "file-index options, left for rewrite_index",
            "buckets_missing_vectors": "Buckets of a deletion-vector table whose vectors are "
                                       "missing, left for rebuild_dv",
            "postpone_rows": "Rows in postpone buckets (bucket = -2), which no reader sees "
                             "until compaction moves them into real buckets",
        }
        self.table_gauges = {name: Gauge(f"paimond_table_{name}", help_text, ["table"], registry=r)
                             for name, help_text in gauges.items()}
        self._lag = Gauge("paimond_table_level0_lag_seconds", "Seconds since the oldest "
                          "level-0 file not yet compacted was written (0: none)", ["table"],
                          registry=r)
        self._changelog_latency = Gauge(
            "paimond_table_changelog_latency_seconds", "Tables with changelog-producer lookup "
            "or full-compaction: seconds since the oldest data file whose changelog compaction "
            "has not produced yet was written (0: none)", ["table"], registry=r)
        self._postpone_age = Gauge(
            "paimond_table_postpone_age_seconds", "Postpone-bucket tables: seconds since the "
            "oldest postpone file, whose rows no reader sees yet, was written (0: none)",
            ["table"], registry=r)

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
        for name, value in values.items():
            self.table_gauges[name].labels(table).set(value)

    def set_level0_oldest(self, table: str, local_millis: int | None) -> None:
        """The creation time of the table's oldest level-0 file (data files record local
        wall-clock millis); the lag gauge ages with the clock between refreshes."""
        if table not in self._oldest_level0:
            self._lag.labels(table).set_function(lambda: self._level0_lag_s(table))
        self._oldest_level0[table] = local_millis

    def _level0_lag_s(self, table: str) -> float:
        oldest = self._oldest_level0.get(table)
        return 0.0 if oldest is None else max(0.0, (self.clock.local_ms() - oldest) / 1000)

    def set_changelog_pending(self, table: str, local_millis: int | None) -> None:
        """The creation time of the oldest file still waiting for its changelog
        (table/status/health.py); the latency gauge ages with the clock between refreshes."""
        if table not in self._changelog_pending:
            self._changelog_latency.labels(table).set_function(
                lambda: self._changelog_latency_s(table))
        self._changelog_pending[table] = local_millis

    def _changelog_latency_s(self, table: str) -> float:
        pending = self._changelog_pending.get(table)
        return 0.0 if pending is None else max(0.0, (self.clock.local_ms() - pending) / 1000)

    def set_postpone_oldest(self, table: str, local_millis: int | None) -> None:
        """The creation time of the table's oldest postpone file; the age gauge ages with the
        clock between refreshes."""
        if table not in self._postpone_oldest:
            self._postpone_age.labels(table).set_function(lambda: self._postpone_age_s(table))
        self._postpone_oldest[table] = local_millis

    def _postpone_age_s(self, table: str) -> float:
        oldest = self._postpone_oldest.get(table)
        return 0.0 if oldest is None else max(0.0, (self.clock.local_ms() - oldest) / 1000)

    def set_quarantine(self, quarantined: set[str], known: set[str]) -> None:
        self.quarantined_tables.set(len(quarantined))
        for table in known:
            self.table_quarantined.labels(table).set(1 if table in quarantined else 0)
