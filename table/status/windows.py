"""``paimond status`` of a table's latest snapshot in bounded memory: its live files are read
one window of partitions at a time as statistics-free records (``table.scan.bucket_scan``,
``table.scan.window_scan``), each bucket summed into its :class:`BucketStatus` and its files
checked on storage, then dropped. Gives what :func:`table.status.report.table_status` gives
from a whole scan (``scan_snapshot``): the same buckets in the same order, the same figures,
the same first missing file. A :class:`WindowReader` (the daemon's figures,
``daemon/tables/watch_windows.py``) reads each window too, from the same scan."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from paimond.errors import MissingFileError
from paimond.format.meta.index_manifest import (
    INDEX_TYPE_DELETION_VECTORS,
    INDEX_TYPE_HASH,
    IndexManifestEntry,
)
from paimond.format.meta.manifest_list import ManifestFileMeta
from paimond.format.meta.manifest_slim import SlimEntry
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.table.catalog import Table
from paimond.table.layout import MANIFEST_DIR
from paimond.table.options.core import TableOptions
from paimond.table.scan.bucket_scan import LiveIndex
from paimond.table.scan.partition_windows import WINDOW_ENTRIES
from paimond.table.scan.snapshot_scan import BucketFiles, SnapshotFiles, verify_data_files
from paimond.table.scan.window_scan import over_windows
from paimond.table.status.report import (
    BucketStatus,
    ManifestStatus,
    bucket_status,
    dv_cardinality_by_bucket,
)


class WindowReader(Protocol):
    """Reads each window status reads, from the same scan."""

    def start(self) -> None:
        """A pass over the windows starts (again: forget what earlier windows gave)."""

    def whole(self, entry: SlimEntry) -> bool:
        """Whether to keep this ADD entry whole as it is first read (``LiveIndex.whole``)."""

    def read(self, live: LiveIndex, buckets: Iterator[BucketFiles]) -> Iterator[BucketFiles]:
        """One window: ``buckets`` (its buckets, as ``live.buckets()`` builds them) passed on
        to status as they come, read on the way."""


@dataclass
class _Summed:
    buckets: list[tuple[tuple[bytes, int], BucketStatus]] = field(default_factory=list)
    missing: tuple[tuple[bytes, int], MissingFileError] | None = None  # the first, by bucket
    manifests: list[tuple[ManifestFileMeta, str]] = field(default_factory=list)
    index_entries: list[IndexManifestEntry] = field(default_factory=list)
    dvs: dict[tuple[bytes, int], dict[str, int]] | None = None


def _verify(table: Table, schema: TableSchema, snapshot: Snapshot, files: BucketFiles
            ) -> MissingFileError | None:
    """``verify_data_files`` of one bucket."""
    try:
        verify_data_files(table, schema, SnapshotFiles(snapshot, [], [], files.files, []))
    except MissingFileError as error:
        return error
    return None


def windowed_status(table: Table, schema: TableSchema, snapshot: Snapshot, *,
                    verify_files: bool, parallelism: int = 8, budget: int = WINDOW_ENTRIES,
                    also: WindowReader | None = None
                    ) -> tuple[ManifestStatus, tuple[BucketStatus, ...]]:
    """The manifest and bucket figures of ``snapshot``; raises what ``scan_snapshot`` and
    ``verify_data_files`` raise (a missing file once every window was read, the one of the
    first bucket in bucket order, as the whole scan finds it first). ``also`` reads every
    window too."""
    small = TableOptions.of(schema).compaction_file_size_bytes

    def each(state: _Summed, live: LiveIndex) -> None:
        state.manifests, state.index_entries = live.manifests, live.index_entries
        if state.dvs is None:
            state.dvs = dv_cardinality_by_bucket(live.index_entries)
        buckets = live.buckets()
        for files in buckets if also is None else also.read(live, buckets):
            key = (files.partition, files.bucket)
            if verify_files and (state.missing is None or key < state.missing[0]):
                error = _verify(table, schema, snapshot, files)
                if error is not None:
                    state.missing = (key, error)
            state.buckets.append((key, bucket_status(schema, files, state.dvs.get(key, {}),
                                                     small)))

    def start() -> _Summed:
        if also is not None:
            also.start()
        return _Summed()

    summed = over_windows(table, snapshot, schema, start, each, budget=budget,
                          parallelism=parallelism, whole=also.whole if also else None)
    if summed.missing is not None:
        raise summed.missing[1]
    base_path = table.file_path(MANIFEST_DIR, snapshot.base_manifest_list)
    base = [m for m, path in summed.manifests if path == base_path]
    delta = [m for m, path in summed.manifests if path != base_path]
    index_entries = summed.index_entries
    manifests = ManifestStatus(
        len(base), sum(m.file_size for m in base), len(delta), sum(m.file_size for m in delta),
        Counter(e.index_file.index_type for e in index_entries
                if e.index_file.index_type in (INDEX_TYPE_DELETION_VECTORS, INDEX_TYPE_HASH)))
    return manifests, tuple(status for _, status in sorted(summed.buckets, key=lambda b: b[0]))
