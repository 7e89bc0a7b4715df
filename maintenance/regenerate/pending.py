"""What the daemon regenerates without being asked, found from metadata: live data files whose
file index differs from the table's ``file-index.*`` options (for ``rewrite-index``), and
buckets whose deletion vectors are missing (for ``rebuild-dv``). Each need is an *item* with a
key that names the state it was found in; a bounded pass handles some items and a long-lived
caller remembers their keys (:class:`RegenerationMemory`), so the next pass takes the next
items and an item a pass could not change is not taken again until its state changes.

Stale index: the columns and index types (and bloom-filter sizes) in a file's index container
(embedded in the manifest entry, or the head of its ``.index`` file, read once per name: index
files are never overwritten) against those the options configure for the file's own schema,
as the rewrite would build them. Level-0 files of primary-key tables are left to compaction, which writes the
configured indexes; data-evolution files (some columns only) are never re-indexed. A bloom
filter's ``items`` and ``fpp`` are seen through its size (fixed by them, whatever the rows);
other settings of an index on the same column and type (bitmap ``version`` and
``index-block-size``, range-bitmap ``chunk-size``) are not: run ``paimond rewrite-index``.

Missing vectors: with ``deletion-vectors.enabled`` on a primary-key table, readers take every
level >= 1 file as is, minus its vector. Files compaction writes under deletion vectors come
with their vectors; files written before vectors were enabled (their schema says so) need
them when they lie in two or more levels >= 1 of a bucket or may hold retractions. A bucket
whose DV index file is gone needs its vectors rebuilt from the files (what only the lost
file recorded cannot come back).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from paimond.errors import CodecError, MissingFileError, PaimondError
from paimond.format.file_index import FileIndexBuilder, decode_file_index
from paimond.format.file_index.bloom import BLOOM_FILTER
from paimond.format.meta.index_manifest import INDEX_TYPE_DELETION_VECTORS, IndexManifestEntry
from paimond.format.meta.manifest import DataFileMeta, ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.table.catalog import Table
from paimond.table.indexes.deletion_vectors import index_file_path
from paimond.table.layout import FILE_INDEX_SUFFIX
from paimond.table.options.core import TableOptions
from paimond.table.scan.snapshot_scan import BucketFiles, SnapshotFiles, bucket_path

# (column as the file names it, index type, a bloom filter's size: items and fpp fix it)
IndexHeader = frozenset[tuple[str, str, int | None]]
_MAX_CACHED_HEADERS = 100_000
EXISTS_RECHECK_MS = 600_000  # a DV index file seen is looked for again after this long


@dataclass
class RegenerationMemory:
    """Kept by a long-lived caller (the daemon, per table) between bounded passes: the keys
    of items passes already handled, the index-file heads read, and when each DV index file
    was last seen. Without it every pass starts from the first items."""

    handled: set[str] = field(default_factory=set)
    headers: dict[str, IndexHeader] = field(default_factory=dict)  # index file path -> head
    heads: dict[bytes, IndexHeader] = field(default_factory=dict)  # a container's head bytes
    seen_ms: dict[str, int] = field(default_factory=dict)  # DV index file path -> when seen
    # (file schema id, table schema id, file-index options) -> the head the options build
    expected: dict[tuple[int, int, str], IndexHeader] = field(default_factory=dict)

    def unhandled(self, keys: Iterable[str]) -> list[str]:
        return sorted(k for k in keys if k not in self.handled)

    def forget_except(self, keys: Iterable[str]) -> None:
        """Drop handled keys no longer needed (their state moved on)."""
        self.handled.intersection_update(keys)


def _digest(*parts: object) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:16]


# ---- file indexes ---------------------------------------------------------------------------


class IndexStaleness:
    """Which live entries of ``table`` have an index that is not the configured one."""

    def __init__(self, table: Table, memory: RegenerationMemory | None = None) -> None:
        self.table = table
        self.schema = table.latest_schema()
        self.options = TableOptions.of(self.schema)
        self.memory = memory if memory is not None else RegenerationMemory()
        index_options = sorted((k, v) for k, v in self.schema.options.items()
                               if k.startswith("file-index."))
        self.fingerprint = _digest(index_options)

    def stale(self, entries: Iterable[ManifestEntry]) -> dict[str, ManifestEntry]:
        """Item key -> entry, for every eligible entry whose index is stale."""
        out: dict[str, ManifestEntry] = {}
        for entry in entries:
            if self.is_stale(entry):
                meta = entry.file
                key = _digest(entry.partition, entry.bucket, meta.file_name, meta.extra_files,
                              meta.embedded_index, self.fingerprint)
                out[f"index/{key}"] = entry
        return out

    def is_stale(self, entry: ManifestEntry) -> bool:
        """Whether one live entry is eligible and its index stale."""
        meta = entry.file
        if meta.write_cols is not None or (meta.level == 0 and bool(self.schema.primary_keys)):
            return False
        return self._actual(entry) != self.expected(meta.schema_id)

    def expected(self, schema_id: int) -> IndexHeader:
        """The head the rewrite would build for a file of ``schema_id``: the configured
        columns the file has (by field id, under the names it gives them) and their types."""
        key = (schema_id, self.schema.id, self.fingerprint)
        if key not in self.memory.expected:
            file_schema = self.table.schema(schema_id)
            names = None
            if file_schema.id != self.schema.id:
                by_id = {f.id: f.name for f in file_schema.fields}
                names = {f.name: by_id[f.id] for f in self.schema.fields if f.id in by_id}
            builder = FileIndexBuilder({f.name: f.type for f in file_schema.fields},
                                       self.options.file_index_columns, names)
            container = None if builder.empty else builder.finish()
            self.memory.expected[key] = _head(container) if container else frozenset()
        return self.memory.expected[key]

    def _actual(self, entry: ManifestEntry) -> IndexHeader | None:
        """The file's head; None when it cannot be read (a lost or damaged index: stale)."""
        meta = entry.file
        head: set[tuple[str, str, int | None]] = set()
        try:
            if meta.embedded_index is not None:
                head |= self._embedded_head(meta.embedded_index)
            for name in (n for n in meta.extra_files if n.endswith(FILE_INDEX_SUFFIX)):
                head |= self._file_head(entry, meta, name)
        except (CodecError, MissingFileError):
            return None
        return frozenset(head)

    def _embedded_head(self, container: bytes) -> IndexHeader:
        """Decoded once per distinct head: many files share one (same columns and types)."""
        head_bytes = container[:_head_length(container)]
        cached = self.memory.heads.get(head_bytes)
        if cached is None:
            cached = _head(container)
            if len(self.memory.heads) >= _MAX_CACHED_HEADERS:
                self.memory.heads.clear()
            self.memory.heads[head_bytes] = cached
        return cached

    def _file_head(self, entry: ManifestEntry, meta: DataFileMeta, name: str) -> IndexHeader:
        storage = self.table.storage
        data_path = meta.external_path or storage.join(
            bucket_path(self.table, self.schema, entry.partition, entry.bucket), meta.file_name)
        path = storage.join(data_path.rpartition("/")[0], name)
        cached = self.memory.headers.get(path)
        if cached is None:
            cached = _head(storage.read_bytes(path))
            if len(self.memory.headers) >= _MAX_CACHED_HEADERS:
                self.memory.headers.clear()
            self.memory.headers[path] = cached
        return cached


