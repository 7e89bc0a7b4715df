"""What operators ask of the daemon (HTTP and the CLI): trigger a table now, its status, pause
it, and whether a write-only writer may commit to it (admission). A part of ``Daemon``
(daemon/service.py).
"""

from __future__ import annotations

import datetime
import threading
from concurrent.futures import Future
from typing import TYPE_CHECKING

from paimond.daemon.admission import Admission, Admissions
from paimond.daemon.logging import get_logger
from paimond.daemon.runner import TableRun
from paimond.daemon.status_view import table_json
from paimond.daemon.table_policy import Policies
from paimond.daemon.table_state import TableState, options_of

log = get_logger(__name__)


class Control:
    if TYPE_CHECKING:  # Daemon's fields and methods
        tables: dict[str, TableState]
        policies: Policies
        admissions: Admissions
        _lock: threading.Lock
        _quarantine_changed: bool

        def discover(self) -> None: ...
        def _wall_s(self) -> float: ...
        def _enabled_jobs(self, table: str) -> tuple[str, ...]: ...
        def _submit(self, state: TableState, jobs: tuple[str, ...],
                    answer: Future[TableRun] | None = None) -> Future[TableRun]: ...

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
                chosen=self.policies.for_run(name, options_of(state.table), now),
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
