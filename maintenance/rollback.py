"""Rolling a table (or one of its branches) back to a snapshot, a tag or a moment: Java
``AbstractFileStoreTable.rollbackTo`` with ``RollbackHelper`` and
``SnapshotManager.earlierOrEqualTimeMills`` (apache/paimon release-2.0.0), behind Paimon's
``rollback`` and ``rollback_to_timestamp`` procedures.

The target: a snapshot that exists (a snapshot id that does not, but that a tag pins, is that
tag, as in Java); a tag; or the latest snapshot committed at or before a moment. Everything
newer than the target goes: every snapshot, every long-lived changelog and every tag of the
branch with a larger id (Java ``cleanLargerThan``). A tag whose snapshot has expired has its
JSON, trimmed to a snapshot, written back as the only snapshot, and ``EARLIEST`` names it
(Java ``createSnapshotFileIfNeeded``): every snapshot left is newer than the tag then, so none
older remains. Consumers are left as they are, as Java leaves them (the plan names those that
point past the target). Java 1.2 and later leave the data files, manifests and index files
only the removed snapshots used to orphan removal; paimond deletes them, keeping every file
that anything remaining names (every branch's snapshots, tags and changelogs).

Crash safety: before anything changes, ``<branch>/.paimond/rollbacks/rollback-<id>-<uuid>.json``
records what goes. Then, each step safe to repeat:

1. ``LATEST`` = the target (it exists, so the hint always names a readable snapshot; a reader
   verifies it and lists while newer snapshots remain);
2. the snapshot files, newest first: the ids stay contiguous and a reader finds a snapshot the
   table had committed, every file it names still there. A kill here leaves the table at one
   of the snapshots between the target and the old latest; the rerun goes on down. For an
   expired tag, the oldest remaining snapshot is kept until the tag's snapshot is written
   back, so the table never has no snapshot (one step has both, with a gap between them),
   then ``EARLIEST`` names the tag's;
3. the long-lived changelogs, newest first, after their ``LATEST`` names the newest one kept;
4. the tags after the target (before the files they name: a tag never names a deleted file);
5. the data, changelog and extra files, then manifests before their manifest lists and index
   files before their index manifest, each only if nothing that remains names it (read again
   here: a tag or branch made meanwhile keeps its files);
6. the record.

A rollback first finishes every record it finds (the rerun of a killed one, or another
target's). No Java counterpart for the record: Java deletes snapshots, changelogs and tags in
that order without one.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass, field

from paimond.errors import (
    CodecError,
    CommitConflictError,
    ConfigError,
    CorruptFileError,
    MissingFileError,
    RefusedError,
)
from paimond.faults import crash_point
from paimond.format.meta.snapshot import (
    TAG_CREATE_TIME,
    TAG_TIME_RETAINED,
    Snapshot,
    decode_snapshot,
    encode_snapshot,
)
from paimond.maintenance.expire.record import (
    delete_all_counted,
    file_size,
    long_lived_changelogs,
)
from paimond.maintenance.expire.references import (
    FileTally,
    SnapshotSource,
    referencing_snapshots,
    used_files,
)
from paimond.maintenance.expire.snapshot_deletion import Deletion
from paimond.maintenance.tags.deletion import tag_files
from paimond.table.catalog import Table
from paimond.table.catalogs.catalog_storage import committed_through_server
from paimond.table.layout import (
    EARLIEST_HINT,
    LATEST_HINT,
    PAIMOND_DIR,
    ROLLBACKS_DIR,
    TAG_DIR,
    TAG_PREFIX,
)
from paimond.table.snapshots import Snapshots
from paimond.table.tags import delete_tag_file, read_tag
from paimond.table.watermarks import earlier_or_equal_watermark

RECORD_PREFIX, RECORD_SUFFIX = "rollback-", ".json"
_VERSION = 1
_DATA_KINDS = ("data", "changelog", "file-index")

SNAPSHOT, TAG, TIMESTAMP, WATERMARK = "snapshot", "tag", "timestamp", "watermark"


@dataclass(frozen=True, slots=True)
class RollbackTarget:
    """What to roll back to: ``kind`` snapshot (``snapshot_id``), tag (``tag``), timestamp
    (``timestamp_ms``, epoch milliseconds) or watermark (``watermark``)."""

    kind: str
    snapshot_id: int | None = None
    tag: str | None = None
    timestamp_ms: int | None = None
    watermark: int | None = None

    def describe(self) -> str:
        if self.kind == SNAPSHOT:
            return f"snapshot {self.snapshot_id}"
        if self.kind == TAG:
            return f"tag {self.tag}"
        if self.kind == WATERMARK:
            return f"the latest snapshot whose watermark is at most {self.watermark}"
        return f"the latest snapshot committed at or before {self.timestamp_ms} ms"


@dataclass(frozen=True, slots=True)
class RollbackWork:
    """What one rollback changes, in order; what its record holds."""

    snapshot_id: int  # the target: the latest snapshot afterwards
    restored: Snapshot | None  # an expired tag's snapshot, written back
    snapshot_ids: tuple[int, ...]  # deleted, newest first
    changelog_ids: tuple[int, ...]  # deleted, newest first
    changelog_latest: int | None  # changelog/LATEST afterwards (-1: none left, as Java)
    tags: tuple[tuple[str, int], ...]  # (name, snapshot id), deleted
    files: tuple[Deletion, ...]  # data kinds first, then metadata children before parents


@dataclass(frozen=True, slots=True)
class RollbackPlan:
    """A rollback read from the table's metadata; nothing changed yet."""

    table: str
    target: RollbackTarget
    tag: str | None  # the tag the target snapshot comes from, if any
    previous_latest_id: int
    work: RollbackWork
    consumers_past: tuple[tuple[str, int], ...]  # (consumer, next snapshot) past the target


