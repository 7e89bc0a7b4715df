"""Deleting a tag with the files only it kept: Java ``TagManager.deleteTag`` with
``TagDeletion`` (apache/paimon 5dacde516b); replacing a tag (``maintenance.tags.replace``)
goes the same way, its file overwritten instead of deleted.

When the tag's snapshot is still a live snapshot, only the tag file goes (Java does the same:
the snapshot keeps every file). Otherwise the tag kept files its snapshot's expiry left: the
data files live in its base and delta manifests (with their extra files), the changelog files
of its changelog manifest list if that is still there, its manifests, manifest lists, index
manifest, index files and statistics file. As Java, a data file stays when it is live in the
earliest snapshot or in a neighbouring tag (liveness is one run of snapshots, so that covers
every later snapshot and tag); paimond also keeps the data files long-lived changelogs read
(their delta and changelog lists), every file a branch names, and every metadata file any
remaining snapshot, tag, changelog or branch names (consumers pin snapshots), matching by
file name as Java's skipping sets do (:func:`still_needed`).

Crash safety: the deletion is a recorded job (``job_cleanup.recorded_job``). Every candidate
nothing else names is noted in the job's record first, then the tag file is deleted, then the
references are read again (something may have started to use a candidate meanwhile) and what
nothing needs is deleted, data files first, then manifests before their lists and index files
before their index manifest, then (with ``snapshot.clean-empty-directories``, as Java) the
bucket and partition directories left empty. The job keeps what the
second reading found in use, so its end deletes nothing that is referenced. A job killed before
the tag file went leaves a record whose dead-job cleanup deletes nothing (the tag still names
every listed file); killed after it, the cleanup (at the start of the next writing job, of the
next tag deletion or tags run, or of the daemon) deletes the listed files nothing names.
Candidates outside the table (an ``external_path``) cannot be recorded: they are deleted in the
last step, and a crash before it leaves them to orphan removal.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from paimond.clock import Clock
from paimond.errors import MissingFileError
from paimond.faults import crash_point
from paimond.format.meta.manifest import FILE_KIND_ADD, ManifestEntry
from paimond.format.meta.manifest_list import ManifestFileMeta
from paimond.format.meta.snapshot import Snapshot
from paimond.maintenance.distributed import TaskMapper
from paimond.maintenance.expire.record import (
    delete_all_in_tasks,
    delete_counted,
    file_size,
    remove_empty_dirs,
)
from paimond.maintenance.expire.references import (
    CHANGELOG,
    DATA,
    FILE_INDEX,
    FileTally,
    SnapshotSource,
    live_file_names,
    referencing_snapshots,
    used_files,
)
from paimond.maintenance.expire.snapshot_deletion import DataPaths, Deletion, metadata_deletions
from paimond.maintenance.job_cleanup import recorded_job
from paimond.table.catalog import Table
from paimond.table.scan.snapshot_scan import read_manifest, read_manifest_list
from paimond.table.tags import delete_tag_file, read_tag, tag_path

_PARALLELISM = 8


@dataclass(frozen=True, slots=True)
class TagFiles:
    """Every file one tag names, in deletion order, and the bucket directories holding its
    data files; ``unreadable`` names the manifest lists and manifests already gone (what
    only they named is left to orphan removal)."""

    deletions: tuple[Deletion, ...]
    bucket_dirs: tuple[tuple[str, int], ...]  # (bucket dir, partition depth)
    unreadable: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TagDeletionResult:
    name: str
    snapshot_id: int
    snapshot_live: bool  # only the tag file went
    files: FileTally = field(default_factory=FileTally)  # what was deleted with it
    unreadable: tuple[str, ...] = ()


def _tolerant_lists(table: Table, names: Sequence[str | None], where: str,
                    unreadable: list[str]) -> list[ManifestFileMeta]:
    metas: list[ManifestFileMeta] = []
    for name in names:
        if not name:
            continue
        try:
            metas += read_manifest_list(table, name, where)
        except MissingFileError:
            unreadable.append(name)
    return metas


def _tolerant_entries(table: Table, metas: Sequence[ManifestFileMeta], where: str,
                      unreadable: list[str]) -> list[ManifestEntry]:
    unique = list({m.file_name: m for m in metas}.values())

    def read(meta: ManifestFileMeta) -> list[ManifestEntry] | None:
        try:
            return read_manifest(table, meta, where)
        except MissingFileError:
            return None

    entries: list[ManifestEntry] = []
    with ThreadPoolExecutor(max_workers=max(1, min(_PARALLELISM, len(unique)))) as pool:
        for meta, content in zip(unique, pool.map(read, unique), strict=True):
            if content is None:
                unreadable.append(meta.file_name)
            else:
                entries += content
    return entries


def tag_files(table: Table, tag: Snapshot, where: str) -> TagFiles:
    """Read every file ``tag`` (found at ``where``) names; nothing is deleted here. A missing
    manifest list or manifest is skipped (noted in ``unreadable``); a corrupt one raises."""
    paths = DataPaths(table, table.latest_schema())
    unreadable: list[str] = []
    deletions: dict[str, Deletion] = {}
    bucket_dirs: set[str] = set()
    for lists, kind in (([tag.base_manifest_list, tag.delta_manifest_list], DATA),
                        ([tag.changelog_manifest_list], CHANGELOG)):
        metas = _tolerant_lists(table, lists, where, unreadable)
        for entry in _tolerant_entries(table, metas, where, unreadable):
            data = paths.data(entry)
            deletions.setdefault(data, Deletion(kind, data, entry.file.file_size))
            for name in entry.file.extra_files:
                extra = paths.extra(entry, name)
                deletions.setdefault(extra, Deletion(FILE_INDEX, extra, None))
            bucket_dirs.add(paths.bucket_dir(entry))
    # Java planManifestsCleaner(tag, skip, deleteDataManifestLists=true, deleteChangelog=false);
    # the changelog list too: the used-files check keeps it while a changelog names it.
    metadata = metadata_deletions(table, tag, set(), data_lists=True, changelog_list=True)
    return TagFiles((*deletions.values(), *metadata),
                    tuple((d, paths.depth) for d in sorted(bucket_dirs)), tuple(unreadable))


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def files_only_kept_by(table: Table, name: str, tag: Snapshot) -> tuple[TagFiles, list[Deletion]]:
    """The files the tag ``name`` names, and those of them nothing else needs now."""
    where = tag_path(table, name)
    found = tag_files(table, tag, where)
    needed = still_needed(table, tag, where)
    return found, [d for d in found.deletions if _name(d.path) not in needed]


def still_needed(table: Table, tag: Snapshot, where: str | None) -> set[str]:
    """What the other sources need of the files of the tag at ``where`` (its snapshot
    expired; None: the tag's file now pins another snapshot, which counts as a source):
    Java's ``TagDeletion`` skipper, widened. Metadata any other snapshot, tag,
    long-lived changelog or branch names; data files live in the earliest snapshot or in the
    tags next to this one (a data file is live over one run of snapshots, so one live in any
    later snapshot or tag is live there); the data files a changelog's delta and changelog
    lists add (what its readers read); every file a branch names. A data file only named by
    a cancelled ADD/DELETE pair of a later manifest is no longer needed."""
    others = [s for s in referencing_snapshots(table)
              if not (s.branch == table.branch and s.kind == "tag" and s.path == where)]
    needed = used_files(table, others).metadata
    needed |= used_files(table, [s for s in others if s.branch != table.branch]).data
    main = [s for s in others if s.branch == table.branch]
    snapshots = [s for s in main if s.kind == "snapshot"]
    tags = [s for s in main if s.kind == "tag"]
    neighbours: list[SnapshotSource | None] = [s for s in tags if s.snapshot.id == tag.id]
    neighbours += [max((s for s in tags if s.snapshot.id < tag.id), key=_id, default=None),
                   min((s for s in tags if s.snapshot.id > tag.id), key=_id, default=None),
                   min(snapshots, key=_id, default=None)]
    for source in neighbours:
        if source is not None:
            needed |= live_file_names(table, source.snapshot, source.path)
    for source in (s for s in main if s.kind == "changelog"):
        needed |= _changelog_data(table, source)
    return needed


def _id(source: SnapshotSource) -> int:
    return source.snapshot.id


def _changelog_data(table: Table, source: SnapshotSource) -> set[str]:
    """Data files a long-lived changelog's readers read: those its delta and changelog
    manifest lists add (a list changelog expiry deleted meanwhile adds nothing)."""
    lists = (source.snapshot.delta_manifest_list, source.snapshot.changelog_manifest_list)
    metas = _tolerant_lists(table, lists, source.path, [])
    entries = _tolerant_entries(table, metas, source.path, [])
    return {n for e in entries if e.kind == FILE_KIND_ADD
            for n in (e.file.file_name, *e.file.extra_files)}


def preview_tag_deletion(table: Table, name: str, tag: Snapshot) -> FileTally:
    """What deleting the tag would delete now (a dry run): nothing but its file while its
    snapshot is live."""
    tally = FileTally()
    if table.snapshots.exists(tag.id):
        return tally
    for deletion in files_only_kept_by(table, name, tag)[1]:
        tally.add(deletion.kind, file_size(table.storage, deletion) or 0)
    return tally


def _drop_tag_file(table: Table, name: str, replacement: bytes | None) -> None:
    if replacement is None:
        delete_tag_file(table, name)
    else:
        table.storage.write_bytes(tag_path(table, name), replacement)


def delete_tag_with_files(table: Table, name: str, snapshot_id: int, clock: Clock, *,
                          replacement: bytes | None = None,
                          mapper: TaskMapper | None = None) -> TagDeletionResult | None:
    """Delete the tag ``name`` pinning ``snapshot_id`` and every file only it kept; None (and
    nothing deleted) if the tag is gone or pins another snapshot now. With ``replacement``
    (a tag of another snapshot, still live) the tag's file is overwritten with it instead,
    and the files only the old snapshot kept go all the same. With a ``mapper`` (Spark) those
    files are deleted in its tasks."""
    tag = read_tag(table, name)
    if tag is None or tag.snapshot.id != snapshot_id:
        return None
    if table.snapshots.exists(snapshot_id):
        _drop_tag_file(table, name, replacement)
        crash_point("tags.tag_deleted")
        return TagDeletionResult(name, snapshot_id, snapshot_live=True)
    found, candidates = files_only_kept_by(table, name, tag.snapshot)
    tally = FileTally()
    storage = table.storage
    job_name = "delete_tag" if replacement is None else "replace_tag"
    with recorded_job(table, job_name, clock) as job:
        for deletion in candidates:
            job.note(deletion.path)  # a path outside the table is not noted
        crash_point("tags.deletion_noted")
        again = read_tag(table, name)
        if again is None or again.snapshot.id != snapshot_id:
            job.keep(_name(d.path) for d in candidates)  # replaced meanwhile: delete nothing
            return None
        _drop_tag_file(table, name, replacement)
        crash_point("tags.tag_deleted")
        used = still_needed(table, tag.snapshot,
                            tag_path(table, name) if replacement is None else None)
        job.keep(used)  # the job's end deletes the noted files nothing needs: done below
        unused = [d for d in candidates if _name(d.path) not in used]
        if mapper is not None:
            delete_all_in_tasks(mapper, table, unused, tally)
        else:
            for deletion in unused:
                delete_counted(storage, deletion, tally)
                crash_point("tags.file_deleted")
        if table.options().snapshot_clean_empty_directories:
            remove_empty_dirs(storage, found.bucket_dirs)
            crash_point("tags.directories_removed")
    return TagDeletionResult(name, snapshot_id, False, tally, found.unreadable)
