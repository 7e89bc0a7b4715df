"""The figures of every job on every table (runs started and finished, bytes and rows, seconds
run, the last success), kept as plain numbers and turned into Prometheus samples only when
``/metrics`` is read: a custom collector of the daemon's registry.

prometheus-client's own labelled metrics keep an object per label set, with a lock and a value
object per number: at 20,000 tables and six jobs each, about 1 GB and six million objects
that the garbage collector traverses (a histogram per job and table alone was 4.8 KB and 33
objects). Here a job and table pair is one array of numbers. The duration's distribution is a
histogram per job (``paimond_job_duration_seconds``, in ``daemon/metrics.py``); per table, the
seconds run (``paimond_job_seconds_total``) over the runs finished give the mean.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Iterator

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from paimond.clock import Clock

# the slots of a job and table's array
STARTED, READ_BYTES, WRITTEN_BYTES, READ_ROWS, WRITTEN_ROWS, SECONDS = range(6)
SUCCESS_AT, SUCCESS_MONOTONIC = 6, 7  # NaN until there is one
_SLOTS = 8

JOB_TABLE = ("job", "table")
# (name, help, slot): counters per job and table (exported with the ``_total`` suffix)
COUNTERS = (
    ("paimond_jobs_started", "Jobs started", STARTED),
    ("paimond_read_bytes", "Bytes read by jobs", READ_BYTES),
    ("paimond_written_bytes", "Bytes written by jobs", WRITTEN_BYTES),
    ("paimond_read_rows", "Rows read by jobs", READ_ROWS),
    ("paimond_written_rows", "Rows written by jobs", WRITTEN_ROWS),
    ("paimond_job_seconds", "Seconds jobs ran (over paimond_jobs_finished_total: the mean "
     "duration on a table; the distribution per job: paimond_job_duration_seconds)", SECONDS),
)
FINISHED = ("paimond_jobs_finished", "Jobs finished, by outcome")
SINCE = ("paimond_seconds_since_last_success",
         "Seconds since the last successful run of a job on a table")
# wall-clock time of the last success: stays meaningful in a textfile written by a cron job's
# run-once, where a duration is frozen at the moment it was written
SUCCESS = ("paimond_last_success_timestamp_seconds",
           "Unix time of the last successful run of a job on a table")
LABELS = {**{name: JOB_TABLE for name, _, _ in COUNTERS}, SINCE[0]: JOB_TABLE,
          SUCCESS[0]: JOB_TABLE, FINISHED[0]: (*JOB_TABLE, "outcome")}


class JobTally:
    """Safe across the job threads and the scrape's thread."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._figures: dict[tuple[str, str], array[float]] = {}
        self._finished: dict[tuple[str, str, str], int] = {}

    def _of(self, job: str, table: str) -> array[float]:
        figures = self._figures.get((job, table))
        if figures is None:
            figures = self._figures[(job, table)] = array("d", [0.0] * _SLOTS)
            figures[SUCCESS_AT] = figures[SUCCESS_MONOTONIC] = math.nan
        return figures

    def started(self, job: str, table: str) -> None:
        """A run began; the seconds since the last success count from the first one."""
        with self._lock:
            figures = self._of(job, table)
            figures[STARTED] += 1
            if math.isnan(figures[SUCCESS_MONOTONIC]):
                figures[SUCCESS_MONOTONIC] = self._clock.monotonic_s()

    def finished(self, job: str, table: str, outcome: str, duration_s: float) -> None:
        with self._lock:
            key = (job, table, outcome)
            self._finished[key] = self._finished.get(key, 0) + 1
            figures = self._of(job, table)
            figures[SECONDS] += duration_s
            if outcome == "success":
                figures[SUCCESS_MONOTONIC] = self._clock.monotonic_s()
                figures[SUCCESS_AT] = self._clock.wall_ms() / 1000

    def io(self, job: str, table: str, read_bytes: int, written_bytes: int, read_rows: int,
           written_rows: int) -> None:
        with self._lock:
            figures = self._of(job, table)
            figures[READ_BYTES] += read_bytes
            figures[WRITTEN_BYTES] += written_bytes
            figures[READ_ROWS] += read_rows
            figures[WRITTEN_ROWS] += written_rows

    def describe(self) -> list[Metric]:
        """The families without samples: what the registry checks names against."""
        counters, finished, since, success = self._families()
        return [*counters, finished, since, success]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            pairs = [(key, array("d", figures)) for key, figures in self._figures.items()]
            finished = list(self._finished.items())
        now = self._clock.monotonic_s()
        counters, family_of_finished, since, success = self._families()
        for (job, table), figures in pairs:
            labels = [job, table]
            for (_, _, slot), family in zip(COUNTERS, counters, strict=True):
                family.add_metric(labels, figures[slot])
            if not math.isnan(figures[SUCCESS_MONOTONIC]):
                since.add_metric(labels, now - figures[SUCCESS_MONOTONIC])
            if not math.isnan(figures[SUCCESS_AT]):
                success.add_metric(labels, figures[SUCCESS_AT])
        for (job, table, outcome), count in finished:
            family_of_finished.add_metric([job, table, outcome], count)
        yield from counters
        yield from (family_of_finished, since, success)

    @staticmethod
    def _families() -> tuple[list[CounterMetricFamily], CounterMetricFamily, GaugeMetricFamily,
                             GaugeMetricFamily]:
        counters = [CounterMetricFamily(name, text, labels=LABELS[name])
                    for name, text, _ in COUNTERS]
        return (counters, CounterMetricFamily(*FINISHED, labels=LABELS[FINISHED[0]]),
                GaugeMetricFamily(*SINCE, labels=LABELS[SINCE[0]]),
                GaugeMetricFamily(*SUCCESS, labels=LABELS[SUCCESS[0]]))