@dataclass(frozen=True, slots=True)
class RollbackResult:
    """A rollback's plan (``done`` False) or what it did. ``files``/``size_bytes`` per kind."""

    table: str
    target: str
    snapshot_id: int
    previous_snapshot_id: int
    snapshots_deleted: list[int]
    restored_from_tag: str | None
    changelogs_deleted: list[int]
    tags_deleted: list[str]
    consumers_past_target: dict[str, int]
    files: dict[str, int] = field(default_factory=dict)
    size_bytes: dict[str, int] = field(default_factory=dict)
    interrupted_finished: int = 0  # records of killed rollbacks finished first
    interrupted_pending: int = 0  # such records a dry run found (finished by the real run)
    dry_run: bool = False
    done: bool = False

    def describe(self) -> str:
        verb = "rolled back" if self.done else "rolls back"
        gone = "deleted" if self.done else "to delete"
        named = "" if self.target == f"snapshot {self.snapshot_id}" else f" ({self.target})"
        lines = [f"{self.table}: {verb} to snapshot {self.snapshot_id}{named} from snapshot "
                 f"{self.previous_snapshot_id}"]
        if self.interrupted_finished:
            lines.append(f"  finished {self.interrupted_finished} interrupted rollback(s) first")
        if self.interrupted_pending:
            lines.append(f"  {self.interrupted_pending} interrupted rollback(s) will be "
                         "finished first")
        if not (self.snapshots_deleted or self.restored_from_tag or self.changelogs_deleted
                or self.tags_deleted or self.files):
            lines.append("  nothing newer than the target: nothing to do")
        if self.snapshots_deleted:
            lines.append(f"  snapshots {gone}: {_ids(self.snapshots_deleted)}")
        if self.restored_from_tag:
            lines.append(f"  snapshot {self.snapshot_id} written back from tag "
                         f"{self.restored_from_tag} (its snapshot had expired); EARLIEST = "
                         f"{self.snapshot_id}")
        if self.changelogs_deleted:
            lines.append(f"  long-lived changelogs {gone}: {_ids(self.changelogs_deleted)}")
        if self.tags_deleted:
            lines.append(f"  tags after the target {gone} (as Paimon does): "
                         f"{', '.join(self.tags_deleted)}")
        for consumer, next_id in sorted(self.consumers_past_target.items()):
            lines.append(f"  consumer {consumer} points past the target (next snapshot "
                         f"{next_id}); kept, as Paimon keeps it")
        if self.files:
            tally = FileTally()
            tally.files.update(self.files)
            tally.size_bytes.update(self.size_bytes)
            lines.append(f"  files only they used, {gone}: {tally.total_files} "
                         f"({tally.total_bytes:,} bytes)")
            lines += tally.lines("    ")
        return "\n".join(lines)


def _ids(ids: list[int]) -> str:
    return ", ".join(map(str, ids))


def records_dir(table: Table) -> str:
    return table.meta_file_path(PAIMOND_DIR, ROLLBACKS_DIR)


def trimmed_to_snapshot(tag: Snapshot) -> Snapshot:
    """Java ``Tag.trimToSnapshot``: the tag's JSON without its create time and retention."""
    extra = {k: v for k, v in tag.extra.items() if k not in (TAG_CREATE_TIME, TAG_TIME_RETAINED)}
    return dataclasses.replace(tag, extra=extra)


