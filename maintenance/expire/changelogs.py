"""Changelog expiration: Java ``ExpireChangelogImpl`` and ``ChangelogDeletion`` (apache/paimon
5dacde516b), with ``ExpireConfig``'s changelog options.

With a decoupled changelog (a ``changelog.*`` retention above its ``snapshot.*`` counterpart),
snapshot expiry keeps every expired snapshot as ``changelog/changelog-<id>``. The plan picks
``end`` (exclusive) from metadata and an injected ``now``: changelogs below
``latest snapshot - changelog retain max + 1`` go regardless, none at or above
``latest snapshot - changelog retain min + 1``, none a consumer will still read, at most
``snapshot.expire.limit`` from the earliest changelog, never the latest changelog, and the
first changelog (from the retain-max bound on) not older than ``changelog.time-retained``
ends the range (its own commit time, not its successor's, unlike snapshots).

What goes, for each changelog of ``[earliest, end)``:

- with a changelog manifest list (a changelog producer): the files it ADDs, its manifests and
  the list;
- without: the data files a DELETE entry of its delta retires (an ADD of the same file in that
  delta keeps it), unless the newest tag before it holds them; then its delta and base
  manifests and lists;
- never a manifest, list, index file or statistics file named by the tags in range, the end
  changelog or the earliest snapshot (and, unlike Java, by a branch); index manifests and
  statistics stay with snapshot expiry, as in Java.

Deletions follow ``expiration_record``'s crash-safe order with their own record
(``changelog-expiration-<end>-<uuid>.json``): the record, ``changelog/EARLIEST`` = end, the
changelog files ascending, then the files only they named, then the record. A run first
finishes every record a killed run left.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field

from paimond.errors import ConfigError, MissingFileError
from paimond.faults import crash_point
from paimond.format.meta.snapshot import Snapshot
from paimond.maintenance.distributed import TaskMapper
from paimond.maintenance.expire.record import (
    decode_record,
    delete_all_in_tasks,
    delete_counted,
    encode_record,
    file_size,
    long_lived_changelogs,
    protected_since,
    records_dir,
    remove_empty_dirs,
)
from paimond.maintenance.expire.references import (
    DATA,
    FILE_INDEX,
    MANIFEST,
    MANIFEST_LIST,
    FileTally,
    UsedFiles,
    live_data_files,
    other_branches,
    referencing_snapshots,
    used_files,
)
from paimond.maintenance.expire.snapshot_deletion import (
    DataPaths,
    Deletion,
    ExpireWork,
    changelog_deletions,
    newest_before,
    retired_in_delta,
    skipping_tags,
)
from paimond.table.catalog import Table
from paimond.table.layout import EARLIEST_HINT, MANIFEST_DIR, TAG_DIR, TAG_PREFIX
from paimond.table.scan.snapshot_scan import read_index_manifest, read_manifest_list

RECORD_PREFIX, RECORD_SUFFIX = "changelog-expiration-", ".json"
LONG_LIVED_CHANGELOG = "changelog-file"  # the report's kind for changelog/changelog-<id>


@dataclass(frozen=True, slots=True)
class ChangelogSettings:
    """Java ``ExpireConfig``'s changelog half: each unset ``changelog.*`` option is its
    ``snapshot.*`` counterpart; ``max_deletes`` is ``snapshot.expire.limit``."""

    retain_min: int
    retain_max: int
    time_retained_ms: int
    max_deletes: int
    clean_empty_directories: bool = False

    def validate(self) -> None:
        if self.retain_max < self.retain_min:
            raise ConfigError("changelog.num-retained.max", f"retain max ({self.retain_max}) "
                              f"must not be less than retain min ({self.retain_min})")


@dataclass(frozen=True, slots=True)
class ChangelogHistory:
    latest_snapshot_id: int | None
    earliest_snapshot_id: int | None
    latest_changelog_id: int | None
    earliest_changelog_id: int | None
    min_consumer_next: int | None = None
    time_millis: dict[int, int] = field(default_factory=dict)  # changelog id -> timeMillis


@dataclass(frozen=True, slots=True)
class ChangelogExpirePlan:
    table_name: str
    earliest_id: int | None  # the earliest changelog
    end_id: int | None  # exclusive: changelogs [earliest, end) expire
    bound: str
    # bound time-retained: the wall ms from which the changelog at the bound is old enough
    due_at_ms: int | None = None

    @property
    def expires(self) -> bool:
        return (self.earliest_id is not None and self.end_id is not None
                and self.end_id > self.earliest_id)

    def describe(self) -> str:
        if not self.expires or self.end_id is None:
            return f"{self.table_name}: no changelog to expire ({self.bound})"
        return (f"{self.table_name}: changelogs {self.earliest_id}..{self.end_id - 1} expire "
                f"(bound: {self.bound})")


def read_changelog_history(table: Table, settings: ChangelogSettings,
                           min_consumer_next: int | None) -> ChangelogHistory:
    changelogs = long_lived_changelogs(table)
    history = ChangelogHistory(table.snapshots.latest_id(), table.snapshots.earliest_id(),
                               changelogs.latest_id(), changelogs.earliest_id(), min_consumer_next)
    if None in (history.latest_snapshot_id, history.earliest_changelog_id,
                history.latest_changelog_id):
        return history
    assert history.latest_snapshot_id is not None and history.earliest_changelog_id is not None
    assert history.latest_changelog_id is not None
    low = max(history.latest_snapshot_id - settings.retain_max + 1, history.earliest_changelog_id)
    high = min(history.latest_snapshot_id - settings.retain_min + 1,
               history.earliest_changelog_id + settings.max_deletes, history.latest_changelog_id)
    for changelog_id in range(low, high + 1):
        try:
            history.time_millis[changelog_id] = changelogs.load(changelog_id).time_millis
        except MissingFileError:
            pass  # expired meanwhile, as Java tolerates
    return history


def plan_changelog_expiration(table_name: str, history: ChangelogHistory,
                              settings: ChangelogSettings, now_ms: int) -> ChangelogExpirePlan:
    """Java ``ExpireChangelogImpl.expire``: the range to expire, from metadata alone."""
    settings.validate()
    latest, earliest = history.latest_snapshot_id, history.earliest_changelog_id
    latest_changelog = history.latest_changelog_id
    if (latest is None or history.earliest_snapshot_id is None or earliest is None
            or latest_changelog is None):
        return ChangelogExpirePlan(table_name, earliest, None, "no changelogs")
    low = max(latest - settings.retain_max + 1, earliest)
    end, bound = latest - settings.retain_min + 1, "retain-min"
    if history.min_consumer_next is not None and history.min_consumer_next < end:
        end, bound = history.min_consumer_next, "consumer"
    if earliest + settings.max_deletes < end:
        end, bound = earliest + settings.max_deletes, "expire-limit"
    if latest_changelog < end:
        end, bound = latest_changelog, "latest changelog"
    if end <= earliest:
        return ChangelogExpirePlan(table_name, earliest, end, bound)
    older_than_ms = now_ms - settings.time_retained_ms
    for changelog_id in range(low, end + 1):
        time_ms = history.time_millis.get(changelog_id)
        if time_ms is not None and older_than_ms <= time_ms:
            return ChangelogExpirePlan(table_name, earliest, changelog_id, "time-retained",
                                       due_at_ms=time_ms + settings.time_retained_ms + 1)
    return ChangelogExpirePlan(table_name, earliest, end, bound)


def _list_names(table: Table, name: str, where: str) -> set[str] | None:
    """A manifest list's name and its manifests' names; None if it is gone."""
    try:
        return {name, *(m.file_name for m in read_manifest_list(table, name, where))}
    except MissingFileError:
        return None


def _skipping_names(table: Table, snapshot: Snapshot, where: str) -> set[str]:
    """Java ``ChangelogDeletion.manifestSkippingSet`` for one snapshot: what exists of its
    base and delta lists with their manifests, its index manifest with its index files, and
    its statistics."""
    names: set[str] = set()
    for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
        names |= _list_names(table, name, where) or set()
    if snapshot.index_manifest:
        try:
            entries = read_index_manifest(table, snapshot)
            names |= {snapshot.index_manifest, *(e.index_file.file_name for e in entries)}
        except MissingFileError:
            pass
    if snapshot.statistics:
        names.add(snapshot.statistics)
    return names


def _unused_list(table: Table, name: str, skip: set[str], where: str) -> list[Deletion]:
    """Java ``collectUnusedManifestList``: the manifests of a list, then the list, unless
    ``skip`` holds them; ``skip`` grows with each, so each file is named once."""
    try:
        metas = read_manifest_list(table, name, where)
    except MissingFileError:
        return []  # deleted by snapshot expiry, or by an interrupted run
    out = []
    for meta in metas:
        if meta.file_name not in skip:
            skip.add(meta.file_name)
            out.append(Deletion(MANIFEST, table.file_path(MANIFEST_DIR, meta.file_name),
                                meta.file_size))
    if name not in skip:
        skip.add(name)
        out.append(Deletion(MANIFEST_LIST, table.file_path(MANIFEST_DIR, name), None))
    return out


@dataclass
class _Collected:
    data: dict[str, Deletion] = field(default_factory=dict)
    bucket_dirs: set[str] = field(default_factory=set)
    metadata: list[Deletion] = field(default_factory=list)
    protected: int = 0


def _collect_delta(table: Table, changelog: Snapshot, paths: DataPaths, held: set[tuple[bytes, int, str]],
                   branch_data: set[str], out: _Collected) -> None:
    """Java ``planDeletedInDeltaManifest`` with the tag skipper."""
    found = retired_in_delta(table, changelog, paths)
    if found is None:
        return  # Java cancels the deletion when the delta cannot be read
    for path, entry in found[0].items():
        meta = entry.file
        if (entry.partition, entry.bucket, meta.file_name) in held or meta.file_name in branch_data:
            out.protected += 1
            continue
        out.data.setdefault(path, Deletion(DATA, path, meta.file_size))
        for name in meta.extra_files:
            extra = paths.extra(entry, name)
            out.data.setdefault(extra, Deletion(FILE_INDEX, extra, None))
        out.bucket_dirs.add(paths.bucket_dir(entry))


def collect_expired_changelogs(table: Table, earliest_id: int, end_id: int) -> ExpireWork | None:
    """Read what expiring changelogs [earliest, end) deletes; None when the end changelog or
    the earliest snapshot is gone (Java skips the expiration then)."""
    changelogs = long_lived_changelogs(table)
    earliest_snapshot_id = table.snapshots.earliest_id()
    try:
        end = changelogs.load(end_id)
        if earliest_snapshot_id is None:
            return None
        earliest_snapshot = table.snapshots.load(earliest_snapshot_id)
    except MissingFileError:
        return None
    tag_items = sorted(table.tags().items(), key=lambda item: item[1].id)
    tags = [tag for _, tag in tag_items]
    tag_paths = {tag.id: table.meta_file_path(TAG_DIR, TAG_PREFIX + name)
                 for name, tag in tag_items}
    branch_names = tuple(other_branches(table))
    branches = (used_files(table, referencing_snapshots(table, branch_names))
                if branch_names else UsedFiles())
    skip = set(branches.metadata)
    for tag in skipping_tags(tags, earliest_id, end_id):
        skip |= _skipping_names(table, tag, tag_paths[tag.id])
    skip |= _skipping_names(table, end, changelogs.path(end_id))
    skip |= _skipping_names(table, earliest_snapshot, table.snapshots.path(earliest_snapshot_id))
    paths = DataPaths(table, table.latest_schema())
    out, files, held_by_tag = _Collected(), [], {}
    for changelog_id in range(earliest_id, end_id):
        try:
            changelog = changelogs.load(changelog_id)
        except MissingFileError:
            continue
        where = changelogs.path(changelog_id)
        if changelog.changelog_manifest_list:
            for deletion in changelog_deletions(table, [changelog], paths):
                out.data.setdefault(deletion.path, deletion)
                out.bucket_dirs.add(deletion.path.rsplit("/", 1)[0])
            out.metadata += _unused_list(table, changelog.changelog_manifest_list, skip, where)
        else:
            index = newest_before(tags, changelog_id)
            held: set[tuple[bytes, int, str]] = set()
            if index >= 0:
                tag = tags[index]
                if tag.id not in held_by_tag:
                    held_by_tag[tag.id] = live_data_files(table, tag, tag_paths[tag.id])
                held = held_by_tag[tag.id]
            _collect_delta(table, changelog, paths, held, branches.data, out)
            out.metadata += _unused_list(table, changelog.delta_manifest_list, skip, where)
            out.metadata += _unused_list(table, changelog.base_manifest_list, skip, where)
        files.append(Deletion(LONG_LIVED_CHANGELOG, where, None))
    begin = int(files[0].path.rsplit("-", 1)[-1]) if files else None
    return ExpireWork(begin, end_id, tuple(out.data.values()),
                      tuple((d, paths.depth) for d in sorted(out.bucket_dirs)),
                      tuple(out.metadata), tuple(files), write_earliest=True,
                      protected_data_files=out.protected,
                      tags=tuple((name, tag.id) for name, tag in tag_items), branches=branch_names)


def _advance_earliest(table: Table, end_id: int) -> None:
    changelogs = long_lived_changelogs(table)
    hint = changelogs.read_hint(EARLIEST_HINT)
    if hint is None or hint < end_id:
        table.storage.write_bytes(changelogs.hint_path(EARLIEST_HINT), str(end_id).encode())


def finish_changelog_expiration(table: Table, work: ExpireWork, record: str, tally: FileTally,
                                *, clean_empty_directories: bool,
                                mapper: TaskMapper | None = None) -> None:
    """Readers first: the earliest hint, the changelog files ascending, then the files only
    they named, then the record; each step safe to repeat. With a ``mapper`` (Spark) the data
    and metadata files are deleted in its tasks."""
    storage = table.storage
    _advance_earliest(table, work.end_id)
    crash_point("expire_changelog.earliest_written")
    for deletion in work.snapshot_files:
        delete_counted(storage, deletion, tally)
        crash_point("expire_changelog.changelog_file_deleted")
    protected = protected_since(table, work)
    data_files = [d for d in work.data_files if d.path.rsplit("/", 1)[-1] not in protected]
    if mapper is not None:
        delete_all_in_tasks(mapper, table, data_files, tally)
    else:
        for deletion in data_files:
            delete_counted(storage, deletion, tally)
            crash_point("expire_changelog.data_file_deleted")
    if clean_empty_directories:
        remove_empty_dirs(storage, work.bucket_dirs)
        crash_point("expire_changelog.directories_removed")
    metadata = [d for d in work.metadata if d.path.rsplit("/", 1)[-1] not in protected]
    if mapper is not None:
        delete_all_in_tasks(mapper, table, metadata, tally)
    else:
        for deletion in metadata:
            delete_counted(storage, deletion, tally)
            crash_point("expire_changelog.metadata_file_deleted")
    storage.delete(record)
    crash_point("expire_changelog.record_removed")


def execute_changelog_expiration(table: Table, work: ExpireWork, *, dry_run: bool,
                                 clean_empty_directories: bool = False,
                                 mapper: TaskMapper | None = None) -> FileTally:
    """Record ``work``, then delete it in order (``dry_run``: count what is still there)."""
    tally = FileTally()
    deletions = (*work.snapshot_files, *work.data_files, *work.metadata)
    if dry_run:
        for deletion in deletions:
            size = file_size(table.storage, deletion)
            if size is not None:
                tally.add(deletion.kind, size)
        return tally
    if not deletions:
        return tally
    record = table.storage.join(records_dir(table), f"{RECORD_PREFIX}{work.end_id}-"
                                f"{uuid.uuid4().hex}{RECORD_SUFFIX}")
    table.storage.write_bytes(record, encode_record(table, work))
    crash_point("expire_changelog.recorded")
    finish_changelog_expiration(table, work, record, tally,
                                clean_empty_directories=clean_empty_directories, mapper=mapper)
    return tally


def finish_interrupted_changelogs(table: Table, *, clean_empty_directories: bool,
                                  mapper: TaskMapper | None = None) -> tuple[int, FileTally]:
    """Finish every changelog expiration a killed run recorded."""
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
            continue
        finish_changelog_expiration(table, decode_record(table, record, data), record, tally,
                                    clean_empty_directories=clean_empty_directories,
                                    mapper=mapper)
    return len(records), tally


@dataclass
class ChangelogExpireResult:
    plan: ChangelogExpirePlan
    work: ExpireWork | None
    deleted: FileTally
    dry_run: bool
    finished_records: int = 0
    finished: FileTally = field(default_factory=FileTally)

    def quiet_until_ms(self) -> float | None:
        """As :meth:`ExpireResult.quiet_until_ms`, for the changelogs: the count bounds (and
        the latest changelog, which moves only with snapshot expiry) hold for ever."""
        plan = self.plan
        if self.dry_run or self.finished_records or plan.expires:
            return None
        if plan.bound in ("retain-min", "no changelogs", "latest changelog"):
            return math.inf
        return plan.due_at_ms if plan.bound == "time-retained" else None

    def lines(self) -> list[str]:
        out = []
        if self.finished_records:
            out += [f"{self.plan.table_name}: finished {self.finished_records} interrupted "
                    f"changelog expiration(s): deleted {self.finished.total_files} files, "
                    f"{self.finished.total_bytes:,} bytes", *self.finished.lines("    ")]
        work = self.work
        if work is None or work.begin_id is None:
            return [*out, self.plan.describe()]
        verb = "would delete" if self.dry_run else "deleted"
        out += [f"{self.plan.table_name}: {'would expire' if self.dry_run else 'expired'} "
                f"changelogs {work.begin_id}..{work.end_id - 1} ({len(work.snapshot_files)}) "
                f"(bound: {self.plan.bound})",
                f"  {verb} {self.deleted.total_files} files, {self.deleted.total_bytes:,} bytes",
                *self.deleted.lines("    ")]
        if work.protected_data_files:
            out.append(f"  kept {work.protected_data_files} data files that a tag or branch "
                       f"still holds")
        return out
