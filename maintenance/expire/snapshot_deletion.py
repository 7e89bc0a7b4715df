"""Which files an expiration deletes: Java ``SnapshotDeletion`` / ``FileDeletionBase``
(apache/paimon 5dacde516b). This module only reads metadata; ``expiration_record`` deletes,
in an order that survives a crash.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from paimond.errors import MissingFileError
from paimond.format.meta.manifest import FILE_KIND_ADD, ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.maintenance.expire.base_lists import ManifestListCache, base_lists_to_read
from paimond.maintenance.expire.references import (
    CHANGELOG,
    DATA,
    FILE_INDEX,
    INDEX,
    INDEX_MANIFEST,
    MANIFEST,
    MANIFEST_LIST,
    SNAPSHOT,
    STATISTICS,
    UsedFiles,
    live_data_files,
    names_kept_after,
    other_branches,
    read_snapshot_metadata,
    referencing_snapshots,
    used_files,
)
from paimond.table.catalog import Table
from paimond.table.layout import INDEX_DIR, MANIFEST_DIR, STATISTICS_DIR, TAG_DIR, TAG_PREFIX
from paimond.table.scan.snapshot_scan import (
    bucket_path,
    read_index_manifest,
    read_manifest,
    read_manifest_list,
)


@dataclass(frozen=True, slots=True)
class Deletion:
    kind: str
    path: str
    size_bytes: int | None  # None: not recorded in metadata, asked of storage


@dataclass(frozen=True, slots=True)
class ExpireWork:
    """Everything one expiration deletes, in order. ``begin_id`` is None when no snapshot of
    the range was found (expired meanwhile by another process)."""

    begin_id: int | None
    end_id: int
    data_files: tuple[Deletion, ...] = ()
    bucket_dirs: tuple[tuple[str, int], ...] = ()  # (bucket dir, partition depth)
    metadata: tuple[Deletion, ...] = ()
    snapshot_files: tuple[Deletion, ...] = ()  # ascending
    write_earliest: bool = False
    protected_data_files: int = 0
    tags: tuple[tuple[str, int], ...] = ()  # (name, snapshot id) of the tags when collected
    branches: tuple[str, ...] = ()  # the branches when collected
    write_changelogs: bool = False  # decoupled: each expired snapshot becomes changelog-<id>

    @property
    def snapshot_count(self) -> int:
        return len(self.snapshot_files)


class DataPaths:
    """Where data files live (bucket directories computed once per partition and bucket)."""

    def __init__(self, table: Table, schema: TableSchema) -> None:
        self._table, self._schema = table, schema
        self._buckets: dict[tuple[bytes, int], str] = {}
        self.depth = len(schema.partition_keys)

    def bucket_dir(self, entry: ManifestEntry) -> str:
        key = (entry.partition, entry.bucket)
        if key not in self._buckets:
            self._buckets[key] = bucket_path(self._table, self._schema, *key)
        return self._buckets[key]

    def data(self, entry: ManifestEntry) -> str:
        external = entry.file.external_path
        return external or self._table.storage.join(self.bucket_dir(entry), entry.file.file_name)

    def extra(self, entry: ManifestEntry, name: str) -> str:
        """Java ``toAlignedPath``: extra files sit beside the data file."""
        external = entry.file.external_path
        directory = external.rsplit("/", 1)[0] if external else self.bucket_dir(entry)
        return self._table.storage.join(directory, name)


def _load_range(table: Table, first: int, last: int) -> list[Snapshot]:
    loaded = []
    for snapshot_id in range(first, last + 1):
        try:
            loaded.append(table.snapshots.load(snapshot_id))
        except MissingFileError:
            continue  # expired meanwhile, or a gap an interrupted run left
    return loaded


def retired_in_delta(table: Table, snapshot: Snapshot, paths: DataPaths,
                     lists: ManifestListCache | None = None
                     ) -> tuple[dict[str, ManifestEntry], set[str]] | None:
    """Data files a DELETE entry in the delta retires, by path; an ADD of the same path
    after it (an upgrade) keeps the file. Second, the extra files such a kept file no longer
    lists (an index rewrite replaced its index file). None if the delta is gone (an earlier
    run)."""
    where = table.snapshots.path(snapshot.id)
    retired: dict[str, ManifestEntry] = {}
    extras: dict[str, str] = {}  # extra file path -> its data file path
    try:
        delta = (lists.read(table, snapshot.delta_manifest_list, where) if lists is not None
                 else read_manifest_list(table, snapshot.delta_manifest_list, where))
        for meta in delta:
            for entry in read_manifest(table, meta, where):
                data = paths.data(entry)
                names = [paths.extra(entry, name) for name in entry.file.extra_files]
                if entry.kind == FILE_KIND_ADD:
                    retired.pop(data, None)
                    for name in names:
                        extras.pop(name, None)
                else:
                    retired[data] = entry
                    extras.update(dict.fromkeys(names, data))
    except MissingFileError:
        return None
    return retired, {extra for extra, data in extras.items() if data not in retired}


def newest_before(tags: list[Snapshot], snapshot_id: int, inclusive: bool = False) -> int:
    """Index of the newest tag with id < ``snapshot_id`` (<= if inclusive); -1 if none."""
    index = -1
    for i, tag in enumerate(tags):
        if tag.id < snapshot_id or (inclusive and tag.id == snapshot_id):
            index = i
    return index


FILE_SOURCE_APPEND = 0  # Java FileSource.APPEND (COMPACT is 1)


def _appended(entry: ManifestEntry) -> bool:
    """Java ``FileSource.APPEND``, which an absent source (older writers) counts as."""
    return entry.file.file_source in (None, FILE_SOURCE_APPEND)


def _data_deletions(table: Table, loaded: list[Snapshot], begin: int, tags: list[Snapshot],
                    tag_paths: dict[int, str], branch_data: set[str], paths: DataPaths,
                    keep_appended: bool = False, lists: ManifestListCache | None = None
                    ) -> tuple[list[Deletion], set[str], int]:
    deletions: dict[str, Deletion] = {}
    bucket_dirs: set[str] = set()
    protected = 0
    held_by_tag: dict[int, set[tuple[bytes, int, str]]] = {}
    replaced: set[str] = set()
    for snapshot in loaded:
        if snapshot.id == begin:
            continue
        found = retired_in_delta(table, snapshot, paths, lists)
        if found is None:
            continue
        retired, replaced_here = found
        replaced |= replaced_here
        if not retired:
            continue
        index = newest_before(tags, snapshot.id)
        held: set[tuple[bytes, int, str]] = set()
        if index >= 0:
            tag = tags[index]
            if tag.id not in held_by_tag:
                held_by_tag[tag.id] = live_data_files(table, tag, tag_paths[tag.id])
            held = held_by_tag[tag.id]
        for path, entry in retired.items():
            meta = entry.file
            if keep_appended and _appended(entry):
                continue  # the changelogs still need it: changelog expiry deletes it
            if (entry.partition, entry.bucket, meta.file_name) in held or meta.file_name in branch_data:
                protected += 1
                continue
            deletions.setdefault(path, Deletion(DATA, path, meta.file_size))
            for name in meta.extra_files:
                extra = paths.extra(entry, name)
                deletions.setdefault(extra, Deletion(FILE_INDEX, extra, None))
            bucket_dirs.add(paths.bucket_dir(entry))
    # The newest loaded snapshot is end, or older if end is gone: then more is kept.
    deletions.update((d.path, d) for d in _replaced_extra_deletions(table, replaced, loaded[-1].id))
    return list(deletions.values()), bucket_dirs, protected


def _replaced_extra_deletions(table: Table, replaced: set[str], end_id: int) -> list[Deletion]:
    """Index files an index rewrite replaced (Java leaves them to orphan removal): deleted
    only when nothing that survives the expiration names them, as a later rewrite may have
    reused the name."""
    kept = names_kept_after(table, end_id) if replaced else None
    if kept is None:
        return []
    return [Deletion(FILE_INDEX, path, None) for path in sorted(replaced)
            if path.rsplit("/", 1)[-1] not in kept]


def changelog_deletions(table: Table, expiring: Iterable[Snapshot], paths: DataPaths
                         ) -> list[Deletion]:
    """Changelog files of the expiring snapshots (not decoupled: they go with the snapshot)."""
    deletions: dict[str, Deletion] = {}
    for snapshot in expiring:
        if not snapshot.changelog_manifest_list:
            continue
        where = table.snapshots.path(snapshot.id)
        try:
            metas = read_manifest_list(table, snapshot.changelog_manifest_list, where)
        except MissingFileError:
            continue
        for meta in metas:
            try:
                entries = read_manifest(table, meta, where)
            except MissingFileError:
                continue
            for entry in entries:
                if entry.kind == FILE_KIND_ADD:
                    path = paths.data(entry)
                    deletions.setdefault(path, Deletion(CHANGELOG, path, entry.file.file_size))
    return list(deletions.values())


def _manifest_list_or_empty(table: Table, name: str, where: str, lists: ManifestListCache | None,
                            names_only: bool) -> list[tuple[str, int]]:
    """(name, size) of each manifest the list names."""
    try:
        if lists is None:
            return [(m.file_name, m.file_size) for m in read_manifest_list(table, name, where)]
        if names_only:
            return lists.names(table, name, where)
        return [(m.file_name, m.file_size) for m in lists.read(table, name, where)]
    except MissingFileError:
        return []  # deleted by an interrupted run, after the manifests it named


def _all_in(table: Table, name: str, where: str, lists: ManifestListCache, skip: set[str]
            ) -> bool:
    try:
        return lists.name_set(table, name, where) <= skip
    except MissingFileError:
        return False  # as read below: nothing


def metadata_deletions(table: Table, snapshot: Snapshot, skip: set[str], *,
                       data_lists: bool = True, changelog_list: bool = True,
                       read_base: bool = True, lists: ManifestListCache | None = None
                       ) -> list[Deletion]:
    """Java ``planManifestsCleaner(snapshot, skip, deleteDataManifestLists, deleteChangelog)``:
    each manifest before its list, index files before their index manifest; ``skip`` grows
    with every name planned, so each file is named once. ``read_base`` False: the base list
    goes but its manifests are not read (``base_lists``: other lists of the run name them).
    An index manifest already in ``skip`` is not read again: its index files were planned
    with it, or are kept with it."""
    where = table.snapshots.path(snapshot.id)
    out = []
    named: list[tuple[str | None, int | None]] = []
    if data_lists:
        named += [(snapshot.base_manifest_list, snapshot.base_manifest_list_size),
                  (snapshot.delta_manifest_list, snapshot.delta_manifest_list_size)]
    if changelog_list:
        named.append((snapshot.changelog_manifest_list, snapshot.changelog_manifest_list_size))
    for name, size in named:
        if not name:
            continue
        base = name == snapshot.base_manifest_list and data_lists
        if base and not read_base or base and lists and _all_in(table, name, where, lists, skip):
            manifests = []  # skipped, or every one already planned or kept
        else:
            manifests = _manifest_list_or_empty(table, name, where, lists, names_only=base)
        for manifest, manifest_size in manifests:
            if manifest not in skip:
                skip.add(manifest)
                out.append(Deletion(MANIFEST, table.file_path(MANIFEST_DIR, manifest),
                                    manifest_size))
        if name not in skip:
            skip.add(name)
            out.append(Deletion(MANIFEST_LIST, table.file_path(MANIFEST_DIR, name), size))
    if snapshot.index_manifest and snapshot.index_manifest not in skip:
        try:
            entries = read_index_manifest(table, snapshot)
        except MissingFileError:
            entries = None  # deleted by an interrupted run, after its index files
        if entries is not None:
            for entry in entries:
                index_file = entry.index_file
                if index_file.file_name not in skip:
                    skip.add(index_file.file_name)
                    out.append(Deletion(INDEX, index_file.external_path or table.file_path(
                        INDEX_DIR, index_file.file_name), index_file.file_size))
            if snapshot.index_manifest not in skip:
                skip.add(snapshot.index_manifest)
                out.append(Deletion(INDEX_MANIFEST, table.file_path(
                    MANIFEST_DIR, snapshot.index_manifest), None))
    if snapshot.statistics and snapshot.statistics not in skip:
        skip.add(snapshot.statistics)
        out.append(Deletion(STATISTICS, table.file_path(STATISTICS_DIR, snapshot.statistics), None))
    return out


def skipping_tags(tags: list[Snapshot], begin: int, end: int) -> list[Snapshot]:
    """Java ``findSkippingTags``: tags from the newest at or before ``begin`` to the newest
    before ``end``."""
    right = newest_before(tags, end)
    if right < 0:
        return []
    left = max(newest_before(tags, begin, inclusive=True), 0)
    return tags[left:right + 1]


def collect_expired(table: Table, earliest_id: int, end_id: int, *, decoupled: bool = False,
                    produce_changelog: bool = False,
                    lists: ManifestListCache | None = None) -> ExpireWork:
    """Read what expiring [earliest, end) deletes; nothing is deleted here. ``decoupled``
    (Java ``changelogDecoupled``): changelog files stay, each expired snapshot is kept as a
    long-lived changelog, and what it needs stays for changelog expiry: without a changelog
    producer (``produce_changelog`` False) the APPEND data files and the base and delta
    manifest lists, with one the changelog manifest list. Base manifest lists are read as
    ``base_lists`` says; ``lists`` (shared by a run's rounds) keeps the end snapshot's."""
    lists = ManifestListCache() if lists is None else lists
    loaded = _load_range(table, earliest_id, end_id)
    if not loaded:
        return ExpireWork(None, end_id)
    begin = loaded[0].id
    tag_items = sorted(table.tags().items(), key=lambda item: item[1].id)
    tags = [tag for _, tag in tag_items]
    tag_paths = {tag.id: table.meta_file_path(TAG_DIR, TAG_PREFIX + name)
                 for name, tag in tag_items}
    branch_names = tuple(other_branches(table))
    branches = (used_files(table, referencing_snapshots(table, branch_names))
                if branch_names else UsedFiles())
    held_tags = tuple((name, tag.id) for name, tag in tag_items)
    schema = table.latest_schema()
    paths = DataPaths(table, schema)
    data, bucket_dirs, protected = _data_deletions(
        table, loaded, begin, tags, tag_paths, branches.data, paths,
        keep_appended=decoupled and not produce_changelog, lists=lists)
    expiring = [s for s in loaded if s.id != end_id]
    if not decoupled:
        data += changelog_deletions(table, expiring, paths)
    dirs = tuple((d, paths.depth) for d in sorted(bucket_dirs))
    if loaded[-1].id != end_id:  # the end snapshot is gone: only the data files are certain
        return ExpireWork(begin, end_id, tuple(data), dirs, protected_data_files=protected,
                          tags=held_tags, branches=branch_names, write_changelogs=decoupled)
    skip = set(branches.metadata)
    for tag in skipping_tags(tags, begin, end_id):
        skip |= read_snapshot_metadata(table, tag, tag_paths[tag.id], changelog=False).names()
    end = loaded[-1]
    skip |= _data_manifest_names(table, end, lists)
    data_lists = not decoupled or produce_changelog
    reads = base_lists_to_read(table, loaded, end_id, _delta_entries(table, lists)
                               ) if data_lists else set()
    metadata = [d for s in expiring for d in metadata_deletions(
        table, s, skip, data_lists=data_lists, changelog_list=not decoupled,
        read_base=s.id in reads, lists=lists)]
    lists.retain([end.base_manifest_list])  # the next round's first base list
    snapshot_files = [Deletion(SNAPSHOT, table.snapshots.path(s.id), None) for s in expiring]
    return ExpireWork(begin, end_id, tuple(data), dirs, tuple(metadata), tuple(snapshot_files),
                      write_earliest=True, protected_data_files=protected, tags=held_tags,
                      branches=branch_names, write_changelogs=decoupled)


def _data_manifest_names(table: Table, snapshot: Snapshot, lists: ManifestListCache) -> set[str]:
    """``read_snapshot_metadata(...).names()`` without the changelog list, its lists cached."""
    where = table.snapshots.path(snapshot.id)
    names = {snapshot.base_manifest_list, snapshot.delta_manifest_list}
    names |= lists.name_set(table, snapshot.base_manifest_list, where)
    names |= {m.file_name for m in lists.read(table, snapshot.delta_manifest_list, where)}
    index_entries = read_index_manifest(table, snapshot) if snapshot.index_manifest else []
    names |= {e.index_file.file_name for e in index_entries}
    return names | {n for n in (snapshot.index_manifest, snapshot.statistics) if n}


def _delta_entries(table: Table, lists: ManifestListCache) -> Callable[[Snapshot], int | None]:
    def count(snapshot: Snapshot) -> int | None:
        try:
            return len(lists.read(table, snapshot.delta_manifest_list,
                                  table.snapshots.path(snapshot.id)))
        except MissingFileError:
            return None
    return count