# ---- plan ----------------------------------------------------------------------------------


def _resolve(table: Table, target: RollbackTarget, latest_id: int
             ) -> tuple[int, str | None, Snapshot | None]:
    """(target snapshot id, the tag it comes from, the snapshot to write back)."""
    snapshots = table.snapshots
    if target.kind == SNAPSHOT:
        assert target.snapshot_id is not None
        if snapshots.exists(target.snapshot_id):
            return target.snapshot_id, None, None
        pinning = sorted(n for n, s in table.tags().items() if s.id == target.snapshot_id)
        if not pinning:
            raise ConfigError("--to-snapshot", f"{table.name} has no snapshot "
                              f"{target.snapshot_id} and no tag of it")
        return _resolve_tag(table, pinning[0], latest_id)
    if target.kind == TAG:
        assert target.tag is not None
        return _resolve_tag(table, target.tag, latest_id)
    if target.kind == WATERMARK:  # Java rollback_to_watermark
        assert target.watermark is not None
        found = earlier_or_equal_watermark(snapshots, target.watermark)
        if found is None:
            raise ConfigError("--to-watermark", f"{table.name} has no snapshot whose watermark "
                              f"is at most {target.watermark}")
        return found.id, None, None
    assert target.timestamp_ms is not None
    for snapshot_id in reversed(snapshots.list_ids()):
        if snapshots.load(snapshot_id).time_millis <= target.timestamp_ms:
            return snapshot_id, None, None
    raise ConfigError("--to-timestamp", f"{table.name} has no snapshot committed at or before "
                      f"{target.timestamp_ms} ms")


def _resolve_tag(table: Table, name: str, latest_id: int
                 ) -> tuple[int, str | None, Snapshot | None]:
    tag = read_tag(table, name)
    if tag is None:
        known = ", ".join(table.tags()) or "none"
        raise ConfigError("--to-tag", f"{table.name} has no tag {name!r} (its tags: {known})")
    snapshot_id = tag.snapshot.id
    if table.snapshots.exists(snapshot_id):
        return snapshot_id, name, None
    earliest = table.snapshots.earliest_id()
    if snapshot_id > latest_id or (earliest is not None and snapshot_id > earliest):
        raise ConfigError("--to-tag", f"tag {name}'s snapshot {snapshot_id} is missing but "
                          f"not expired (snapshots {earliest}..{latest_id}): not rolled back")
    return snapshot_id, name, trimmed_to_snapshot(tag.snapshot)


def _removed_sources(table: Table, snapshot_ids: list[int], changelogs: Snapshots,
                     changelog_ids: list[int], tags: list[tuple[str, Snapshot]]
                     ) -> list[SnapshotSource]:
    sources = []
    for kind, store, ids in (("snapshot", table.snapshots, snapshot_ids),
                             ("changelog", changelogs, changelog_ids)):
        for snapshot_id in ids:
            sources.append(SnapshotSource(table.branch, kind, store.path(snapshot_id),
                                          store.load(snapshot_id)))
    for name, tag in tags:
        sources.append(SnapshotSource(table.branch, "tag",
                                      table.meta_file_path(TAG_DIR, TAG_PREFIX + name), tag))
    return sources


def _files_of(table: Table, sources: list[SnapshotSource], keep: set[str]) -> list[Deletion]:
    """Every file ``sources`` name that ``keep`` does not: data kinds first, then metadata,
    a manifest before the first list naming it and an index file before its index manifest
    (first occurrences, in source order, keep each source's own order)."""
    data: dict[str, Deletion] = {}
    metadata: dict[str, Deletion] = {}
    for source in sources:
        for deletion in tag_files(table, source.snapshot, source.path).deletions:
            if deletion.path.rsplit("/", 1)[-1] in keep:
                continue
            (data if deletion.kind in _DATA_KINDS else metadata).setdefault(deletion.path,
                                                                             deletion)
    return [*data.values(), *metadata.values()]


