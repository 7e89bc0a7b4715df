"""An expiration's deletions, in an order that keeps every snapshot a reader can find readable
at any crash, written down first so that the next run finishes what a killed one left. No Java
counterpart: Java ``ExpireSnapshotsImpl.expireUntil`` (apache/paimon 5dacde516b) deletes data
files, then manifests, then snapshot files, then moves ``EARLIEST``, so a kill leaves snapshot
files whose manifest lists or data files are gone.

Before anything is deleted, ``<table>/.paimond/expirations/expiration-<end>-<uuid>.json`` lists
every file the expiration deletes, with the tags and branches it saw. Then:

1. ``EARLIEST`` = end (unless it already names a later snapshot): a reader starting there finds
   kept snapshots only;
2. the expired snapshot files, ascending: a listing finds ``[k, end)`` and the kept ones,
   contiguous, and ``[k, end)`` still have every file they name. With a decoupled changelog,
   ``changelog/changelog-<id>`` (the snapshot's JSON, Java ``Changelog``) is created, or found
   equal, and ``changelog/LATEST`` advanced before ``snapshot-<id>`` goes, so a rerun never
   needs a snapshot file it deleted;
3. tags and branches that appeared since the record was written (a tag taken of an expired
   snapshot while it was still listed) protect their files from steps 4 and 5;
4. data files with their extra files, changelog files, then emptied directories (an option);
5. manifests before their manifest list, index files before their index manifest, statistics;
6. the record.

No file of steps 4 and 5 is named by a snapshot a reader can still find. An expiration first
finishes every record it finds, from step 1 (a record of a run still going is finished the same
way: both delete the same files in the same order). Paths inside the table are recorded
relative to it, so a copied table finishes its own record.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Sequence

from paimond.errors import CorruptFileError, MissingFileError
from paimond.faults import crash_point
from paimond.format.meta.snapshot import encode_snapshot
from paimond.maintenance.distributed import TaskMapper, delete_paths
from paimond.maintenance.expire.references import (
    FileTally,
    SnapshotSource,
    other_branches,
    referencing_snapshots,
    used_files,
)
from paimond.maintenance.expire.snapshot_deletion import Deletion, ExpireWork
from paimond.table.catalog import Table
from paimond.table.layout import (
    CHANGELOG_DIR,
    CHANGELOG_PREFIX,
    EARLIEST_HINT,
    EXPIRATIONS_DIR,
    LATEST_HINT,
    PAIMOND_DIR,
    SNAPSHOT_PREFIX,
    TAG_DIR,
    TAG_PREFIX,
)
from paimond.table.snapshots import Snapshots, parse_numbered_name
from paimond.table.storage.interface import Storage

RECORD_PREFIX, RECORD_SUFFIX = "expiration-", ".json"
_VERSION = 1
_VERSION_CHANGELOGS = 2  # a record that also writes long-lived changelogs


def long_lived_changelogs(table: Table) -> Snapshots:
    """``changelog/changelog-<id>`` and its hints (Java ``ChangelogManager``)."""
    return Snapshots(table.storage, table.meta_path, directory=CHANGELOG_DIR,
                     prefix=CHANGELOG_PREFIX)


def records_dir(table: Table) -> str:
    return table.meta_file_path(PAIMOND_DIR, EXPIRATIONS_DIR)


def _relative(table: Table, path: str) -> str:
    prefix = table.path.rstrip("/") + "/"
    return path[len(prefix):] if path.startswith(prefix) else path


def _absolute(table: Table, path: str) -> str:
    return path if path.startswith("/") or "://" in path else table.file_path(path)


def encode_record(table: Table, work: ExpireWork) -> bytes:
    def files(deletions: Sequence[Deletion]) -> list[list[object]]:
        return [[d.kind, _relative(table, d.path), d.size_bytes] for d in deletions]

    changelogs = {"writeChangelogs": True} if work.write_changelogs else {}
    return json.dumps({
        "version": _VERSION_CHANGELOGS if work.write_changelogs else _VERSION, **changelogs,
        "beginId": work.begin_id, "endId": work.end_id,
        "writeEarliest": work.write_earliest, "snapshots": files(work.snapshot_files),
        "data": files(work.data_files), "metadata": files(work.metadata),
        "bucketDirs": [[_relative(table, d), depth] for d, depth in work.bucket_dirs],
        "tags": [list(tag) for tag in work.tags], "branches": list(work.branches)},
        indent=1).encode()


def decode_record(table: Table, path: str, data: bytes) -> ExpireWork:
    """Raises CorruptFileError naming ``path`` for anything but a record this version wrote."""
    try:
        record = json.loads(data)
        if record["version"] not in (_VERSION, _VERSION_CHANGELOGS):
            raise ValueError(f"unknown version {record['version']}")

        def files(key: str) -> tuple[Deletion, ...]:
            return tuple(Deletion(str(kind), _absolute(table, str(p)),
                                  None if size is None else int(size))
                         for kind, p, size in record[key])

        return ExpireWork(
            record["beginId"], int(record["endId"]), files("data"),
            tuple((_absolute(table, str(d)), int(depth)) for d, depth in record["bucketDirs"]),
            files("metadata"), files("snapshots"), bool(record["writeEarliest"]),
            tags=tuple((str(name), int(i)) for name, i in record["tags"]),
            branches=tuple(str(b) for b in record["branches"]),
            write_changelogs=bool(record.get("writeChangelogs", False)))
    except (ValueError, KeyError, TypeError) as error:
        raise CorruptFileError(path, f"not an expiration record: {error}") from None


def file_size(storage: Storage, deletion: Deletion) -> int | None:
    if deletion.size_bytes is not None:
        return deletion.size_bytes
    try:
        return storage.size(deletion.path)
    except MissingFileError:
        return None


def delete_counted(storage: Storage, deletion: Deletion, tally: FileTally) -> None:
    size = file_size(storage, deletion)
    if storage.delete(deletion.path):
        tally.add(deletion.kind, size or 0)


def delete_all_counted(storage: Storage, deletions: Sequence[Deletion], tally: FileTally,
                       on_deleted: Callable[[str], object]) -> None:
    """Delete ``deletions`` in order, in batches on object stores (one request per 1,000
    keys, nothing asked first), counting what goes. A file whose size the metadata names is
    counted as it stands (a rerun after a crash may count again what the killed run
    deleted); one whose size it does not is asked for it, and skipped when absent."""
    present = []
    for deletion in deletions:
        size = file_size(storage, deletion)
        if size is None:  # absent (its size came from storage)
            continue
        present.append(deletion.path)
        tally.add(deletion.kind, size)
    storage.delete_many(present, on_deleted)


def delete_all_in_tasks(mapper: TaskMapper, table: Table, deletions: Sequence[Deletion],
                        tally: FileTally) -> None:
    """Delete ``deletions`` in ``mapper``'s tasks (Spark), counting the files the tasks
    found and deleted; all of ``deletions`` are gone when it returns."""
    sizes = {d.path: file_size(table.storage, d) for d in deletions}
    present = [path for path, size in sizes.items() if size is not None]
    deleted = delete_paths(mapper, table.location, present, f"expire {table.name}")
    for deletion in deletions:
        if deletion.path in deleted:
            tally.add(deletion.kind, sizes[deletion.path] or 0)
            deleted.discard(deletion.path)  # a path listed twice is counted once


def with_listed_sizes(storage: Storage, deletions: Sequence[Deletion]) -> list[Deletion]:
    """``deletions`` with the sizes their metadata does not name taken from one listing of
    each directory (not one request per file); those not listed are gone and left out."""
    unsized = {d.path.rpartition("/")[0] for d in deletions if d.size_bytes is None}
    listed = {s.path: s.size_bytes for directory in unsized for s in storage.list_dir(directory)
              if not s.is_dir}
    return [d if d.size_bytes is not None else Deletion(d.kind, d.path, listed[d.path])
            for d in deletions if d.size_bytes is not None or d.path in listed]


def remove_empty_dirs(storage: Storage, bucket_dirs: Iterable[tuple[str, int]]) -> None:
    """Bucket directories left empty, then their partition directories, deepest first."""
    level = {d for d, _ in bucket_dirs if storage.delete_dir_if_empty(d)}
    depth = max((n for _, n in bucket_dirs), default=0)
    for _ in range(depth):
        level = {parent for parent in {d.rsplit("/", 1)[0] for d in level}
                 if storage.delete_dir_if_empty(parent)}


def protected_since(table: Table, work: ExpireWork) -> set[str]:
    """Names the tags and branches that are not in the record reference."""
    recorded = dict(work.tags)
    sources = [SnapshotSource(table.branch, "tag",
                              table.meta_file_path(TAG_DIR, TAG_PREFIX + name), tag)
               for name, tag in table.tags().items() if recorded.get(name) != tag.id]
    new_branches = [b for b in other_branches(table) if b not in work.branches]
    if new_branches:
        sources += referencing_snapshots(table, new_branches)
    return used_files(table, sources).all if sources else set()


def _advance_earliest(table: Table, end_id: int) -> None:
    """``EARLIEST`` = ``end_id``, unless it names a later snapshot already (another run)."""
    hint = table.snapshots.read_hint(EARLIEST_HINT)
    if hint is None or hint < end_id:
        table.storage.write_bytes(table.snapshots.hint_path(EARLIEST_HINT), str(end_id).encode())


def keep_as_changelog(table: Table, snapshot_path: str) -> None:
    """Java ``ExpireSnapshotsImpl.commitChangelog``: ``changelog-<id>`` holds the snapshot's
    JSON before the snapshot file goes. Created exclusively; one already there must hold the
    same snapshot (a rerun, or Paimon), else CorruptFileError and the snapshot stays. A
    snapshot file already gone was kept by the run that deleted it."""
    snapshot_id = parse_numbered_name(snapshot_path.rsplit("/", 1)[-1], SNAPSHOT_PREFIX)
    if snapshot_id is None:
        raise CorruptFileError(snapshot_path, "not a snapshot file name")
    try:
        snapshot = table.snapshots.load(snapshot_id)
    except MissingFileError:
        return
    changelogs = long_lived_changelogs(table)
    path = changelogs.path(snapshot_id)
    if not table.storage.create_exclusive(path, encode_snapshot(snapshot)):
        if changelogs.load(snapshot_id) != snapshot:
            raise CorruptFileError(path, f"holds another snapshot than {snapshot_path}")
    crash_point("expire.changelog_written")
    latest = changelogs.read_hint(LATEST_HINT)
    if latest is None or latest < snapshot_id:
        table.storage.write_bytes(changelogs.hint_path(LATEST_HINT), str(snapshot_id).encode())
    crash_point("expire.changelog_hint_written")


def finish(table: Table, work: ExpireWork, record: str, tally: FileTally, *,
           clean_empty_directories: bool, mapper: TaskMapper | None = None) -> None:
    """Steps 1-6 of the module doc, each safe to repeat; with a ``mapper`` (Spark) the data
    and metadata files are deleted in its tasks."""
    storage = table.storage
    if work.write_earliest:
        _advance_earliest(table, work.end_id)
        crash_point("expire.earliest_written")
    # one at a time, oldest first, as Java deletes them; their sizes from one listing
    for deletion in with_listed_sizes(storage, work.snapshot_files):
        if work.write_changelogs:
            keep_as_changelog(table, deletion.path)
        delete_all_counted(storage, [deletion], tally,
                           lambda _: crash_point("expire.snapshot_file_deleted"))
    protected = protected_since(table, work)
    data_files = [d for d in work.data_files if d.path.rsplit("/", 1)[-1] not in protected]
    if mapper is not None:
        delete_all_in_tasks(mapper, table, data_files, tally)
    else:
        delete_all_counted(storage, data_files, tally,
                           lambda _: crash_point("expire.data_file_deleted"))
    if clean_empty_directories:
        remove_empty_dirs(storage, work.bucket_dirs)
        crash_point("expire.directories_removed")
    metadata = [d for d in work.metadata if d.path.rsplit("/", 1)[-1] not in protected]
    if mapper is not None:
        delete_all_in_tasks(mapper, table, metadata, tally)
    else:
        delete_all_counted(storage, metadata, tally,
                           lambda _: crash_point("expire.metadata_file_deleted"))
    storage.delete_many([record])
    crash_point("expire.record_removed")


def execute_expiration(table: Table, work: ExpireWork, *, dry_run: bool,
                       clean_empty_directories: bool = False,
                       mapper: TaskMapper | None = None) -> FileTally:
    """Record ``work``, then delete it in order (or, with ``dry_run``, only count what is
    still there); returns what went."""
    tally = FileTally()
    deletions = (*work.snapshot_files, *work.data_files, *work.metadata)
    if dry_run:
        for deletion in deletions:
            size = file_size(table.storage, deletion)
            if size is not None:  # None: already gone
                tally.add(deletion.kind, size)
        return tally
    if not deletions:  # the expired snapshot files are gone already
        if work.write_earliest:
            _advance_earliest(table, work.end_id)
        return tally
    record = table.storage.join(records_dir(table), f"{RECORD_PREFIX}{work.end_id}-"
                                f"{uuid.uuid4().hex}{RECORD_SUFFIX}")
    table.storage.write_bytes(record, encode_record(table, work))
    crash_point("expire.recorded")
    finish(table, work, record, tally, clean_empty_directories=clean_empty_directories,
           mapper=mapper)
    return tally


def finish_interrupted(table: Table, *, clean_empty_directories: bool,
                       mapper: TaskMapper | None = None) -> tuple[int, FileTally]:
    """Finish every expiration a killed run recorded; returns how many, and what went. An
    unreadable record raises before anything of it is deleted."""
    tally = FileTally()
    directory = records_dir(table)
    records = sorted(table.storage.join(directory, s.name)
                     for s in table.storage.list_dir(directory)
                     if not s.is_dir and s.name.startswith(RECORD_PREFIX)
                     and s.name.endswith(RECORD_SUFFIX))
    for record in records:
        try:
            data = table.storage.read_bytes(record)
        except MissingFileError:
            continue  # finished meanwhile by its own run
        finish(table, decode_record(table, record, data), record, tally,
               clean_empty_directories=clean_empty_directories, mapper=mapper)
    return len(records), tally
