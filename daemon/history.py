"""What the console charts: each table's recent figures and job runs, kept in memory since the
daemon started (a restart starts empty; Prometheus keeps the long history). Bounded: the last
:data:`SAMPLES` readings of a table's figures (one per change of its latest snapshot, or per
re-read) and its last :data:`RUNS` job runs (outcome, duration, bytes and rows, detail); a
table no longer discovered is forgotten."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from paimond.daemon.events import JobEvent, JobFailed, JobFinished

SAMPLES = 360
RUNS = 200
CHARTED = ("level0_files", "max_sorted_runs", "compaction_debt_bytes", "snapshots")


class History:
    """The ring buffers of every table, safe across the job threads and the HTTP thread."""

    def __init__(self, clock_s: Callable[[], float]) -> None:
        self._now = clock_s  # wall seconds
        self._lock = threading.Lock()
        self._figures: dict[str, deque[dict[str, float]]] = {}
        self._runs: dict[str, deque[dict[str, Any]]] = {}

    def record(self, table: str, figures: Mapping[str, float]) -> None:
        """One reading of the table's figures (the charted ones), timestamped now."""
        sample = {"at": self._now(), **{k: float(figures[k]) for k in CHARTED if k in figures}}
        with self._lock:
            self._figures.setdefault(table, deque(maxlen=SAMPLES)).append(sample)

    def on_event(self, event: JobEvent) -> None:
        """The job events' subscriber: each finished or failed job, with its duration."""
        if isinstance(event, JobFinished):
            report = event.report
            outcome, detail = report.outcome, report.detail
            io = {"read_bytes": report.read_bytes, "written_bytes": report.written_bytes,
                  "read_rows": report.read_rows, "written_rows": report.written_rows}
        elif isinstance(event, JobFailed):
            outcome, detail, io = "failure", event.error, {}
        else:
            return
        run = {"at": self._now(), "job": event.job, "outcome": outcome,
               "duration_s": round(event.duration_s, 3), "detail": detail[:500], **io}
        with self._lock:
            self._runs.setdefault(event.table, deque(maxlen=RUNS)).append(run)

    def of(self, table: str) -> dict[str, list[dict[str, Any]]]:
        with self._lock:
            return {"figures": list(self._figures.get(table, ())),
                    "runs": list(self._runs.get(table, ()))}

    def forget(self, tables: Iterable[str]) -> None:
        with self._lock:
            for table in tables:
                self._figures.pop(table, None)
                self._runs.pop(table, None)