def plan_rollback(table: Table, target: RollbackTarget) -> RollbackPlan:
    """Read what rolling ``table`` back to ``target`` changes. ConfigError for a target that
    is not there (or a table with no snapshot); a missing or corrupt file that something
    remaining names raises, so nothing is planned on a partial view."""
    if committed_through_server(table.storage):
        raise RefusedError("rollback", "the table's snapshots are committed through its REST "
                                       "catalog's server, whose own rollback paimond does not "
                                       "run yet", table.path)
    latest_id = table.snapshots.latest_id()
    if latest_id is None:
        raise ConfigError("rollback", f"{table.name} has no snapshot to roll back")
    snapshot_id, tag, restored = _resolve(table, target, latest_id)
    snapshot_ids = [i for i in reversed(table.snapshots.list_ids()) if i > snapshot_id]
    changelogs = long_lived_changelogs(table)
    all_changelogs = changelogs.list_ids()
    changelog_ids = [i for i in reversed(all_changelogs) if i > snapshot_id]
    kept_changelogs = [i for i in all_changelogs if i <= snapshot_id]
    changelog_latest = (kept_changelogs[-1] if kept_changelogs else -1) if changelog_ids else None
    tags = sorted(((n, s) for n, s in table.tags().items() if s.id > snapshot_id),
                  key=lambda item: (-item[1].id, item[0]))
    removed = _removed_sources(table, snapshot_ids, changelogs, changelog_ids, tags)
    removed_paths = {s.path for s in removed}
    retained = [s for s in referencing_snapshots(table)
                if not (s.branch == table.branch and s.path in removed_paths)]
    files = _files_of(table, removed, used_files(table, retained).all) if removed else []
    work = RollbackWork(snapshot_id, restored, tuple(snapshot_ids), tuple(changelog_ids),
                        changelog_latest, tuple((n, s.id) for n, s in tags), tuple(files))
    consumers = tuple((c, n) for c, n in table.consumers().items() if n > snapshot_id + 1)
    return RollbackPlan(table.name, target, tag, latest_id, work, consumers)


def result_of(plan: RollbackPlan, tally: FileTally, *, done: bool, dry_run: bool = False,
              finished: int = 0, pending: int = 0) -> RollbackResult:
    work = plan.work
    return RollbackResult(
        plan.table, plan.target.describe() if plan.tag is None or plan.target.kind == TAG
        else f"{plan.target.describe()}, tag {plan.tag}", work.snapshot_id,
        plan.previous_latest_id, list(work.snapshot_ids),
        plan.tag if work.restored is not None else None, list(work.changelog_ids),
        [n for n, _ in work.tags], dict(plan.consumers_past), dict(tally.files),
        dict(tally.size_bytes), finished, pending, dry_run, done)


def planned_tally(table: Table, plan: RollbackPlan) -> FileTally:
    """The files the plan deletes that are still there, with their sizes."""
    tally = FileTally()
    for deletion in plan.work.files:
        size = file_size(table.storage, deletion)
        if size is not None:
            tally.add(deletion.kind, size)
    return tally


# ---- record --------------------------------------------------------------------------------


def _relative(table: Table, path: str) -> str:
    prefix = table.path.rstrip("/") + "/"
    return path[len(prefix):] if path.startswith(prefix) else path


def _absolute(table: Table, path: str) -> str:
    return path if path.startswith("/") or "://" in path else table.file_path(path)


def encode_record(table: Table, work: RollbackWork) -> bytes:
    restored = None if work.restored is None else encode_snapshot(work.restored).decode()
    return json.dumps({
        "version": _VERSION, "snapshotId": work.snapshot_id, "restored": restored,
        "snapshots": list(work.snapshot_ids), "changelogs": list(work.changelog_ids),
        "changelogLatest": work.changelog_latest, "tags": [list(t) for t in work.tags],
        "files": [[d.kind, _relative(table, d.path), d.size_bytes] for d in work.files]},
        indent=1).encode()


def decode_record(table: Table, path: str, data: bytes) -> RollbackWork:
    """Raises CorruptFileError naming ``path`` for anything but a record this version wrote."""
    try:
        record = json.loads(data)
        if record["version"] != _VERSION:
            raise ValueError(f"unknown version {record['version']}")
        restored = record["restored"]
        latest = record["changelogLatest"]
        return RollbackWork(
            int(record["snapshotId"]),
            None if restored is None else decode_snapshot(str(restored).encode()),
            tuple(int(i) for i in record["snapshots"]),
            tuple(int(i) for i in record["changelogs"]),
            None if latest is None else int(latest),
            tuple((str(n), int(i)) for n, i in record["tags"]),
            tuple(Deletion(str(kind), _absolute(table, str(p)),
                           None if size is None else int(size))
                  for kind, p, size in record["files"]))
    except (ValueError, KeyError, TypeError, CodecError) as error:
        raise CorruptFileError(path, f"not a rollback record: {error}") from None


# ---- execute -------------------------------------------------------------------------------


def _write_hint(table: Table, snapshots: Snapshots, hint: str, value: int) -> None:
    table.storage.write_bytes(snapshots.hint_path(hint), str(value).encode())


