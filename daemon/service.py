"""The long-running worker: discovers tables, decides what each needs, runs it with bounded
concurrency, one job stream per table at a time, under a warehouse lease; backs off and
quarantines failing tables. Stateless: everything is re-derived from table metadata.
"""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import structlog

from paimond.config.settings import JOB_NAMES, Settings
from paimond.daemon.jobs import JOBS, JobCancelledError, JobContext, JobReport
from paimond.daemon.lease import Leases
from paimond.daemon.logging import get_logger
from paimond.daemon.metrics import Metrics
from paimond.errors import PaimondError
from paimond.maintenance.compact import LookupCacheSettings
from paimond.maintenance.status import table_status
from paimond.table.catalog import Table, list_tables
from paimond.table.storage import Storage, open_storage

log = get_logger(__name__)


@dataclass
class TableState:
    table: Table
    warehouse: int
    last_snapshot_id: int | None = None
    compacted_snapshot_id: int | None = None
    last_run: dict[str, float] = field(default_factory=dict)
    failures: int = 0
    next_attempt_at: float = 0.0
    quarantined: bool = False
    error: str | None = None
    urgency: float = 0.0
    running: bool = False
    forced: bool = False


@dataclass(frozen=True, slots=True)
class TableRun:
    table: str
    reports: dict[str, JobReport]
    error: str | None = None


