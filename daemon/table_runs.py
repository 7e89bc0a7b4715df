"""The runs in the daemon's pool: a table run in the pool's thread, what it records in the
table's state (its outcome, the compaction that found nothing to do, daemon.tables.compact_skip),
and how many run now. The :class:`Daemon` (daemon/service.py) holds one and decides what to
submit to it.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from paimond.clock import Clock
from paimond.daemon.runner import Runner, TableRun, TableWork, skipped
from paimond.daemon.tables import compact_skip, duty_skip
from paimond.daemon.tables.policy import Policies
from paimond.daemon.tables.state import TableState, schema_of
from paimond.format.meta.schema import TableSchema

STOPPING = "the daemon is stopping"


def _nothing() -> None:
    return None


class TableRuns:
    def __init__(self, concurrency: int, runner: Runner, policies: Policies, clock: Clock,
                 lock: threading.Lock, stopping: threading.Event,
                 failed: Callable[[TableState, str], None]) -> None:
        """``lock`` guards the table states (the daemon's); ``failed`` backs a table off."""
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="paimond-job")
        self._runner, self._policies, self._clock = runner, policies, clock
        self._lock, self._stopping, self._failed = lock, stopping, failed
        self._on_idle: Callable[[], None] = _nothing
        self.running = 0  # runs executing now (queued work is not counted); under the lock

    def submit(self, state: TableState, jobs: tuple[str, ...]) -> Future[TableRun]:
        """Queue a run. RuntimeError once the pool is shut down."""
        return self._pool.submit(self._run, state, jobs)

    def when_idle(self, on_idle: Callable[[], None]) -> None:
        """Once stopping: call ``on_idle`` when the last running job ends."""
        self._on_idle = on_idle

    def cancel(self) -> bool:
        """Drop the queued runs (their futures are cancelled). True if none is running."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            return self.running == 0

    def join(self) -> None:
        """Wait until the pool's threads ended (after :meth:`cancel`)."""
        self._pool.shutdown(wait=True)

    def _wall_s(self) -> float:
        return self._clock.wall_ms() / 1000

    def _run(self, state: TableState, jobs: tuple[str, ...]) -> TableRun:
        with self._lock:
            self.running += 1
            base, pickers = state.last_snapshot_id, state.picker_states
        name, now, local = state.table.name, self._wall_s(), self._clock.local_now()
        try:
            if self._stopping.is_set():
                return skipped(name, jobs, STOPPING)
            self._policies.started(name, now)
            schema = schema_of(state.table)
            chosen = self._policies.for_run(name, dict(schema.options) if schema else {}, now)
            attempts = compact_skip.attempts(pickers)
            run = self._runner.run_table(TableWork(state.table, state.warehouse, jobs, base,
                                                   pickers, chosen.jobs,
                                                   regeneration=state.watcher.memory))
            self._record(state, run)
            self._remember_unchanged(state, run, base, schema, now, local, attempts)
            self._policies.record(name, jobs, run.reports, run.error, self._wall_s(),
                                  chosen.jobs.by_name("compact").settings.full)
            return run
        finally:
            with self._lock:
                self.running -= 1
                idle = self.running == 0
            if idle and self._stopping.is_set():
                self._on_idle()  # wakes a shutdown waiting for running jobs

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
        periodic one is skipped (daemon.tables.compact_skip); the same for its duties
        (daemon.tables.duty_skip)."""
        report = run.reports.get("compact")
        unchanged = None
        if (report is not None and schema is not None and run.error is None
                and report.outcome == "success" and run.compacted_snapshot_id == base
                and not (report.read_rows or report.written_bytes or report.conflicts)):
            policy = self._policies.policy(state.table.name)
            horizon = compact_skip.unchanged_until(
                schema, started, local, policy.full_compaction_window if policy else None,
                attempts, compact_skip.attempts(state.picker_states))
            if horizon is not None:
                unchanged = compact_skip.Unchanged(base, schema.id, started, *horizon)
        quiet = ({} if run.error is not None or schema is None
                 else duty_skip.quiet_duties(run.reports, base, schema.id, started))
        with self._lock:
            if report is not None or run.error is not None:
                state.unchanged = unchanged
            for job in run.reports:
                state.quiet.pop(job, None)
            state.quiet.update(quiet)