def _delete_snapshots(table: Table, ids: tuple[int, ...]) -> None:
    for snapshot_id in ids:
        table.storage.delete(table.snapshots.path(snapshot_id))
        crash_point("rollback.snapshot_deleted")


def _restore(table: Table, restored: Snapshot) -> None:
    """Write the tag's snapshot back, exclusively; one already there must be the same."""
    snapshots = table.snapshots
    path = snapshots.path(restored.id)
    if not table.storage.create_exclusive(path, encode_snapshot(restored)):
        if snapshots.load(restored.id) != restored:
            raise CorruptFileError(path, "holds another snapshot than the tag rolled back to")
    crash_point("rollback.snapshot_restored")


def _switch_snapshots(table: Table, work: RollbackWork) -> None:
    """Steps 1 and 2 of the module doc."""
    snapshots = table.snapshots
    if work.restored is None:
        if not snapshots.exists(work.snapshot_id):
            raise MissingFileError(snapshots.path(work.snapshot_id), "a rollback's target")
        _write_hint(table, snapshots, LATEST_HINT, work.snapshot_id)
        crash_point("rollback.latest_hint_written")
        _delete_snapshots(table, work.snapshot_ids)
        return
    _delete_snapshots(table, work.snapshot_ids[:-1])
    _restore(table, work.restored)
    _write_hint(table, snapshots, LATEST_HINT, work.snapshot_id)
    crash_point("rollback.latest_hint_written")
    _delete_snapshots(table, work.snapshot_ids[-1:])
    _write_hint(table, snapshots, EARLIEST_HINT, work.snapshot_id)
    crash_point("rollback.earliest_hint_written")


def finish(table: Table, work: RollbackWork, record: str, tally: FileTally) -> None:
    """Steps 1-6 of the module doc, each safe to repeat."""
    storage = table.storage
    _switch_snapshots(table, work)
    if work.changelog_ids:
        changelogs = long_lived_changelogs(table)
        assert work.changelog_latest is not None
        _write_hint(table, changelogs, LATEST_HINT, work.changelog_latest)
        crash_point("rollback.changelog_hint_written")
        for changelog_id in work.changelog_ids:
            storage.delete(changelogs.path(changelog_id))
            crash_point("rollback.changelog_deleted")
    for name, snapshot_id in work.tags:
        tag = read_tag(table, name)
        if tag is not None and tag.snapshot.id == snapshot_id:  # not replaced meanwhile
            delete_tag_file(table, name)
            crash_point("rollback.tag_deleted")
    if work.files:
        keep = used_files(table, referencing_snapshots(table)).all
        files = [d for d in work.files if d.path.rsplit("/", 1)[-1] not in keep]
        delete_all_counted(storage, files, tally, lambda _: crash_point("rollback.file_deleted"))
    storage.delete_many([record])
    crash_point("rollback.record_removed")


def _records(table: Table) -> list[str]:
    directory = records_dir(table)
    return sorted(table.storage.join(directory, s.name)
                  for s in table.storage.list_dir(directory)
                  if not s.is_dir and s.name.startswith(RECORD_PREFIX)
                  and s.name.endswith(RECORD_SUFFIX))


def pending_rollbacks(table: Table) -> int:
    """How many records of killed rollbacks wait to be finished."""
    return len(_records(table))


def finish_interrupted(table: Table) -> tuple[int, FileTally]:
    """Finish every rollback a killed run recorded; how many, and what went. An unreadable
    record raises before anything of it changes."""
    tally = FileTally()
    records = _records(table)
    for record in records:
        try:
            data = table.storage.read_bytes(record)
        except MissingFileError:
            continue  # finished meanwhile by its own run
        finish(table, decode_record(table, record, data), record, tally)
    return len(records), tally


def execute_rollback(table: Table, plan: RollbackPlan) -> FileTally:
    """Record ``plan``, then carry it out; CommitConflictError, with nothing changed, when a
    snapshot was committed since the plan."""
    latest_id = table.snapshots.latest_id()
    if latest_id != plan.previous_latest_id:
        raise CommitConflictError(table.name, "rollback: latest snapshot unchanged since the plan",
                                  str(plan.previous_latest_id), str(latest_id))
    tally = FileTally()
    work = plan.work
    if not (work.snapshot_ids or work.changelog_ids or work.tags or work.files):
        return tally
    record = table.storage.join(records_dir(table), f"{RECORD_PREFIX}{work.snapshot_id}-"
                                f"{uuid.uuid4().hex}{RECORD_SUFFIX}")
    table.storage.write_bytes(record, encode_record(table, work))
    crash_point("rollback.recorded")
    finish(table, work, record, tally)
    return tally