class Service:
    def __init__(self, settings: Settings, metrics: Metrics, *,
                 clock: Callable[[], float] = time.time, owner: str | None = None) -> None:
        self.settings, self.metrics, self.clock = settings, metrics, clock
        self._lookup_cache = (LookupCacheSettings(settings.lookup_cache_dir,
                                                  settings.lookup_cache_max_mb << 20)
                              if settings.lookup_cache_dir else None)
        self.owner = owner or f"paimond-{uuid.uuid4()}"
        self.storages: list[Storage] = [open_storage(w.uri, w.storage_options)
                                        for w in settings.warehouses]
        self.leases = [Leases(s, s.root, self.owner, settings.lease_ttl_s, clock)
                       for s in self.storages]
        self.tables: dict[str, TableState] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=settings.concurrency,
                                        thread_name_prefix="paimond-job")
        self._stopping = threading.Event()
        self._last_discovery = float("-inf")
        self.running_jobs = 0  # executing now (queued work is not counted)

    # ---------------------------------------------------------------- discovery

    def discover(self) -> None:
        found: dict[str, tuple[Table, int]] = {}
        for index, storage in enumerate(self.storages):
            try:
                for table in list_tables(storage, storage.root):
                    if self.settings.wants(table.name):
                        found[table.name] = (table, index)
            except PaimondError as error:
                log.warning("discovery_failed", warehouse=storage.root, error=str(error))
        with self._lock:
            for name, (table, index) in found.items():
                self.tables.setdefault(name, TableState(table, index))
            for name in set(self.tables) - set(found):
                if not self.tables[name].running:
                    del self.tables[name]
        self._last_discovery = self.clock()

    def ready(self) -> bool:
        """Config loaded and every warehouse reachable."""
        try:
            for storage in self.storages:
                storage.list_dir(storage.root)
        except PaimondError:
            return False
        return True

    # ---------------------------------------------------------------- deciding

    def _due_jobs(self, state: TableState, now: float) -> list[str]:
        latest = state.table.snapshots.latest_id()
        changed = latest != state.last_snapshot_id
        if changed:
            state.last_snapshot_id = latest
            if state.quarantined:  # a new snapshot clears quarantine
                state.quarantined, state.failures, state.next_attempt_at = False, 0, 0.0
            self._evaluate(state)
        if state.quarantined or now < state.next_attempt_at:
            return []
        due = []
        for job in JOB_NAMES:
            settings = self.settings.job(job)
            if not settings.enabled:
                continue
            last = state.last_run.get(job)
            if state.forced or last is None or now - last >= settings.interval_s or (
                    job == "compact" and latest != state.compacted_snapshot_id):
                due.append(job)
        return due

    def _evaluate(self, state: TableState) -> None:
        """Health gauges and urgency from the latest snapshot's metadata."""
        status = table_status(state.table, verify_files=False, parallelism=4)
        if status.error is not None:
            return
        runs = max((b.sorted_runs for b in status.buckets), default=0)
        stop = status.stop_trigger or 1
        trigger = status.compaction_trigger or 1
        debt = sum(b.size_bytes for b in status.buckets if b.sorted_runs > trigger)
        level0 = sum(lv.files for b in status.buckets for lv in b.levels if lv.level == 0)
        manifests = status.manifests
        self.metrics.set_table(
            state.table.name, level0_files=level0, max_sorted_runs=runs,
            compaction_trigger=trigger, stop_trigger=stop, compaction_debt_bytes=debt,
            snapshots=status.snapshot_count,
            manifest_files=(manifests.base_files + manifests.delta_files) if manifests else 0,
            dv_cardinality=sum(b.dv_deleted_rows for b in status.buckets))
        state.urgency = runs / stop + debt / 1e12

    # ---------------------------------------------------------------- running

    def tick(self) -> list[Future[TableRun]]:
        """Decide and submit due work, most urgent tables first."""
        if self._stopping.is_set():
            return []
        now = self.clock()
        if now - self._last_discovery >= self.settings.discovery_interval_s:
            self.discover()
        with self._lock:
            idle = [s for s in self.tables.values() if not s.running]
        candidates = []
        for state in idle:
            try:
                jobs = self._due_jobs(state, now)
            except PaimondError as error:
                self._failed(state, f"{type(error).__name__}: {error}", now)
                continue
            if jobs:
                candidates.append((state, jobs))
        candidates.sort(key=lambda c: -c[0].urgency)
        futures = []
        for state, jobs in candidates:  # the pool runs `concurrency` at once, in this order
            with self._lock:
                if state.running:
                    continue
                state.running, state.forced = True, False
            futures.append(self._pool.submit(self._run_table, state, jobs))
        return futures

    def trigger(self, table_name: str) -> Future[TableRun] | None:
        """Run every enabled job of a table now (clears quarantine and backoff)."""
        with self._lock:
            state = self.tables.get(table_name)
        if state is None:
            self.discover()
            state = self.tables.get(table_name)
        if state is None:
            return None
        state.quarantined, state.failures, state.next_attempt_at, state.forced = False, 0, 0.0, True
        while True:
            with self._lock:
                if not state.running:
                    state.running, state.forced = True, False
                    break
            time.sleep(0.05)  # a job of this table is queued or running: the trigger follows
        jobs = [j for j in JOB_NAMES if self.settings.job(j).enabled]
        return self._pool.submit(self._run_table, state, jobs)

    def _run_table(self, state: TableState, jobs: list[str]) -> TableRun:
        name = state.table.name
        leases = self.leases[state.warehouse]
        reports: dict[str, JobReport] = {}
        with self._lock:
            self.running_jobs += 1
        try:
            if self._stopping.is_set():
                return TableRun(name, {j: JobReport("skipped", "the daemon is stopping")
                                       for j in jobs})
            if not leases.acquire(name):
                return TableRun(name, {j: JobReport("skipped", "leased by another replica")
                                       for j in jobs})
            try:
                for job in jobs:
                    if self._stopping.is_set():
                        break
                    reports[job] = self._run_job(state, job)
                    leases.renew(name)
            finally:
                leases.release(name)
            state.failures, state.error = 0, None
            return TableRun(name, reports)
        except Exception as error:  # the job boundary: every failure is logged once, here
            message = f"{type(error).__name__}: {error}"
            self._failed(state, message, self.clock())
            return TableRun(name, reports, message)
        finally:
            with self._lock:
                state.running = False
                self.running_jobs -= 1
            self.metrics.set_quarantine({n for n, s in self.tables.items() if s.quarantined},
                                        set(self.tables))

    def _run_job(self, state: TableState, job: str) -> JobReport:
        name = state.table.name
        storage = self.storages[state.warehouse]
        ctx = JobContext(state.table, storage.root,
                         self.settings.warehouses[state.warehouse].storage_options,
                         self.settings.job(job), datetime.datetime.now, self._stopping.is_set,
                         self.settings.executor, self._lookup_cache)
        job_id = uuid.uuid4().hex[:12]
        started = time.monotonic()
        self.metrics.job_started(job, name)
        with structlog.contextvars.bound_contextvars(table=name, job=job, job_id=job_id,
                                                     base_snapshot_id=state.last_snapshot_id):
            try:
                report = JOBS[job](ctx)
            except JobCancelledError:
                report = JobReport("skipped", "abandoned: the daemon is stopping")
            except Exception:
                self.metrics.job_finished(job, name, "failure", time.monotonic() - started)
                raise
            duration = time.monotonic() - started
            self.metrics.job_finished(job, name, report.outcome, duration)
            self.metrics.io(job, name, read_bytes=report.read_bytes,
                            written_bytes=report.written_bytes, read_rows=report.read_rows,
                            written_rows=report.written_rows)
            if report.rows_superseded:
                self.metrics.rows_superseded.labels(name).inc(report.rows_superseded)
            for result, files in report.lookup_cache.items():
                if files:
                    self.metrics.lookup_cache_files.labels(name, result).inc(files)
            if report.conflicts:
                self.metrics.commit_conflicts.labels(name).inc(report.conflicts)
                self.metrics.commit_retries.labels(name).inc(report.conflicts)
            log.info("job_finished", outcome=report.outcome, duration_s=round(duration, 3),
                     read_rows=report.read_rows, written_rows=report.written_rows,
                     read_bytes=report.read_bytes, written_bytes=report.written_bytes,
                     detail=report.detail.splitlines()[0] if report.detail else "")
        state.last_run[job] = self.clock()
        if job == "compact" and report.outcome == "success":
            state.compacted_snapshot_id = state.table.snapshots.latest_id()
            state.last_snapshot_id = None  # re-evaluate the gauges after our own commit
        return report

    def _failed(self, state: TableState, message: str, now: float) -> None:
        state.failures += 1
        state.error = message
        backoff = min(self.settings.backoff_base_s * 2 ** (state.failures - 1),
                      self.settings.backoff_max_s)
        state.next_attempt_at = now + backoff
        if state.failures >= self.settings.quarantine_after:
            state.quarantined = True
        log.error("table_failed", table=state.table.name, error=message,
                  failures=state.failures, backoff_s=backoff, quarantined=state.quarantined)

    # ---------------------------------------------------------------- lifecycle

    def run_once(self) -> list[TableRun]:
        """One full pass over every table (every enabled job), then return."""
        self.discover()
        with self._lock:
            states = list(self.tables.values())
        for state in states:
            state.forced = True
        futures = []
        for state in states:
            with self._lock:
                state.running = True
            jobs = [j for j in JOB_NAMES if self.settings.job(j).enabled]
            futures.append(self._pool.submit(self._run_table, state, jobs))
        return [f.result() for f in futures]

    def stop(self, grace_s: float) -> bool:
        """Stop scheduling; wait up to ``grace_s`` for running jobs. True if all finished."""
        self._stopping.set()
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            with self._lock:
                if self.running_jobs == 0:
                    break
            time.sleep(0.05)
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            return self.running_jobs == 0

    def status(self) -> dict[str, object]:
        with self._lock:
            return {name: {"quarantined": s.quarantined, "failures": s.failures,
                           "error": s.error, "running": s.running,
                           "last_snapshot_id": s.last_snapshot_id,
                           "last_run": dict(s.last_run)} for name, s in self.tables.items()}