def _head_length(container: bytes) -> int:
    """The container's head length field (``FileIndexFormat``: after magic and version)."""
    return int.from_bytes(container[12:16], "big", signed=True) if len(container) >= 16 else 0


def _head(container: bytes) -> IndexHeader:
    return frozenset((column, index_type, len(payload) if index_type == BLOOM_FILTER
                      and payload is not None else None)
                     for column, types in decode_file_index(container).items()
                     for index_type, payload in types.items())


# ---- deletion vectors -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BucketNeed:
    partition: bytes
    bucket: int
    files: int  # level >= 1 files a rebuild reads
    lost: bool  # its DV index file is gone
    also: tuple[str, ...] = ()  # keys its rebuild settles too (a lost bucket's layered key)


def vector_needs(table: Table, buckets: Iterable[BucketFiles],
                 index_entries: Iterable[IndexManifestEntry],
                 exists: Callable[[str], bool], schema: TableSchema | None = None
                 ) -> dict[str, BucketNeed]:
    """Item key -> bucket, for the buckets of a deletion-vector table whose vectors are
    missing; nothing for other tables. ``exists`` answers for a DV index file's path;
    ``schema``: the table's latest, if already read (a caller going bucket batch by batch)."""
    schema = schema if schema is not None else table.latest_schema()
    if not schema.primary_keys or not TableOptions.of(schema).deletion_vectors_enabled:
        return {}
    before: dict[int, bool] = {}  # schema id -> written without deletion vectors

    def unvectored(meta: DataFileMeta) -> bool:
        if meta.schema_id not in before:
            options = TableOptions.of(table.schema(meta.schema_id))
            before[meta.schema_id] = not options.deletion_vectors_enabled
        return before[meta.schema_id]

    dv_files = {(e.partition, e.bucket): e for e in index_entries
                if e.index_file.index_type == INDEX_TYPE_DELETION_VECTORS}
    out: dict[str, BucketNeed] = {}
    for bucket in buckets:
        upper = [f.meta for level, files in bucket.levels.items() if level > 0 for f in files]
        old = [m for m in upper if unvectored(m)]
        entry = dv_files.get((bucket.partition, bucket.bucket))
        lost = entry is not None and not exists(index_file_path(table, entry.index_file))
        layered = f"dv/{_digest(bucket.partition, bucket.bucket, sorted(m.file_name for m in old))}"
        if entry is not None and lost:
            key = f"dv-lost/{_digest(bucket.partition, bucket.bucket, entry.index_file.file_name)}"
        elif len({m.level for m in old}) > 1 or any(m.delete_row_count != 0 for m in old):
            key = layered
        else:
            continue
        out[key] = BucketNeed(bucket.partition, bucket.bucket, len(upper), lost,
                              (layered,) if lost else ())
    return out


