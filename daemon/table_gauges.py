"""Every table's gauges (its figures, and the ages that grow with the clock between readings),
kept as one array of numbers per table and turned into Prometheus samples only when
``/metrics`` is read: a custom collector of the daemon's registry, as ``daemon.job_tally``
is for the job figures (prometheus-client's children cost about 200 MB and 840,000 objects
at 20,000 tables)."""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Iterator

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from paimond.clock import Clock

# ``paimond_table_<name>``, set from each reading of the table
FIGURES = {
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
# (name, help): seconds since a local wall-clock time the table's reading gives (data files
# record local wall-clock millis), 0 when there is none; they grow between readings
AGES = (
    ("paimond_table_level0_lag_seconds", "Seconds since the oldest level-0 file not yet "
     "compacted was written (0: none)"),
    ("paimond_table_changelog_latency_seconds", "Tables with changelog-producer lookup or "
     "full-compaction: seconds since the oldest data file whose changelog compaction has not "
     "produced yet was written (0: none)"),
    ("paimond_table_postpone_age_seconds", "Postpone-bucket tables: seconds since the oldest "
     "postpone file, whose rows no reader sees yet, was written (0: none)"),
)
LEVEL0, CHANGELOG, POSTPONE = range(3)
_NAMES = tuple(FIGURES)
_SLOT = {name: slot for slot, name in enumerate(_NAMES)}
_AGE_BASE = len(_NAMES)
_UNSET = math.nan  # never set: not exported
_NONE = -1.0  # an age with no file behind it: exported as 0
LABELS = {**{f"paimond_table_{name}": ("table",) for name in _NAMES},
          **{name: ("table",) for name, _ in AGES}}


class TableGauges:
    """Safe across the checking threads and the scrape's thread."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._tables: dict[str, array[float]] = {}

    def _of(self, table: str) -> array[float]:
        values = self._tables.get(table)
        if values is None:
            values = self._tables[table] = array("d", [_UNSET] * (_AGE_BASE + len(AGES)))
        return values

    def set(self, table: str, **figures: float) -> None:
        """KeyError for a name :data:`FIGURES` does not declare."""
        slots = [(_SLOT[name], float(value)) for name, value in figures.items()]
        with self._lock:
            values = self._of(table)
            for slot, value in slots:
                values[slot] = value

    def set_age(self, table: str, age: int, local_millis: int | None) -> None:
        """``age``: :data:`LEVEL0`, :data:`CHANGELOG` or :data:`POSTPONE`."""
        with self._lock:
            self._of(table)[_AGE_BASE + age] = _NONE if local_millis is None else local_millis

    def describe(self) -> list[Metric]:
        return [*self._families()]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            tables = [(table, array("d", values)) for table, values in self._tables.items()]
        now_ms = self._clock.local_ms()
        families = self._families()
        for table, values in tables:
            labels = [table]
            for slot, (family, value) in enumerate(zip(families, values, strict=True)):
                if math.isnan(value):
                    continue
                if slot >= _AGE_BASE:  # an age: seconds since that local wall-clock time
                    value = 0.0 if value == _NONE else max(0.0, (now_ms - value) / 1000)
                family.add_metric(labels, value)
        yield from families

    @staticmethod
    def _families() -> list[GaugeMetricFamily]:
        return [*(GaugeMetricFamily(f"paimond_table_{name}", text, labels=["table"])
                  for name, text in FIGURES.items()),
                *(GaugeMetricFamily(name, text, labels=["table"]) for name, text in AGES)]
