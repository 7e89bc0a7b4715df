"""The long-running worker: discovers tables, decides what each needs (``evaluate``), runs it
with bounded concurrency (``runner``), one job stream per table at a time, under a warehouse
lease; backs off and quarantines failing tables. Stateless across restarts: everything is
re-derived from table metadata.

Lifecycle (uvicorn's ``Server`` shape): :meth:`Daemon.run` serves HTTP, schedules ticks and
blocks until :meth:`Daemon.stop`, which a signal handler may call: it only records the request.
Shutdown then stops scheduling, lets running jobs (and so a running commit) finish within the
grace period, and cancels what remains; a second stop request ends the wait at once.

Every field of a :class:`TableState` but ``table`` and ``warehouse`` is read and written under
the daemon's lock; storage is never touched while holding it.
"""

from __future__ import annotations

import datetime
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from paimond.clock import SYSTEM_CLOCK, Clock
from paimond.config.settings import Settings
from paimond.daemon import compact_skip, evaluate, pace
from paimond.daemon.admission import Admission, Admissions
from paimond.daemon.discovery import check_warehouses, find_tables, unready_reason
from paimond.daemon.events import Events, log_event
from paimond.daemon.http import HttpServer
from paimond.daemon.lease import Leases
from paimond.daemon.logging import get_logger
from paimond.daemon.metrics import Metrics
from paimond.daemon.runner import Runner, TableRun, TableWork, skipped
from paimond.daemon.scheduler import start_scheduler
from paimond.daemon.signals import stop_on_signals
from paimond.daemon.status_view import table_json
from paimond.daemon.table_policy import Policies
from paimond.daemon.table_watch import Watcher
from paimond.errors import PaimondError, kind_of
from paimond.format.schema import TableSchema
from paimond.maintenance.jobs import preload as preload_jobs
from paimond.table.catalog import Table
from paimond.table.job_records import set_replica
from paimond.table.semantic_options import fingerprint
from paimond.table.storage import Storage, open_storage

log = get_logger(__name__)

_STOP, _IDLE = "stop", "idle"
_STOPPING = "the daemon is stopping"


@dataclass
class TableState:
    table: Table
    warehouse: int
    last_snapshot_id: int | None = None
    compacted_snapshot_id: int | None = None
    last_run: dict[str, float] = field(default_factory=dict)  # job -> wall seconds
    failures: int = 0
    next_attempt_at: float = 0.0
    quarantined: bool = False
    error: str | None = None
    urgency: float = 0.0
    running: bool = False  # submitted: queued or running
    triggered: Future[TableRun] | None = None  # a trigger that came while running: runs next
    picker_states: dict[Any, Any] = field(default_factory=dict)  # compaction's, across runs
    refused: dict[str, str] = field(default_factory=dict)  # job -> fingerprint it refused
    watcher: Watcher = field(default_factory=Watcher)  # regeneration items, lag and health
    gauged_snapshot_id: int | None = None  # the snapshot its gauges were last read at
    gauges: dict[str, float] = field(default_factory=dict)  # its health figures, as last read
    active: bool = False  # moved at its last check: watched between ticks (daemon.pace)
    moved_at: float = float("-inf")  # wall seconds a check last saw it move (daemon.pace)
    duties: bool = False  # running, with jobs besides compaction (daemon.pace): counted
    compaction_due: bool = False  # at its compaction trigger, by the latest gauges
    shown_needs: dict[str, float] | None = None  # its need gauges as last exported
    # its last compaction found nothing to do: skipped while this holds (daemon.compact_skip)
    unchanged: compact_skip.Unchanged | None = None

    def standing(self) -> evaluate.Standing:
        return evaluate.Standing(self.last_snapshot_id, self.compacted_snapshot_id,
                                 dict(self.last_run), self.failures, self.next_attempt_at,
                                 self.quarantined, dict(self.refused),
                                 self.watcher.unsettled())