def exists_checked(table: Table, memory: RegenerationMemory, now_ms: int
                   ) -> Callable[[str], bool]:
    """``exists`` for :func:`vector_needs` that looks a file seen before up again only after
    :data:`EXISTS_RECHECK_MS` (a storage call per bucket at every new snapshot is too many)."""
    def exists(path: str) -> bool:
        seen = memory.seen_ms.get(path)
        if seen is not None and now_ms - seen < EXISTS_RECHECK_MS:
            return True
        try:
            found = table.storage.exists(path)
        except PaimondError:
            return True  # unreachable is not lost: the next check decides
        if found:
            memory.seen_ms[path] = now_ms
        else:
            memory.seen_ms.pop(path, None)
        return found
    return exists


def choose(needs: Mapping[str, int], memory: RegenerationMemory | None, max_files: int
           ) -> list[str]:
    """The unhandled items (key -> files to read) a bounded pass takes, in key order: up to
    ``max_files`` files, at least one item."""
    chosen: list[str] = []
    files = 0
    for key in (memory.unhandled(needs) if memory is not None else sorted(needs)):
        if chosen and files + needs[key] > max_files:
            break
        chosen.append(key)
        files += needs[key]
    return chosen


def table_needs(table: Table, files: SnapshotFiles, memory: RegenerationMemory, now_ms: int
                ) -> dict[str, frozenset[str]]:
    """The items of each regenerating job (``rewrite_index``, ``rebuild_dv``) in the scanned
    latest snapshot; handled keys no longer needed are forgotten. A table whose options the
    index writer refuses has no index items (the job says why when it runs)."""
    try:
        stale = IndexStaleness(table, memory).stale(f.entry for f in files.files)
    except PaimondError:
        stale = {}
    vectors = vector_needs(table, files.buckets().values(), files.index_entries,
                           exists_checked(table, memory, now_ms))
    needs = {"rewrite_index": frozenset(stale), "rebuild_dv": frozenset(vectors)}
    also = {k for need in vectors.values() for k in need.also}  # kept while their bucket is lost
    memory.forget_except(needs["rewrite_index"] | needs["rebuild_dv"] | also)
    return needs
