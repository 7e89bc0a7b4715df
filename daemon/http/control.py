"""What operators ask of the daemon (HTTP and the CLI): trigger a table now, its status, pause
and resume it, whether a write-only writer may commit to it (admission), and whether the daemon
is alive and ready. A :class:`Control` is handed the :class:`Daemon` it speaks for.
"""

from __future__ import annotations

import datetime
import threading
import time
from concurrent.futures import Future
from typing import Any

from paimond.daemon.http.status_view import maintenance_options, table_json
from paimond.daemon.logging import get_logger
from paimond.daemon.runner import TableRun
from paimond.daemon.service import Daemon
from paimond.daemon.tables.admission import Admission
from paimond.daemon.tables.state import options_of
from paimond.table.status.report import table_status

log = get_logger(__name__)
# a table page's read is reused while the latest snapshot stays, for at most this long (tags,
# consumers and expired snapshots change without a new snapshot)
DETAIL_MAX_AGE_S = 30.0


class Control:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        # the console's table pages: each table's status JSON at the snapshot it was read at
        # (a page polls every few seconds; a large table's read costs seconds of CPU)
        self._details: dict[str, tuple[int | None, float, dict[str, Any]]] = {}
        self._details_lock = threading.Lock()  # one such read at a time

    def liveness_reason(self) -> str | None:
        return self.daemon.liveness_reason()

    def unready_reason(self) -> str | None:
        return self.daemon.unready_reason()

    def warehouses(self) -> list[str]:
        """The roots of the configured warehouses."""
        return [s.root for s in self.daemon.storages]

    def trigger(self, table_name: str) -> Future[TableRun] | None:
        """Run every enabled job of a table now (``Daemon.trigger``); None if not maintained."""
        return self.daemon.trigger(table_name)

    def status(self, only: str | None = None) -> dict[str, object]:
        """``/status``: each table's state, effective policy, and per job its last outcome,
        next due time and why (``status_view``); ``only``: that table's entry alone."""
        daemon, now = self.daemon, self.daemon.wall_s()
        with daemon.lock:
            states = [(n, s, s.standing(), s.running, s.error, s.urgency,
                       s.unchanged if s.unchanged is not None and s.unchanged.holds(
                           s.last_snapshot_id, s.watcher.schema_id, now) else None,
                       {**s.gauges, **s.watcher.last.gauges, **s.watcher.need_gauges()})
                      for n, s in daemon.tables.items() if only is None or n == only]
        policies = daemon.policies
        out: dict[str, object] = {}
        for name, state, standing, running, error, urgency, unchanged, figures in states:
            out[name] = table_json(
                standing, running=running, error=error, urgency=urgency,
                policy=policies.policy(name),
                chosen=policies.for_run(name, options_of(state.table), now),
                schedules=policies.schedules(name), records=policies.records(name),
                paused=policies.paused(name), waiting=policies.waiting(name), now=now,
                unchanged=unchanged.describe() if unchanged is not None else None,
                figures=figures)
        return out

    def table_detail(self, table_name: str) -> dict[str, Any] | None:
        """The console's table page: the table as read at its latest snapshot (``paimond
        status``'s JSON: levels and sorted runs per bucket, snapshots, tags, consumers,
        refusals; files not checked; the options that govern its maintenance; its branches;
        read again once the latest snapshot changed or after :data:`DETAIL_MAX_AGE_S`), its
        ``/status`` entry, and its recent figures and job runs (``daemon.history``). None if
        the daemon does not maintain it."""
        with self.daemon.lock:
            state = self.daemon.tables.get(table_name)
        if state is None:
            return None
        with self._details_lock:
            latest, now = state.table.snapshots.latest_id(), time.monotonic()
            known = self._details.get(table_name)
            if known is None or known[0] != latest or now - known[1] > DETAIL_MAX_AGE_S:
                table = state.table
                known = (latest, now, {
                    "table": table_status(table, verify_files=False).to_json(),
                    "options": maintenance_options(table.latest_schema().options),
                    "branches": table.branches()})
                self._details[table_name] = known
        return {**known[2], "status": self.status(only=table_name).get(table_name),
                "history": self.daemon.history.of(table_name)}

    def known(self, table_name: str) -> bool:
        """Whether the daemon maintains ``db.table`` (discovering once when not yet seen)."""
        daemon = self.daemon
        with daemon.lock:
            if table_name in daemon.tables:
                return True
        daemon.discover()
        with daemon.lock:
            return table_name in daemon.tables

    def paused(self, table_name: str) -> str | None:
        """Why the table is paused (the API or its policy), or None."""
        return self.daemon.policies.paused(table_name)

    def pause(self, table_name: str) -> bool:
        """Give the table no further job until resumed (a running job finishes). False for a
        table the daemon does not maintain. In memory: a restart forgets it."""
        if not self.known(table_name):
            return False
        at = datetime.datetime.fromtimestamp(self.daemon.wall_s(), datetime.timezone.utc)
        self.daemon.policies.pause(table_name,
                                   f"paused through the API at {at:%Y-%m-%d %H:%M:%S} UTC")
        log.info("table_paused", table=table_name)
        return True

    def resume(self, table_name: str) -> str | None:
        """Lift a pause made through the API; the pause the config holds the table in, if
        any (``Policies.resume``)."""
        return self.daemon.policies.resume(table_name)

    def admission(self, table_name: str) -> Admission | None:
        """Whether a write-only writer may commit to the table now; None if not maintained."""
        if not self.known(table_name):
            return None
        daemon = self.daemon
        with daemon.lock:
            state = daemon.tables.get(table_name)
        if state is None:
            return None
        policy = daemon.policies.policy(table_name)
        limit = policy.max_compaction_debt_mb if policy is not None else None
        return daemon.admissions.check(state.table, None if limit is None else limit << 20)
