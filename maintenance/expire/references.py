"""What a table's snapshots, tags, changelogs and branches reference: the files that expiration
must keep and orphan removal must never delete. Java ``FileDeletionBase`` (skipping sets) and
``OrphanFilesClean`` (used files), apache/paimon 5dacde516b.

Branches keep their own ``snapshot/``, ``tag/`` and ``changelog/`` under
``branch/branch-<name>/`` but share the table's ``manifest/``, ``index/`` and data
directories, so every manifest named here is read from the table's own ``manifest/``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from paimond.errors import MissingFileError, PaimondError
from paimond.format.meta.index_manifest import IndexManifestEntry
from paimond.format.meta.manifest import FILE_KIND_ADD, ManifestEntry
from paimond.format.meta.manifest_list import ManifestFileMeta
from paimond.format.meta.snapshot import Snapshot
from paimond.table.catalog import Table
from paimond.table.layout import (
    CHANGELOG_DIR,
    CHANGELOG_PREFIX,
    FILE_INDEX_SUFFIX,
    INDEX_MANIFEST_PREFIX,
    MANIFEST_LIST_PREFIX,
    MANIFEST_PREFIX,
    TAG_DIR,
    TAG_PREFIX,
)
from paimond.table.scan.snapshot_scan import read_index_manifest, read_manifest, read_manifest_list
from paimond.table.snapshots import Snapshots

_PARALLELISM = 8

# File kinds, as reports name them.
DATA, CHANGELOG, FILE_INDEX = "data", "changelog", "file-index"
MANIFEST, MANIFEST_LIST, INDEX_MANIFEST = "manifest", "manifest-list", "index-manifest"
INDEX, STATISTICS, SNAPSHOT, OTHER = "index", "statistics", "snapshot", "other"
KIND_ORDER = (SNAPSHOT, MANIFEST_LIST, MANIFEST, INDEX_MANIFEST, INDEX, STATISTICS, DATA,
              CHANGELOG, FILE_INDEX, OTHER)


def metadata_kind(name: str) -> str:
    """The kind of a file under ``manifest/`` by its name."""
    if name.startswith(MANIFEST_LIST_PREFIX):
        return MANIFEST_LIST
    if name.startswith(INDEX_MANIFEST_PREFIX):
        return INDEX_MANIFEST
    return MANIFEST if name.startswith(MANIFEST_PREFIX) else OTHER


def bucket_file_kind(name: str) -> str:
    """The kind of a file in a bucket directory by its name."""
    if name.startswith(CHANGELOG_PREFIX):
        return CHANGELOG
    return FILE_INDEX if name.endswith(FILE_INDEX_SUFFIX) else DATA


@dataclass
class FileTally:
    """Files and bytes per kind (of what was, or would be, deleted)."""

    files: Counter[str] = field(default_factory=Counter)
    size_bytes: Counter[str] = field(default_factory=Counter)

    def add(self, kind: str, size_bytes: int) -> None:
        self.files[kind] += 1
        self.size_bytes[kind] += size_bytes

    @property
    def total_files(self) -> int:
        return sum(self.files.values())

    @property
    def total_bytes(self) -> int:
        return sum(self.size_bytes.values())

    def lines(self, indent: str = "  ") -> list[str]:
        kinds = sorted(self.files, key=lambda k: KIND_ORDER.index(k) if k in KIND_ORDER else 99)
        width = max((len(k) for k in kinds), default=0)
        return [f"{indent}{kind:<{width}}  {self.files[kind]:>6} files  "
                f"{self.size_bytes[kind]:>14,} bytes" for kind in kinds]


@dataclass(frozen=True, slots=True)
class SnapshotMetadata:
    """The metadata files one snapshot (or tag, or changelog) names."""

    manifest_lists: tuple[str, ...]
    manifests: tuple[ManifestFileMeta, ...]  # of the base, delta and changelog lists
    index_manifest: str | None
    index_entries: tuple[IndexManifestEntry, ...]
    statistics: str | None

    def names(self) -> set[str]:
        """Every file name, for skipping sets (matching is by name, as in Java)."""
        names = set(self.manifest_lists) | {m.file_name for m in self.manifests}
        names |= {e.index_file.file_name for e in self.index_entries}
        names |= {n for n in (self.index_manifest, self.statistics) if n}
        return names


def read_snapshot_metadata(table: Table, snapshot: Snapshot, where: str,
                           *, changelog: bool = True) -> SnapshotMetadata:
    """Read the manifest lists and index manifest of ``snapshot`` (found at ``where``);
    MissingFileError or CorruptFileError name the file that failed."""
    lists = list(snapshot.manifest_lists()) if changelog else [
        snapshot.base_manifest_list, snapshot.delta_manifest_list]
    manifests = [m for name in lists for m in read_manifest_list(table, name, where)]
    index_entries = read_index_manifest(table, snapshot) if snapshot.index_manifest else []
    return SnapshotMetadata(tuple(lists), tuple(manifests), snapshot.index_manifest,
                            tuple(index_entries), snapshot.statistics)


def read_manifests(table: Table, metas: Sequence[ManifestFileMeta], where: str
                   ) -> dict[str, list[ManifestEntry]]:
    """Entries of each distinct manifest, read in parallel, by file name."""
    unique = list({m.file_name: m for m in metas}.values())
    if len(unique) <= 1:
        return {m.file_name: read_manifest(table, m, where) for m in unique}
    with ThreadPoolExecutor(max_workers=min(_PARALLELISM, len(unique))) as pool:
        contents = pool.map(lambda m: read_manifest(table, m, where), unique)
        return {m.file_name: entries for m, entries in zip(unique, contents, strict=True)}


def _live_entries(table: Table, snapshot: Snapshot, where: str) -> list[ManifestEntry]:
    meta = read_snapshot_metadata(table, snapshot, where, changelog=False)
    contents = read_manifests(table, meta.manifests, where)
    live: dict[tuple[object, ...], ManifestEntry] = {}
    for manifest in meta.manifests:
        for entry in contents[manifest.file_name]:
            if entry.kind == FILE_KIND_ADD:
                live[entry.identifier] = entry
            else:
                live.pop(entry.identifier, None)
    return list(live.values())


def live_file_names(table: Table, snapshot: Snapshot, where: str) -> set[str]:
    """Names of the data files live in ``snapshot``, with their extra files."""
    return _names(_live_entries(table, snapshot, where))


def live_data_files(table: Table, snapshot: Snapshot, where: str) -> set[tuple[bytes, int, str]]:
    """(partition, bucket, file name) of every data file live in ``snapshot``: Java's tag
    data-file skipper, which matches by name within a bucket, whatever the level."""
    return {(e.partition, e.bucket, e.file.file_name) for e in _live_entries(table, snapshot, where)}


@dataclass(frozen=True, slots=True)
class SnapshotSource:
    """Where a referencing snapshot lives, for messages and re-checks."""

    branch: str  # "main" or a branch name
    kind: str  # snapshot, tag, changelog
    path: str
    snapshot: Snapshot


def other_branches(table: Table) -> list[str]:
    """The branches other than ``table``'s own, main included when ``table`` is a branch:
    what an expiration of ``table`` must keep every file of."""
    return [b for b in ["main", *table.branches()] if b != table.branch]


def referencing_snapshots(table: Table, branches: Iterable[str] | None = None
                          ) -> list[SnapshotSource]:
    """Every snapshot, tag and long-lived changelog of ``branches`` (default: the main branch
    and every branch), whichever branch ``table`` is. A snapshot file that vanishes while
    listing (expired meanwhile) is left out."""
    names = ["main", *table.branches()] if branches is None else list(branches)
    sources = []
    for branch in names:
        root = table.on_branch(branch)
        for kind, snapshots in (("snapshot", root.snapshots), ("changelog", Snapshots(
                table.storage, root.meta_path, directory=CHANGELOG_DIR, prefix=CHANGELOG_PREFIX))):
            for snapshot_id in snapshots.list_ids():
                try:
                    snapshot = snapshots.load(snapshot_id)
                except MissingFileError:
                    continue
                sources.append(SnapshotSource(branch, kind, snapshots.path(snapshot_id), snapshot))
        for name, tag in root.tags().items():
            sources.append(SnapshotSource(branch, "tag",
                                          root.meta_file_path(TAG_DIR, TAG_PREFIX + name), tag))
    return sources


def _source_metadata(table: Table, source: SnapshotSource) -> tuple[SnapshotMetadata, set[str]]:
    """What ``source`` names, and which of its manifests may be missing. Paimon deletes a
    tag's changelog manifest list with the changelog it came from (``FileDeletionBase``'s
    skipping sets hold data manifests only), and snapshot expiry with a decoupled changelog
    deletes a long-lived changelog's base and delta lists (with a changelog producer) and
    index manifests (``SnapshotDeletion``): those are skipped when missing, as Java's
    ``OrphanFilesClean`` does; any other missing file raises."""
    snapshot = source.snapshot
    if source.kind == "snapshot":
        return read_snapshot_metadata(table, snapshot, source.path), set()
    strict = [snapshot.base_manifest_list, snapshot.delta_manifest_list] if source.kind == "tag" else []
    manifests = [m for name in strict for m in read_manifest_list(table, name, source.path)]
    tolerant: list[ManifestFileMeta] = []
    for name in snapshot.manifest_lists()[len(strict):]:
        try:
            tolerant += read_manifest_list(table, name, source.path)
        except MissingFileError:
            continue
    try:
        index_entries = read_index_manifest(table, snapshot) if snapshot.index_manifest else []
    except MissingFileError:
        if source.kind == "tag":
            raise
        index_entries = []
    return (SnapshotMetadata(tuple(snapshot.manifest_lists()), tuple(manifests + tolerant),
                             snapshot.index_manifest, tuple(index_entries), snapshot.statistics),
            {m.file_name for m in tolerant})


@dataclass
class UsedFiles:
    """File names the given snapshots reference: metadata and data (with extra files)."""

    metadata: set[str] = field(default_factory=set)
    data: set[str] = field(default_factory=set)

    @property
    def all(self) -> set[str]:
        return self.metadata | self.data


def used_files(table: Table, sources: Iterable[SnapshotSource]) -> UsedFiles:
    """Names of every file ``sources`` reference. A missing file is skipped only when every
    snapshot naming it has itself vanished since (expired meanwhile), or when only long-lived
    changelogs name it; any other missing or corrupt file raises, so nothing is deleted on a
    partial view."""
    used = UsedFiles()
    # manifest name -> (meta, where it was named, the non-changelog sources naming it)
    manifests: dict[str, tuple[ManifestFileMeta, str, list[str]]] = {}
    for source in sources:
        try:
            meta, tolerant = _source_metadata(table, source)
        except MissingFileError:
            if not table.storage.exists(source.path):
                continue
            raise
        used.metadata |= meta.names()
        for m in meta.manifests:
            strict = manifests.setdefault(m.file_name, (m, source.path, []))[2]
            if m.file_name not in tolerant:
                strict.append(source.path)

    def read(item: tuple[ManifestFileMeta, str, list[str]]) -> list[ManifestEntry]:
        meta, where, strict = item
        try:
            return read_manifest(table, meta, where)
        except MissingFileError:
            if any(table.storage.exists(w) for w in strict):
                raise
            return []  # named only by vanished snapshots, or where it may be gone (above)

    items = list(manifests.values())
    with ThreadPoolExecutor(max_workers=max(1, min(_PARALLELISM, len(items)))) as pool:
        for entries in pool.map(read, items):
            for entry in entries:
                used.data.add(entry.file.file_name)
                used.data.update(entry.file.extra_files)
    return used


def _names(entries: Iterable[ManifestEntry]) -> set[str]:
    return {n for e in entries for n in (e.file.file_name, *e.file.extra_files)}


def names_kept_after(table: Table, end_id: int) -> set[str] | None:
    """Data and extra file names of every file live in what survives an expiration up to
    ``end_id`` (exclusive): the table's branch's snapshots from ``end_id`` on (the end
    snapshot's live files plus every later ADD) and its tags; for the other branches and
    long-lived changelogs, every name their manifests hold. None if some of it cannot be
    read (keep everything then)."""
    try:
        end = table.snapshots.load(end_id)
        names = _names(_live_entries(table, end, table.snapshots.path(end_id)))
        for snapshot_id in (i for i in table.snapshots.list_ids() if i > end_id):
            snapshot, where = table.snapshots.load(snapshot_id), table.snapshots.path(snapshot_id)
            for meta in read_manifest_list(table, snapshot.delta_manifest_list, where):
                names |= _names(e for e in read_manifest(table, meta, where)
                                if e.kind == FILE_KIND_ADD)
        sources = referencing_snapshots(table)
        for source in sources:
            if source.branch == table.branch and source.kind == "tag":
                names |= _names(_live_entries(table, source.snapshot, source.path))
        others = [s for s in sources if s.branch != table.branch or s.kind == "changelog"]
        return names | used_files(table, others).data
    except PaimondError:
        return None
