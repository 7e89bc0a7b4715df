"""The daemon's figures of a table (``daemon/tables/watch.py``: regeneration items, lag, small
files) read one window of partitions at a time, beside ``paimond status``'s own summing
(``table.status.windows``) and from the same scan, in bounded memory. Gives what the
whole scan gives (:func:`paimond.daemon.tables.watch.watch`).

Windows hold live files without statistics; two figures read a field they lack: a stale
index is not one when the file has ``write_cols`` (data-evolution files are never
re-indexed), and an old file's ``delete_row_count`` says whether its bucket needs vectors.
The entries those may turn on (stale by every other field; level >= 1 files written before
deletion vectors were enabled) are kept whole as the manifests are first read (at most
``WHOLE_ENTRIES`` a window) or read back whole, a batch of buckets at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from paimond.errors import PaimondError
from paimond.format.meta.index_manifest import INDEX_TYPE_DELETION_VECTORS
from paimond.format.meta.manifest import EMPTY_STATS, FILE_KIND_ADD, DataFileMeta, ManifestEntry
from paimond.format.meta.manifest_slim import SlimEntry
from paimond.format.meta.schema import TableSchema
from paimond.maintenance.regenerate.pending import (
    BucketNeed,
    IndexStaleness,
    RegenerationMemory,
    exists_checked,
    vector_needs,
)
from paimond.table.catalog import Table
from paimond.table.indexes.deletion_vectors import index_file_path
from paimond.table.layout import FILE_INDEX_SUFFIX
from paimond.table.options.core import TableOptions
from paimond.table.scan.bucket_scan import WHOLE_ENTRIES, LiveIndex
from paimond.table.scan.snapshot_scan import BucketFiles, LiveFile
from paimond.table.status.health import FileFigures, file_figures

NO_FILES = FileFigures(0, 0, None)


def _earliest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def add_figures(a: FileFigures, b: FileFigures) -> FileFigures:
    """The figures of two disjoint sets of buckets together."""
    return FileFigures(a.data_files + b.data_files, a.small_files + b.small_files,
                       _earliest(a.oldest_level0_millis, b.oldest_level0_millis),
                       _earliest(a.changelog_pending_millis, b.changelog_pending_millis))


def _entry(e: SlimEntry) -> ManifestEntry:
    """What the staleness test reads of a slim entry, as an entry (no ``write_cols``)."""
    meta = DataFileMeta(e.file_name, e.file_size, e.row_count, e.min_key, b"", EMPTY_STATS,
                        EMPTY_STATS, e.min_sequence_number, e.max_sequence_number, e.schema_id,
                        e.level, e.extra_files, e.creation_time_millis, None, e.embedded_index,
                        None, None, e.external_path, None, None, None)
    return ManifestEntry(FILE_KIND_ADD, e.partition, e.bucket, e.total_buckets, meta)


def _with_whole(bucket: BucketFiles, whole: dict[tuple[object, ...], ManifestEntry]
                ) -> BucketFiles:
    """``bucket`` with the files read back whole in place of their slim entries."""
    copy = BucketFiles(bucket.partition, bucket.bucket, bucket.total_buckets)
    copy.levels.update({level: [LiveFile(whole.get(f.entry.identifier, f.entry), f.manifest_name)
                                for f in files] for level, files in bucket.levels.items()})
    return copy


@dataclass
class WatchWindows:
    """A ``table.status.windows.WindowReader``: one reading of one table's figures.
    :meth:`found` gives them once status has read every window."""

    table: Table
    memory: RegenerationMemory
    now_ms: int
    batch_files: int = WHOLE_ENTRIES  # live files whose buckets are read back at once
    started: bool = False
    error: PaimondError | None = None  # the whole reading has no figures (as ``watch``)
    schema: TableSchema | None = None
    staleness: IndexStaleness | None = None  # None: the index writer refuses the table
    vectored: bool = False  # a primary-key table with deletion vectors
    exists: Callable[[str], bool] | None = None
    stale: set[str] = field(default_factory=set)
    vectors: dict[str, BucketNeed] = field(default_factory=dict)
    # the snapshot's DV index files: what can be lost with no new snapshot (vectored tables;
    # None until the first batch is read)
    dv_paths: frozenset[str] | None = None
    figures: FileFigures = NO_FILES
    _unvectored: dict[int, bool] = field(default_factory=dict)  # schema id -> no vectors
    _expects_index: dict[int, bool] = field(default_factory=dict)  # schema id -> configured

    def start(self) -> None:
        self.started, self.error, self.staleness = True, None, None
        self._expects_index = {}
        self.stale, self.vectors, self.figures = set(), {}, NO_FILES
        self.dv_paths = None
        try:
            self.schema = self.table.latest_schema()
            options = TableOptions.of(self.schema)
            self.vectored = bool(self.schema.primary_keys) and options.deletion_vectors_enabled
            self.exists = exists_checked(self.table, self.memory, self.now_ms)
        except PaimondError as error:
            self.error = error
            return
        try:
            self.staleness = IndexStaleness(self.table, self.memory)
        except PaimondError:
            self.staleness = None

    def whole(self, entry: SlimEntry) -> bool:
        """Whether a figure may read a field the slim entry lacks (a guess: wrong ones are
        read back whole later)."""
        try:
            return self._old(entry.level, entry.schema_id) or self._maybe_stale(entry)
        except PaimondError:
            return False  # its window's reading meets the error again

    def _old(self, level: int, schema_id: int) -> bool:
        """A level >= 1 file of a vectored table written before vectors were enabled."""
        if not self.vectored or level == 0:
            return False
        if schema_id not in self._unvectored:
            options = TableOptions.of(self.table.schema(schema_id))
            self._unvectored[schema_id] = not options.deletion_vectors_enabled
        return self._unvectored[schema_id]

    def _maybe_stale(self, e: SlimEntry) -> bool:
        if self.error is not None:
            return False
        return self._stale_but_write_cols(e.level, e.schema_id, e.embedded_index,
                                          e.extra_files, e)

    def _stale_but_write_cols(self, level: int, schema_id: int, embedded: bytes | None,
                              extra: tuple[str, ...], entry: ManifestEntry | SlimEntry
                              ) -> bool:
        """``IndexStaleness.is_stale`` of a file whose ``write_cols`` is not known."""
        staleness = self.staleness
        if staleness is None or (level == 0 and staleness.schema.primary_keys):
            return False
        if embedded is None and not any(n.endswith(FILE_INDEX_SUFFIX) for n in extra):
            expects = self._expects_index.get(schema_id)  # no index: stale if one is due
            if expects is None:
                expects = self._expects_index[schema_id] = bool(staleness.expected(schema_id))
            return expects
        return staleness.is_stale(_entry(entry) if isinstance(entry, SlimEntry) else entry)

    def read(self, live: LiveIndex, buckets: Iterator[BucketFiles]) -> Iterator[BucketFiles]:
        batch: list[BucketFiles] = []
        held = 0
        for bucket in buckets:
            yield bucket
            if self.error is None:
                batch.append(bucket)
                held += sum(len(files) for files in bucket.levels.values())
                if held >= self.batch_files:
                    self._read_batch(live, batch)
                    batch, held = [], 0
        if batch and self.error is None:
            self._read_batch(live, batch)

    def _read_batch(self, live: LiveIndex, buckets: list[BucketFiles]) -> None:
        try:
            self._read_buckets(live, buckets)
        except PaimondError as error:
            self.error = error

    def _read_buckets(self, live: LiveIndex, buckets: list[BucketFiles]) -> None:
        assert self.schema is not None and self.exists is not None
        staleness = self.staleness
        maybe_stale: list[ManifestEntry] = []
        if staleness is not None:
            try:  # stale but for write_cols, which only the whole entry has
                maybe_stale = [f.entry for b in buckets for f in b.files
                               if self._stale_but_write_cols(
                                   f.meta.level, f.meta.schema_id, f.meta.embedded_index,
                                   f.meta.extra_files, f.entry)]
            except PaimondError:
                self.staleness = staleness = None  # as the whole scan: no index items
        old = [f.entry for b in buckets for level, files in b.levels.items() if level > 0
               for f in files if self._old(level, f.meta.schema_id)]
        wanted = [*maybe_stale, *old]
        whole = live.full_entries(self.table, wanted, parallelism=4) if wanted else {}
        if staleness is not None and maybe_stale:
            try:
                self.stale.update(staleness.stale(whole[e.identifier] for e in maybe_stale))
            except PaimondError:
                self.staleness = None
        if self.vectored:
            if self.dv_paths is None:  # the whole snapshot's, taken once
                self.dv_paths = frozenset(
                    index_file_path(self.table, e.index_file) for e in live.index_entries
                    if e.index_file.index_type == INDEX_TYPE_DELETION_VECTORS)
            self.vectors.update(vector_needs(
                self.table, [_with_whole(b, whole) for b in buckets] if old else buckets,
                live.index_entries, self.exists, self.schema))
        self.figures = add_figures(self.figures, file_figures(self.schema, buckets))

    def found(self) -> tuple[dict[str, frozenset[str]], FileFigures] | None:
        """The items of each regenerating job and the file figures (handled keys no longer
        needed are forgotten, as ``table_needs`` does); None when no window was read (no
        snapshot). Raises the error that left the table without figures."""
        if not self.started:
            return None
        if self.error is not None:
            raise self.error
        stale = self.stale if self.staleness is not None else set()
        needs = {"rewrite_index": frozenset(stale), "rebuild_dv": frozenset(self.vectors)}
        also = {k for need in self.vectors.values() for k in need.also}
        self.memory.forget_except(needs["rewrite_index"] | needs["rebuild_dv"] | also)
        return needs, self.figures
