"""The long-running worker: discovers tables, decides what each needs (``evaluate``), runs it
with bounded concurrency (``runner``), one job stream per table at a time, under a warehouse
lease; backs off and quarantines failing tables. Stateless across restarts: everything is
re-derived from table metadata.

A :class:`Daemon` is the work itself and holds its collaborators: the runs in the pool
(:class:`TableRuns`, daemon/table_runs.py), each table's :class:`TableState`
(daemon/tables/state.py) and the job runner (daemon/runner.py). A ``Lifecycle``
(daemon/lifecycle.py) holds a daemon and serves it until stopped; ``Control``
(daemon/http/control.py) is what operators ask of it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future

from paimond.clock import SYSTEM_CLOCK, Clock
from paimond.config.settings import Settings
from paimond.daemon.discovery import (
    BRANCH_DISCOVERY_S,
    check_warehouses,
    find_tables,
    unready_reason,
    warehouse_unready,
)
from paimond.daemon.events import Events, log_event
from paimond.daemon.history import History
from paimond.daemon.lease import Leases
from paimond.daemon.logging import get_logger
from paimond.daemon.metrics import Metrics
from paimond.daemon.runner import Runner, TableRun, skipped
from paimond.daemon.table_runs import STOPPING, TableRuns
from paimond.daemon.tables import compact_skip, duty_skip, evaluate, pace
from paimond.daemon.tables.admission import Admissions
from paimond.daemon.tables.policy import Policies
from paimond.daemon.tables.state import TableState
from paimond.errors import PaimondError, kind_of
from paimond.maintenance.jobs import preload as preload_jobs
from paimond.table.catalogs.catalog_storage import with_catalog
from paimond.table.commit.job_records import set_replica
from paimond.table.options.semantic import fingerprint
from paimond.table.storage.interface import Storage, open_storage

log = get_logger(__name__)


class Daemon:
    def __init__(self, settings: Settings, metrics: Metrics, *, clock: Clock = SYSTEM_CLOCK,
                 owner: str | None = None) -> None:
        preload_jobs()  # no job's first import in one thread while another forks a pool
        self.settings, self.metrics, self.clock = settings, metrics, clock
        self.owner = owner or settings.replica_id  # stable: a restart takes its leases back
        set_replica(self.owner)  # and its killed jobs' records are dead at once
        self.storages: list[Storage] = [
            with_catalog(open_storage(w.uri, w.storage_options), w.catalog,
                         secret=w.catalog_secret, clock=clock) for w in settings.warehouses]
        self.leases = [Leases(s, s.root, self.owner, settings.lease_ttl_s, self.wall_s)
                       for s in self.storages]
        self.tables: dict[str, TableState] = {}
        # the tables that moved lately or are active: what the watch looks at (pace)
        self._moving: dict[str, TableState] = {}
        self.lock = threading.Lock()  # the tables and every TableState's fields
        self._stopping = threading.Event()  # no new work
        self._cancelled = threading.Event()  # running jobs abandon before committing
        self._last_discovery = float("-inf")
        self._branches_listed_at = float("-inf")
        # a table's quarantine or the set of tables changed since the gauges were last set:
        # only then are they set again (each run's end, else O(tables) per run)
        self._quarantine_changed = True
        self._duty_runs = 0  # submitted runs with jobs besides compaction (TableState.duties)
        # tables whose due duties got no turn at their check (TableState.awaits_turn) and run
        # nothing now, first come first: each run that ends hands free turns on (_next_duties)
        self._duty_queue: dict[str, TableState] = {}
        # serving (``Lifecycle.run``): re-check a table right after its run, watch the ones near
        # their trigger between ticks (daemon.tables.pace); a one-shot pass does neither
        self.keep_up = False
        self.history = History(self.wall_s)  # the console's charts (daemon.history)
        self.events = Events(metrics.on_event, log_event, self.history.on_event)
        self.runner = Runner(settings, self.leases, self.events, clock,
                             stopping=self._stopping.is_set, cancelled=self._cancelled.is_set)
        self._policy = evaluate.BackoffPolicy(settings.backoff_base_s, settings.backoff_max_s,
                                              settings.quarantine_after)
        self.policies = Policies(settings)  # [[policies]], pauses, shares, job outcomes
        self.admissions = Admissions()
        self.runs = TableRuns(settings.concurrency, self.runner, self.policies, clock, self.lock,
                              self._stopping, self._failed)
        self._unreachable: set[int] = set()  # warehouses found gone or unreachable
        # the scheduler's heartbeat: when the last tick finished (monotonic; /healthz)
        self.heartbeat_s = clock.monotonic_s()

    def wall_s(self) -> float:
        return self.clock.wall_ms() / 1000

    @property
    def running_jobs(self) -> int:
        """Table runs executing now (queued work is not counted)."""
        return self.runs.running

    @property
    def stopping(self) -> threading.Event:
        """Set once shutdown began: nothing new is scheduled."""
        return self._stopping

    def stop_work(self, on_idle: Callable[[], None]) -> None:
        """Schedule nothing more; ``on_idle`` is called (from a pool thread) when the last
        running job ends. Running jobs go on until :meth:`cancel`."""
        self.runs.when_idle(on_idle)
        self._stopping.set()

    def cancel(self) -> bool:
        """Running jobs abandon before committing; queued runs are dropped (each answered with
        a skipped run). True if nothing was left running."""
        self._stopping.set()
        self._cancelled.set()
        return self.runs.cancel()

    # ---------------------------------------------------------------- discovery

    def discover(self) -> None:
        """Find the warehouses' tables: new ones are listed whole, a known one's branches
        at most every :data:`BRANCH_DISCOVERY_S` (the listing of every table's ``branch/``
        folder is most of an idle warehouse's discovery)."""
        now = self.wall_s()
        with self.lock:
            known = set(self.tables)  # found before: their directories are not listed again
        branches = now - self._branches_listed_at >= BRANCH_DISCOVERY_S
        found = find_tables(self.storages, self.settings.wants, known, known_branches=branches)
        if branches:
            self._branches_listed_at = now
        with self.lock:
            for name, (table, index) in found.items():
                if name not in self.tables:
                    self.tables[name] = TableState(table, index)
                    self._quarantine_changed = True
            gone = [n for n in set(self.tables) - set(found) if not self.tables[n].running]
            for name in gone:  # a running table goes at the next pass
                del self.tables[name]
                self._quarantine_changed = True
            self._last_discovery = self.wall_s()
        self.policies.forget(gone)
        self.history.forget(gone)

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

    def enabled_jobs(self, table: str) -> tuple[str, ...]:
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
        with self.lock:
            if decision.new_snapshot:
                state.last_snapshot_id, state.moved_at = latest, now
                self._moving[state.table.name] = state
            if decision.cleared:
                state.quarantined, state.failures, state.next_attempt_at = False, 0, 0.0
                self._quarantine_changed = True
            unchanged = state.unchanged if "compact" in jobs else None
            if unchanged is not None and not unchanged.holds(latest, state.watcher.schema_id,
                                                             now):
                state.unchanged = unchanged = None
            untold: compact_skip.Unchanged | None = None  # told once, not at each idle check
            if unchanged is not None:  # nothing its plan depends on changed since
                jobs = tuple(job for job in jobs if job != "compact")
                state.last_run["compact"] = now  # looked at again after its interval
                untold = None if state.skip_told is unchanged else unchanged
                state.skip_told = unchanged
            quiet = duty_skip.skipped_duties(state.quiet, jobs, latest,
                                             state.watcher.schema_id, now)
            if quiet:  # nothing they depend on changed since they did nothing
                jobs = tuple(job for job in jobs if job not in quiet)
                state.last_run.update(dict.fromkeys(quiet, now))
        if untold is not None:
            log.debug("compaction_skipped", table=state.table.name,
                      snapshot_id=untold.snapshot_id, until=untold.until,
                      reason=untold.describe())
        return () if self.policies.paused(state.table.name) else jobs

    def _refresh_gauges(self, state: TableState, latest: int | None) -> None:
        """Read the table's health figures again if it moved since they were read, idle or
        running: the gauges follow what writers and jobs do. Its options changing (a new
        schema) or a periodic recheck reads them too (table_watch: regeneration, lag)."""
        now_ms, name = self.clock.wall_ms(), state.table.name
        with self.lock:
            moved = latest != state.gauged_snapshot_id
            if not moved:
                state.active = False
        if not moved and not state.watcher.due(state.table, now_ms):
            self._show_needs(state)  # passes since
            return
        status = state.watcher.read(state.table, now_ms)
        health = evaluate.health(status)
        local_ms = self.clock.local_ms()
        with self.lock:
            state.gauged_snapshot_id = latest
            state.active = moved
            if moved:
                self._moving[name] = state
            if health is not None:  # changelog a reader waits for, rows no reader sees
                state.urgency = (health.urgency + evaluate.changelog_urgency(
                    state.watcher.last.changelog_pending_millis, local_ms)
                    + evaluate.postpone_urgency(status, local_ms))
                state.gauges = dict(health.gauges)
                state.compaction_due = pace.compaction_due(health.gauges)
        if health is not None:
            self.metrics.set_table(name, **health.gauges, **state.watcher.last.gauges)
            self.history.record(name, health.gauges)
            self.metrics.set_level0_oldest(name, state.watcher.last.oldest_level0_millis)
            self.metrics.set_changelog_pending(name, state.watcher.last.changelog_pending_millis)
            self.metrics.set_postpone_oldest(name, status.postpone_oldest_millis)
        self._show_needs(state)

    def _show_needs(self, state: TableState) -> None:
        """The table's need gauges, set only when they changed (every check asks)."""
        needs = state.watcher.need_gauges()
        if needs != state.shown_needs:
            self.metrics.set_table(state.table.name, **needs)
            state.shown_needs = needs

    def _failed(self, state: TableState, message: str) -> None:
        """Back off after a failure that was already logged where it happened."""
        with self.lock:
            state.failures += 1
            state.error = message
            backoff = evaluate.backoff(state.failures, self._policy)
            state.next_attempt_at = self.wall_s() + backoff.delay_s
            state.quarantined = backoff.quarantined
            self._quarantine_changed = True
            failures = state.failures
            state.unchanged = None
            state.quiet.clear()
        log.warning("table_backed_off", table=state.table.name, failures=failures,
                    backoff_s=backoff.delay_s, quarantined=backoff.quarantined)

    # ---------------------------------------------------------------- scheduling

    def tick(self) -> list[Future[TableRun]]:
        """Decide and submit due work, most urgent tables first; a finished tick is the
        scheduler's heartbeat (``liveness_reason``)."""
        try:
            return self._tick()
        finally:
            self.heartbeat_s = self.clock.monotonic_s()

    def liveness_reason(self) -> str | None:
        """Why the daemon is not alive (no tick finished for ``daemon.liveness_timeout_s``:
        a stuck scheduler, which a restart cures), or None."""
        silent = self.clock.monotonic_s() - self.heartbeat_s
        if silent <= self.settings.liveness_timeout_s:
            return None
        return (f"no scheduler tick finished for {silent:.0f} s "
                f"(daemon.liveness_timeout_s = {self.settings.liveness_timeout_s:g})")

    def _tick(self) -> list[Future[TableRun]]:
        if self._stopping.is_set():
            return []
        now = self.wall_s()
        with self.lock:
            discover = now - self._last_discovery >= self.settings.discovery_interval_s
        if discover:
            self.discover()
        reachable = self._reachable_warehouses()
        check_s, idle_s = self.settings.check_interval_s, self.settings.idle_check_interval_s
        with self.lock:
            idle, busy = [], []
            for state in self.tables.values():
                if state.running:
                    busy.append(state)
                elif state.warehouse in reachable and (state.checked_at is None or pace.checks_now(
                        state.moved_at, state.checked_at, state.has_work(), now, check_s,
                        idle_s)):
                    state.checked_at = (now if state.checked_at is not None else
                                        pace.first_check_at(state.table.name, now, idle_s))
                    idle.append((state, state.standing()))
        self._gauge_running(busy)
        return self._submit_due(idle, now)

    def _reachable_warehouses(self) -> set[int]:
        """The warehouses this tick may work in. One that is gone or cannot be listed gets no
        run, is logged once (``warehouse_unreachable``, then ``warehouse_reachable`` when it
        is back), and its leases forget what they knew of its epochs (daemon/lease.py)."""
        reachable = set()
        for index, storage in enumerate(self.storages):
            reason = warehouse_unready(storage)
            if reason is None:
                reachable.add(index)
                if index in self._unreachable:
                    self._unreachable.discard(index)
                    log.info("warehouse_reachable", warehouse=storage.root)
                continue
            self.leases[index].forget()
            if index not in self._unreachable:
                self._unreachable.add(index)
                log.warning("warehouse_unreachable", warehouse=storage.root, reason=reason)
        return reachable

    def watch(self) -> list[Future[TableRun]]:
        """Between ticks: an idle table that moved lately (daemon.tables.pace) and may have reached its
        compaction trigger since (daemon.tables.pace) gets its gauges read again, and runs at once
        when at the trigger. One read of LATEST per active table; idle tables cost nothing."""
        if self._stopping.is_set():
            return []
        since = self.wall_s() - pace.ACTIVE_CHECKS * self.settings.check_interval_s
        with self.lock:
            for name, state in list(self._moving.items()):
                if not (state.active or state.moved_at >= since) or not self._current(state):
                    del self._moving[name]  # quiet again, or gone: idle tables cost nothing
            active = [(s, s.gauged_snapshot_id, dict(s.gauges)) for s in self._moving.values()
                      if not s.running]
        due = []
        for state, gauged, gauges in active:
            try:
                latest = state.table.watched_latest_id()
                if latest == gauged or not pace.may_be_due(gauges, (latest or 0) - (gauged or 0)):
                    continue
                self._refresh_gauges(state, latest)
            except PaimondError:
                continue  # the next tick reports it
            with self.lock:
                if state.compaction_due:
                    due.append((state, state.standing()))
        return self._submit_due(due, self.wall_s())

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
        if not candidates:  # most ticks of an idle warehouse, most watches
            return []
        with self.lock:
            candidates.sort(key=lambda c: -c[0].urgency)
            running = [n for n, s in self.tables.items() if s.running]
        # a policy's concurrency share: the others wait for a later tick
        admitted = set(self.policies.admit([s.table.name for s, _ in candidates], running))
        with self.lock:
            turns = pace.duty_turns(
                [(s.table.name, _duties_last_ran(s, jobs)) for s, jobs in candidates
                 if s.table.name in admitted and any(job != "compact" for job in jobs)],
                self._duty_runs, self.settings.concurrency)
        futures = []
        for state, jobs in candidates:  # the pool runs `concurrency` at once, in this order
            if state.table.name not in admitted:
                continue
            with self.lock:
                # a wave of due duties never queues compaction behind it (compaction alone
                # is never held back; the running duties are counted as runs start and end)
                if self.keep_up and any(job != "compact" for job in jobs):
                    name = state.table.name
                    jobs = pace.paced_jobs(jobs, name in turns)
                    state.awaits_turn = name not in turns  # queued for one when not running
                    if name in turns or jobs:
                        self._duty_queue.pop(name, None)
                    else:
                        self._duty_queue.setdefault(name, state)
                if not jobs or state.running or not self._current(state):
                    continue
                state.running = True
            futures.append(self._submit(state, jobs))
        return futures

    def _current(self, state: TableState) -> bool:
        """Still the table's state: discovery may have dropped it (and re-added a new one)
        since it was read. Under the lock."""
        return self.tables.get(state.table.name) is state

    def _submit(self, state: TableState, jobs: tuple[str, ...],
                answer: Future[TableRun] | None = None) -> Future[TableRun]:
        """Queue a run of a table already marked running. ``answer`` always resolves, with a
        skipped run if the pool cancels the work at shutdown."""
        answer = Future() if answer is None else answer
        with self.lock:
            state.duties = any(job != "compact" for job in jobs)
            self._duty_runs += state.duties
            state.awaits_turn = state.awaits_turn and not state.duties
        try:
            work = self.runs.submit(state, jobs)
        except RuntimeError:  # the pool is shut down
            self._settle(state, None, jobs, answer)
            return answer
        work.add_done_callback(lambda done: self._settle(state, done, jobs, answer))
        return answer

    def _settle(self, state: TableState, work: Future[TableRun] | None,
                jobs: tuple[str, ...], answer: Future[TableRun]) -> None:
        """A run ended (or was cancelled): free the table, answer, start a waiting trigger."""
        if work is None or work.cancelled():
            run = skipped(state.table.name, jobs, STOPPING)
        else:
            run = work.result()
        with self.lock:
            self._duty_runs -= state.duties
            state.duties = False
            if state.awaits_turn and self._current(state):  # its duties wait for a turn
                self._duty_queue.setdefault(state.table.name, state)
            follow, state.triggered = state.triggered, None
            state.running = follow is not None and not self._stopping.is_set()
            state.checked_at = float("-inf")  # the next tick checks what the run left
            shown = None
            if self._quarantine_changed:
                self._quarantine_changed = False
                shown = ({n for n, s in self.tables.items() if s.quarantined}, set(self.tables))
        if shown is not None:
            self.metrics.set_quarantine(*shown)
        answer.set_result(run)
        if follow is not None:
            if state.running:
                self._submit(state, self.enabled_jobs(state.table.name), follow)
            else:
                follow.set_result(skipped(state.table.name, (), STOPPING))
        elif self.keep_up and run.error is None and run.finished_at:
            self._recheck(state)
        if self.keep_up:
            self._next_duties()

    def _next_duties(self) -> None:
        """A run ended: the tables whose duties waited for a turn (and run nothing now) get
        the free turns, first come first, instead of at their next check (a tick gives at
        most ``limits.concurrency`` turns: thousands of tables would wait hours for theirs)."""
        while not self._stopping.is_set():
            with self.lock:
                if self._duty_runs >= self.settings.concurrency or not self._duty_queue:
                    return
                name = next(iter(self._duty_queue))
                state = self._duty_queue.pop(name)
                if state.running or not self._current(state):
                    continue  # a tick or a trigger submitted it meanwhile, or it went
                standing = state.standing()
            self._submit_due([(state, standing)], self.wall_s())

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
        with self.lock:
            if latest != state.last_snapshot_id:  # moved by the run or by writers meanwhile
                state.moved_at = self.wall_s()  # watched until the writers go quiet
                self._moving[state.table.name] = state
            due = state.compaction_due and not state.running
            standing = state.standing()
        if due:
            self._submit_due([(state, standing)], self.wall_s())

    def trigger(self, table_name: str) -> Future[TableRun] | None:
        """Run every enabled job of a table now (clears quarantine and backoff). A table that
        is running gets the triggered run right after its current one. None for a table the
        daemon does not maintain."""
        with self.lock:
            known = table_name in self.tables
        if not known:
            self.discover()
        with self.lock:
            state = self.tables.get(table_name)
            if state is None:
                return None
            state.quarantined, state.failures, state.next_attempt_at = False, 0, 0.0
            self._quarantine_changed = True
            state.unchanged = None  # a trigger always plans
            state.quiet.clear()
            if state.running:
                if state.triggered is None:
                    state.triggered = Future()
                return state.triggered
            state.running = True
        return self._submit(state, self.enabled_jobs(table_name))
    # ---------------------------------------------------------------- one pass

    def run_once(self) -> list[TableRun]:
        """One full pass over every table (every enabled job), then return. ConfigError for
        a warehouse that does not exist, StorageUnavailableError for one that cannot be
        reached (a pass that saw no table is not a pass that found none)."""
        self.check_warehouses(unavailable_ok=False)
        self.discover()
        futures = []
        with self.lock:
            states = [s for s in self.tables.values() if not s.running]
            for state in states:
                state.running = True
        for state in states:  # a paused table's run skips every job
            futures.append(self._submit(state, self.enabled_jobs(state.table.name)))
        return [f.result() for f in futures]


def _duties_last_ran(state: TableState, jobs: tuple[str, ...]) -> float:
    """When the earliest of ``jobs`` besides compaction last ran (-inf: one never did)."""
    return min(state.last_run.get(job, float("-inf")) for job in jobs if job != "compact")