class Daemon:
    def __init__(self, settings: Settings, metrics: Metrics, *, clock: Clock = SYSTEM_CLOCK,
                 owner: str | None = None) -> None:
        preload_jobs()  # no job's first import in one thread while another forks a pool
        self.settings, self.metrics, self.clock = settings, metrics, clock
        self.owner = owner or settings.replica_id  # stable: a restart takes its leases back
        set_replica(self.owner)  # and its killed jobs' records are dead at once
        self.storages: list[Storage] = [open_storage(w.uri, w.storage_options)
                                        for w in settings.warehouses]
        self.leases = [Leases(s, s.root, self.owner, settings.lease_ttl_s, self._wall_s)
                       for s in self.storages]
        self.tables: dict[str, TableState] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=settings.concurrency,
                                        thread_name_prefix="paimond-job")
        self._stopping = threading.Event()  # no new work
        self._cancelled = threading.Event()  # running jobs abandon before committing
        self._requests: queue.SimpleQueue[str] = queue.SimpleQueue()  # reentrant: signal-safe
        self._last_discovery = float("-inf")
        # a table's quarantine or the set of tables changed since the gauges were last set:
        # only then are they set again (each run's end, else O(tables) per run)
        self._quarantine_changed = True
        self.running_jobs = 0  # table runs executing now (queued work is not counted)
        self._duty_runs = 0  # submitted runs with jobs besides compaction (TableState.duties)
        self.forced = False
        # serving (``run``): re-check a table right after its run, watch the ones near their
        # trigger between ticks (daemon.pace); a one-shot pass does neither
        self.keep_up = False  # the last shutdown was cut short by a second stop request
        self.events = Events(metrics.on_event, log_event)
        self.runner = Runner(settings, self.leases, self.events, clock,
                             stopping=self._stopping.is_set, cancelled=self._cancelled.is_set)
        self._policy = evaluate.BackoffPolicy(settings.backoff_base_s, settings.backoff_max_s,
                                              settings.quarantine_after)
        self.policies = Policies(settings)  # [[policies]], pauses, shares, job outcomes
        self.admissions = Admissions()

    def _wall_s(self) -> float:
        return self.clock.wall_ms() / 1000

    # ---------------------------------------------------------------- discovery

    def discover(self) -> None:
        with self._lock:
            known = set(self.tables)  # found before: their directories are not listed again
        found = find_tables(self.storages, self.settings.wants, known)
        with self._lock:
            for name, (table, index) in found.items():
                if name not in self.tables:
                    self.tables[name] = TableState(table, index)
                    self._quarantine_changed = True
            gone = [n for n in set(self.tables) - set(found) if not self.tables[n].running]
            for name in gone:  # a running table goes at the next pass
                del self.tables[name]
                self._quarantine_changed = True
            self._last_discovery = self._wall_s()
        self.policies.forget(gone)

    def ready(self) -> bool:
        """Config loaded and every warehouse there and reachable."""
        return self.unready_reason() is None

    def unready_reason(self) -> str | None:
        """Why the daemon is not ready (a warehouse that does not exist or cannot be
        listed), or None."""
        return unready_reason(self.storages)

    def check_warehouses(self, *, unavailable_ok: bool = True) -> None:
        """ConfigError naming a configured warehouse that does not exist (a local directory,
        an S3 bucket): at startup, a configuration error rather than an empty warehouse. A
        store that cannot be reached is logged, or raised unless ``unavailable_ok``."""
        check_warehouses(self.storages, unavailable_ok=unavailable_ok)

    # ---------------------------------------------------------------- deciding

    def _enabled_jobs(self, table: str) -> tuple[str, ...]:
        """The jobs the table's policy (else ``[jobs]``) enables; none while it is paused."""
        return () if self.policies.paused(table) else self.policies.enabled_jobs(table)

    def _decide(self, state: TableState, standing: evaluate.Standing, now: float
                ) -> tuple[str, ...]:
        """Storage reads (latest id, status) outside the lock; the decision applied under it."""
        latest = state.table.watched_latest_id()  # idle: one read of LATEST
        # a table some job refused: its schema tells whether the refusal still holds
        current = fingerprint(state.table.latest_schema()) if standing.refused else None
        decision = evaluate.decide(standing, latest, now,
                                   self.policies.schedules(state.table.name), current)
        self._refresh_gauges(state, latest)  # the watcher's schema check comes first
        jobs = decision.jobs
        with self._lock:
            if decision.new_snapshot:
                state.last_snapshot_id, state.moved_at = latest, now
            if decision.cleared:
                state.quarantined, state.failures, state.next_attempt_at = False, 0, 0.0
                self._quarantine_changed = True
            unchanged = state.unchanged if "compact" in jobs else None
            if unchanged is not None and not unchanged.holds(latest, state.watcher.schema_id,
                                                             now):
                state.unchanged = unchanged = None
            if unchanged is not None:  # nothing its plan depends on changed since
                jobs = tuple(job for job in jobs if job != "compact")
                state.last_run["compact"] = now  # looked at again after its interval
        if unchanged is not None:
            log.debug("compaction_skipped", table=state.table.name,
                      snapshot_id=unchanged.snapshot_id, until=unchanged.until,
                      reason=unchanged.describe())
        return () if self.policies.paused(state.table.name) else jobs

    def _refresh_gauges(self, state: TableState, latest: int | None) -> None:
        """Read the table's health figures again if it moved since they were read, idle or
        running: the gauges follow what writers and jobs do. Its options changing (a new
        schema) or a periodic recheck reads them too (table_watch: regeneration, lag)."""
        now_ms, name = self.clock.wall_ms(), state.table.name
        with self._lock:
            moved = latest != state.gauged_snapshot_id
            if not moved:
                state.active = False
        if not moved and not state.watcher.due(state.table, now_ms):
            self._show_needs(state)  # passes since
            return
        health = evaluate.health(state.watcher.read(state.table, now_ms))
        with self._lock:
            state.gauged_snapshot_id = latest
            state.active = moved
            if health is not None:  # a streaming reader waiting for changelog adds to it
                state.urgency = health.urgency + evaluate.changelog_urgency(
                    state.watcher.last.changelog_pending_millis, self.clock.local_ms())
                state.gauges = dict(health.gauges)
                state.compaction_due = pace.compaction_due(health.gauges)
        if health is not None:
            self.metrics.set_table(name, **health.gauges, **state.watcher.last.gauges)
            self.metrics.set_level0_oldest(name, state.watcher.last.oldest_level0_millis)
            self.metrics.set_changelog_pending(name, state.watcher.last.changelog_pending_millis)
        self._show_needs(state)

    def _show_needs(self, state: TableState) -> None:
        """The table's need gauges, set only when they changed (every check asks)."""
        needs = state.watcher.need_gauges()
        if needs != state.shown_needs:
            self.metrics.set_table(state.table.name, **needs)
            state.shown_needs = needs

    def _failed(self, state: TableState, message: str) -> None:
        """Back off after a failure that was already logged where it happened."""
        with self._lock:
            state.failures += 1
            state.error = message
            backoff = evaluate.backoff(state.failures, self._policy)
            state.next_attempt_at = self._wall_s() + backoff.delay_s
            state.quarantined = backoff.quarantined
            self._quarantine_changed = True
            failures = state.failures
            state.unchanged = None
        log.warning("table_backed_off", table=state.table.name, failures=failures,
                    backoff_s=backoff.delay_s, quarantined=backoff.quarantined)

    # ---------------------------------------------------------------- running

    def tick(self) -> list[Future[TableRun]]:
        """Decide and submit due work, most urgent tables first."""
        if self._stopping.is_set():
            return []
        now = self._wall_s()
        with self._lock:
            discover = now - self._last_discovery >= self.settings.discovery_interval_s
        if discover:
            self.discover()
        with self._lock:
            idle = [(s, s.standing()) for s in self.tables.values() if not s.running]
            busy = [s for s in self.tables.values() if s.running]
        self._gauge_running(busy)
        return self._submit_due(idle, now)

    def watch(self) -> list[Future[TableRun]]:
        """Between ticks: an idle table that moved lately (daemon.pace) and may have reached its
        compaction trigger since (daemon.pace) gets its gauges read again, and runs at once
        when at the trigger. One read of LATEST per active table; idle tables cost nothing."""
        if self._stopping.is_set():
            return []
        since = self._wall_s() - pace.ACTIVE_CHECKS * self.settings.check_interval_s
        with self._lock:
            active = [(s, s.gauged_snapshot_id, dict(s.gauges)) for s in self.tables.values()
                      if (s.active or s.moved_at >= since) and not s.running]
        due = []
        for state, gauged, gauges in active:
            try:
                latest = state.table.watched_latest_id()
                if latest == gauged or not pace.may_be_due(gauges, (latest or 0) - (gauged or 0)):
                    continue
                self._refresh_gauges(state, latest)
            except PaimondError:
                continue  # the next tick reports it
            with self._lock:
                if state.compaction_due:
                    due.append((state, state.standing()))
        return self._submit_due(due, self._wall_s())

    def _gauge_running(self, states: list[TableState]) -> None:
        for state in states:
            try:
                self._refresh_gauges(state, state.table.snapshots.latest_id())
            except PaimondError as error:  # a running table's figures wait for its next check
                log.warning("table_gauges_failed", table=state.table.name,
                            error_kind=kind_of(error), error=f"{type(error).__name__}: {error}")

    def _submit_due(self, idle: list[tuple[TableState, evaluate.Standing]], now: float
                    ) -> list[Future[TableRun]]:
        candidates = []
        for state, standing in idle:
            try:
                jobs = self._decide(state, standing, now)
            except PaimondError as error:
                message = f"{type(error).__name__}: {error}"
                log.error("table_check_failed", table=state.table.name,
                          error_kind=kind_of(error), error=message)
                self._failed(state, message)
                continue
            if jobs:
                candidates.append((state, jobs))
        with self._lock:
            candidates.sort(key=lambda c: -c[0].urgency)
            running = [n for n, s in self.tables.items() if s.running]
        # a policy's concurrency share: the others wait for a later tick
        admitted = set(self.policies.admit([s.table.name for s, _ in candidates], running))
        futures = []
        for state, jobs in candidates:  # the pool runs `concurrency` at once, in this order
            if state.table.name not in admitted:
                continue
            with self._lock:
                # a wave of due duties never queues compaction behind it (compaction alone
                # is never held back; the running duties are counted as runs start and end)
                if self.keep_up and any(job != "compact" for job in jobs):
                    jobs = pace.paced_jobs(jobs, self._duty_runs, self.settings.concurrency)
                if not jobs or state.running or not self._current(state):
                    continue
                state.running = True
            futures.append(self._submit(state, jobs))
        return futures

    def trigger(self, table_name: str) -> Future[TableRun] | None:
        """Run every enabled job of a table now (clears quarantine and backoff). A table that
        is running gets the triggered run right after its current one."""
        with self._lock:
            known = table_name in self.tables
        if not known:
            self.discover()
        with self._lock:
            state = self.tables.get(table_name)
            if state is None:
                return None
            state.quarantined, state.failures, state.next_attempt_at = False, 0, 0.0
            self._quarantine_changed = True
            state.unchanged = None  # a trigger always plans
            if state.running:
                if state.triggered is None:
                    state.triggered = Future()
                return state.triggered
            state.running = True
        return self._submit(state, self._enabled_jobs(table_name))

    def _current(self, state: TableState) -> bool:
        """Still the table's state: discovery may have dropped it (and re-added a new one)
        since it was read. Under the lock."""
        return self.tables.get(state.table.name) is state

    def _submit(self, state: TableState, jobs: tuple[str, ...],
                answer: Future[TableRun] | None = None) -> Future[TableRun]:
        """Queue a run of a table already marked running. ``answer`` always resolves, with a
        skipped run if the pool cancels the work at shutdown."""
        answer = Future() if answer is None else answer
        with self._lock:
            state.duties = any(job != "compact" for job in jobs)
            self._duty_runs += state.duties
        try:
            work = self._pool.submit(self._run, state, jobs)
        except RuntimeError:  # the pool is shut down
            self._settle(state, None, jobs, answer)
            return answer
        work.add_done_callback(lambda done: self._settle(state, done, jobs, answer))
        return answer

    def _run(self, state: TableState, jobs: tuple[str, ...]) -> TableRun:
        with self._lock:
            self.running_jobs += 1
            base, pickers = state.last_snapshot_id, state.picker_states
        name, now, local = state.table.name, self._wall_s(), self.clock.local_now()
        try:
            if self._stopping.is_set():
                return skipped(name, jobs, _STOPPING)
            self.policies.started(name, now)
            schema = _schema_of(state.table)
            chosen = self.policies.for_run(name, dict(schema.options) if schema else {}, now)
            attempts = compact_skip.attempts(pickers)
            run = self.runner.run_table(TableWork(state.table, state.warehouse, jobs, base,
                                                  pickers, chosen.jobs,
                                                  regeneration=state.watcher.memory))
            self._record(state, run)
            self._remember_unchanged(state, run, base, schema, now, local, attempts)
            self.policies.record(name, jobs, run.reports, run.error, self._wall_s(),
                                 chosen.jobs.compact.full)
            return run
        finally:
            with self._lock:
                self.running_jobs -= 1
                idle = self.running_jobs == 0
            if idle and self._stopping.is_set():
                self._requests.put(_IDLE)  # wakes a shutdown waiting for running jobs

    def _record(self, state: TableState, run: TableRun) -> None:
        with self._lock:
            state.last_run.update(run.finished_at)
            for job, report in run.reports.items():
                if report.refused is not None:
                    state.refused[job] = report.refused
                else:
                    state.refused.pop(job, None)
            if run.compacted_snapshot_id is not None:
                state.compacted_snapshot_id = run.compacted_snapshot_id
                # re-evaluate the gauges after our own commit; a run that only compacted and
                # found the snapshot its gauges were read at changed nothing (idle tables)
                if not (run.reports.keys() == {"compact"}
                        and run.compacted_snapshot_id == state.gauged_snapshot_id):
                    state.last_snapshot_id = None
                    state.gauged_snapshot_id = None
            if run.error is None and run.finished_at:
                state.failures, state.error = 0, None
        if run.error is not None:
            self._failed(state, run.error)

    def _remember_unchanged(self, state: TableState, run: TableRun, base: int | None,
                            schema: TableSchema | None, started: float,
                            local: datetime.datetime, attempts: dict[object, object]) -> None:
        """After a run: whether its compaction found nothing to do at the snapshot the run
        started from (no task, no commit by anyone, no failure), and until when the next
        periodic one is skipped (daemon.compact_skip)."""
        report = run.reports.get("compact")
        unchanged = None
        if (report is not None and schema is not None and run.error is None
                and report.outcome == "success" and run.compacted_snapshot_id == base
                and not (report.read_rows or report.written_bytes or report.conflicts)):
            policy = self.policies.policy(state.table.name)
            horizon = compact_skip.unchanged_until(
                schema, started, local, policy.full_compaction_window if policy else None,
                attempts, compact_skip.attempts(state.picker_states))
            if horizon is not None:
                unchanged = compact_skip.Unchanged(base, schema.id, started, *horizon)
        with self._lock:
            if report is not None or run.error is not None:
                state.unchanged = unchanged

    def _settle(self, state: TableState, work: Future[TableRun] | None,
                jobs: tuple[str, ...], answer: Future[TableRun]) -> None:
        """A run ended (or was cancelled): free the table, answer, start a waiting trigger."""
        if work is None or work.cancelled():
            run = skipped(state.table.name, jobs, _STOPPING)
        else:
            run = work.result()
        with self._lock:
            self._duty_runs -= state.duties
            state.duties = False
            follow, state.triggered = state.triggered, None
            state.running = follow is not None and not self._stopping.is_set()
            shown = None
            if self._quarantine_changed:
                self._quarantine_changed = False
                shown = ({n for n, s in self.tables.items() if s.quarantined}, set(self.tables))
        if shown is not None:
            self.metrics.set_quarantine(*shown)
        answer.set_result(run)
        if follow is not None:
            if state.running:
                self._submit(state, self._enabled_jobs(state.table.name), follow)
            else:
                follow.set_result(skipped(state.table.name, (), _STOPPING))
        elif self.keep_up and run.error is None and run.finished_at:
            self._recheck(state)

    def _recheck(self, state: TableState) -> None:
        """Right after a run: writers that committed meanwhile may have brought the table to
        its compaction trigger again; then it runs again now rather than at the next tick."""
        if self._stopping.is_set():
            return
        try:
            latest = state.table.snapshots.latest_id()
            self._refresh_gauges(state, latest)
        except PaimondError:
            return  # the next tick reports it
        with self._lock:
            if latest != state.last_snapshot_id:  # moved by the run or by writers meanwhile
                state.moved_at = self._wall_s()  # watched until the writers go quiet
            due = state.compaction_due and not state.running
            standing = state.standing()
        if due:
            self._submit_due([(state, standing)], self._wall_s())

    def run_once(self) -> list[TableRun]:
        """One full pass over every table (every enabled job), then return. ConfigError for
        a warehouse that does not exist, StorageUnavailableError for one that cannot be
        reached (a pass that saw no table is not a pass that found none)."""
        self.check_warehouses(unavailable_ok=False)
        self.discover()
        futures = []
        with self._lock:
            states = [s for s in self.tables.values() if not s.running]
            for state in states:
                state.running = True
        for state in states:  # a paused table's run skips every job
            futures.append(self._submit(state, self._enabled_jobs(state.table.name)))
        return [f.result() for f in futures]

    def status(self) -> dict[str, object]:
        """``/status``: each table's state, effective policy, and per job its last outcome,
        next due time and why (``status_view``)."""
        now = self._wall_s()
        with self._lock:
            states = [(n, s, s.standing(), s.running, s.error, s.urgency,
                       s.unchanged if s.unchanged is not None and s.unchanged.holds(
                           s.last_snapshot_id, s.watcher.schema_id, now) else None)
                      for n, s in self.tables.items()]
        out: dict[str, object] = {}
        for name, state, standing, running, error, urgency, unchanged in states:
            out[name] = table_json(
                standing, running=running, error=error, urgency=urgency,
                policy=self.policies.policy(name),
                chosen=self.policies.for_run(name, _options_of(state.table), now),
                schedules=self.policies.schedules(name), records=self.policies.records(name),
                paused=self.policies.paused(name), waiting=self.policies.waiting(name), now=now,
                unchanged=unchanged.describe() if unchanged is not None else None)
        return out

    def known(self, table_name: str) -> bool:
        """Whether the daemon maintains ``db.table`` (discovering once when not yet seen)."""
        with self._lock:
            if table_name in self.tables:
                return True
        self.discover()
        with self._lock:
            return table_name in self.tables

    def pause(self, table_name: str) -> bool:
        """Give the table no further job until resumed (a running job finishes). False for a
        table the daemon does not maintain. In memory: a restart forgets it."""
        if not self.known(table_name):
            return False
        at = datetime.datetime.fromtimestamp(self._wall_s(), datetime.timezone.utc)
        self.policies.pause(table_name, f"paused through the API at {at:%Y-%m-%d %H:%M:%S} UTC")
        log.info("table_paused", table=table_name)
        return True

    def admission(self, table_name: str) -> Admission | None:
        """Whether a write-only writer may commit to the table now; None if not maintained."""
        if not self.known(table_name):
            return None
        with self._lock:
            state = self.tables.get(table_name)
        if state is None:
            return None
        table = state.table
        policy = self.policies.policy(table_name)
        limit = policy.max_compaction_debt_mb if policy is not None else None
        return self.admissions.check(table, None if limit is None else limit << 20)

    # ---------------------------------------------------------------- lifecycle

    def run(self, on_serving: Callable[[str], None] | None = None) -> bool:
        """Serve HTTP and tick until :meth:`stop` (SIGTERM/SIGINT in the main thread), then
        shut down. True if every running job finished within the grace period. Raises
        ConfigError when a warehouse does not exist or the HTTP address cannot be bound.
        ``on_serving`` gets the base URL."""
        settings = self.settings
        self.check_warehouses()
        http = HttpServer(self, self.metrics.registry, settings.http_host, settings.http_port,
                          settings.trigger_token)
        http.start()
        host, port = http.address
        url = f"http://{host}:{port}"
        log.info("daemon_started", metrics_url=f"{url}/metrics",
                 warehouses=[w.uri for w in settings.warehouses], owner=self.owner)
        if on_serving is not None:
            on_serving(url)
        try:
            with stop_on_signals(self.stop):
                self.keep_up = True
                scheduler = start_scheduler(self.tick, settings.check_interval_s, self.clock,
                                            self.watch,
                                            pace.watch_interval_s(settings.check_interval_s))
                try:
                    while self._requests.get() != _STOP:
                        pass  # an "idle" left from an earlier shutdown: not a request
                finally:
                    scheduler.shutdown(wait=False)
                log.info("daemon_stopping", grace_s=settings.grace_s)
                clean = self.shutdown(settings.grace_s)
        finally:
            http.stop()
        log.info("daemon_stopped", clean=clean, forced=self.forced)
        return clean

    @property
    def stopping(self) -> threading.Event:
        """Set once shutdown began: nothing new is scheduled."""
        return self._stopping

    def stop(self) -> None:
        """Ask the daemon to stop; asking again while it drains cuts the grace period short.
        Safe in a signal handler: it only queues the request."""
        self._requests.put(_STOP)

    def shutdown(self, grace_s: float) -> bool:
        """Stop scheduling; wait up to ``grace_s`` for running jobs (or until a stop request),
        then cancel the rest. True if nothing was left running."""
        self._stopping.set()
        deadline = self.clock.monotonic_s() + grace_s
        while True:
            with self._lock:
                if self.running_jobs == 0:
                    break
            remaining = deadline - self.clock.monotonic_s()
            if remaining <= 0:
                break
            try:
                request = self._requests.get(timeout=remaining)
            except queue.Empty:
                break
            if request == _STOP:
                self.forced = True
                log.warning("daemon_shutdown_forced")
                break
        self._cancelled.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            return self.running_jobs == 0


def _options_of(table: Table) -> dict[str, str]:
    """The table's options, or none when its schema cannot be read (its jobs then fail and
    say why)."""
    schema = _schema_of(table)
    return dict(schema.options) if schema is not None else {}


def _schema_of(table: Table) -> TableSchema | None:
    """The table's latest schema, or None when it cannot be read."""
    try:
        return table.latest_schema()
    except PaimondError:
        return None
