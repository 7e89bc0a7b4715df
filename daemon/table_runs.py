"""A table run in the pool's thread, and its end: the outcome recorded in the table's state,
the compaction that found nothing to do remembered (daemon.compact_skip), the table freed, a
trigger that came meanwhile started, and the table checked again at once. A part of ``Daemon``
(daemon/service.py).
"""

from __future__ import annotations

import datetime
import queue
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING

from paimond.clock import Clock
from paimond.daemon import compact_skip, evaluate
from paimond.daemon.lifecycle import IDLE
from paimond.daemon.metrics import Metrics
from paimond.daemon.runner import Runner, TableRun, TableWork, skipped
from paimond.daemon.table_policy import Policies
from paimond.daemon.table_state import TableState, schema_of
from paimond.errors import PaimondError
from paimond.format.meta.schema import TableSchema

STOPPING = "the daemon is stopping"


class TableRuns:
    if TYPE_CHECKING:  # Daemon's fields and methods
        tables: dict[str, TableState]
        metrics: Metrics
        clock: Clock
        runner: Runner
        policies: Policies
        keep_up: bool
        running_jobs: int
        _lock: threading.Lock
        _stopping: threading.Event
        _requests: queue.SimpleQueue[str]
        _duty_runs: int
        _quarantine_changed: bool

        def _wall_s(self) -> float: ...
        def _enabled_jobs(self, table: str) -> tuple[str, ...]: ...
        def _refresh_gauges(self, state: TableState, latest: int | None) -> None: ...
        def _failed(self, state: TableState, message: str) -> None: ...
        def _submit(self, state: TableState, jobs: tuple[str, ...],
                    answer: Future[TableRun] | None = None) -> Future[TableRun]: ...
        def _submit_due(self, idle: list[tuple[TableState, evaluate.Standing]], now: float
                        ) -> list[Future[TableRun]]: ...

    def _run(self, state: TableState, jobs: tuple[str, ...]) -> TableRun:
        with self._lock:
            self.running_jobs += 1
            base, pickers = state.last_snapshot_id, state.picker_states
        name, now, local = state.table.name, self._wall_s(), self.clock.local_now()
        try:
            if self._stopping.is_set():
                return skipped(name, jobs, STOPPING)
            self.policies.started(name, now)
            schema = schema_of(state.table)
            chosen = self.policies.for_run(name, dict(schema.options) if schema else {}, now)
            attempts = compact_skip.attempts(pickers)
            run = self.runner.run_table(TableWork(state.table, state.warehouse, jobs, base,
                                                  pickers, chosen.jobs,
                                                  regeneration=state.watcher.memory))
            self._record(state, run)
            self._remember_unchanged(state, run, base, schema, now, local, attempts)
            self.policies.record(name, jobs, run.reports, run.error, self._wall_s(),
                                 chosen.jobs.by_name("compact").settings.full)
            return run
        finally:
            with self._lock:
                self.running_jobs -= 1
                idle = self.running_jobs == 0
            if idle and self._stopping.is_set():
                self._requests.put(IDLE)  # wakes a shutdown waiting for running jobs

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
            run = skipped(state.table.name, jobs, STOPPING)
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
                follow.set_result(skipped(state.table.name, (), STOPPING))
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
