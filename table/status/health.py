"""A table's lag and health figure, after the optimizing lag and table health score Apache
Amoro shows for its tables (the weights here are paimond's own), from the latest snapshot's
metadata only.

- **Lag**: the creation time of the oldest level-0 file of a primary-key table, which no
  compaction has taken yet (its age is the lag; data files record local wall-clock millis).
  Append tables keep every file at level 0: they have no lag figure.
- **Changelog latency** (``changelog-producer`` lookup or full-compaction): the creation
  time of the oldest data file whose changes no changelog holds yet: level-0 files for
  lookup, every file below the max level for full-compaction (their changelog comes with the
  next full compaction). Its age is how long a streaming reader waits.
- **Small files**: files under the compaction file size (``target-file-size`` times
  ``compaction.small-file-ratio``, Java ``compactionFileSize``), beyond one per bucket (a
  bucket's last file is small by nature).
- **Health**: 100 minus four penalties, each a share of its weight (capped at the weight):
  sorted runs against ``num-sorted-run.stop-trigger`` (40; primary-key tables), the share of
  small files among all files (20), retained snapshots against the smaller of
  ``snapshot.num-retained.max`` and :data:`SNAPSHOTS_AT_FULL_PENALTY` (20), and manifest files
  against three times ``manifest.merge-min-count`` (20). 100 is healthy; under 50 a table
  needs attention.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from paimond.format.meta.schema import TableSchema
from paimond.table.options.core import TableOptions
from paimond.table.scan.snapshot_scan import BucketFiles

SNAPSHOTS_AT_FULL_PENALTY = 1000
RUNS_WEIGHT, SMALL_FILES_WEIGHT, SNAPSHOTS_WEIGHT, MANIFESTS_WEIGHT = 40.0, 20.0, 20.0, 20.0


@dataclass(frozen=True, slots=True)
class FileFigures:
    data_files: int
    small_files: int
    oldest_level0_millis: int | None  # local wall-clock millis; None: no level-0 file (or append)
    # local wall-clock millis; None: no file waits for its changelog (or no such producer)
    changelog_pending_millis: int | None = None


def file_figures(schema: TableSchema, buckets: Iterable[BucketFiles]) -> FileFigures:
    options = TableOptions.of(schema)
    small_size = options.compaction_file_size_bytes
    files = small = 0
    oldest: int | None = None
    producer = options.changelog_producer if schema.primary_keys else "none"
    pending: list[int] = []
    for bucket in buckets:
        metas = [f.meta for f in bucket.files]
        files += len(metas)
        small += max(0, sum(1 for m in metas if m.file_size < small_size) - 1)
        if schema.primary_keys:
            times = [f.meta.creation_time_millis for f in bucket.levels.get(0, ())
                     if f.meta.creation_time_millis is not None]
            if times:
                oldest = min(times) if oldest is None else min(oldest, *times)
        if producer == "lookup":
            pending += [f.meta.creation_time_millis for f in bucket.levels.get(0, ())
                        if f.meta.creation_time_millis is not None]
        elif producer == "full-compaction":
            top = max([options.num_levels - 1, *(m.level for m in metas)])
            pending += [m.creation_time_millis for m in metas
                        if m.level < top and m.creation_time_millis is not None]
    return FileFigures(files, small, oldest, min(pending) if pending else None)


@dataclass(frozen=True, slots=True)
class HealthInputs:
    max_sorted_runs: int
    stop_trigger: int | None  # None: an append table
    data_files: int
    small_files: int
    snapshots: int
    snapshot_limit: int  # snapshot.num-retained.max
    manifest_files: int
    manifest_merge_min_count: int


def health_score(figures: HealthInputs) -> float:
    """0 (every penalty at its weight) to 100 (none), one decimal."""
    def share(value: float, limit: float) -> float:
        return min(1.0, max(0.0, value / limit)) if limit > 0 else 0.0

    runs = share(figures.max_sorted_runs, figures.stop_trigger or 0)
    small = share(figures.small_files, figures.data_files)
    snapshots = share(figures.snapshots, min(figures.snapshot_limit, SNAPSHOTS_AT_FULL_PENALTY))
    manifests = share(figures.manifest_files, 3 * figures.manifest_merge_min_count)
    penalty = (RUNS_WEIGHT * runs + SMALL_FILES_WEIGHT * small + SNAPSHOTS_WEIGHT * snapshots
               + MANIFESTS_WEIGHT * manifests)
    return round(100.0 - penalty, 1)
