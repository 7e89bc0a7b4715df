"""The optimistic commit of a table change: Java ``FileStoreCommitImpl.tryCommit`` /
``tryCommitOnce``, ``ConflictDetection``, ``RenamingSnapshotCommit`` (apache/paimon 5dacde516b).

Each attempt re-reads the latest snapshot, checks that every file the change deletes is still
live there (and, for primary-key tables, that levels >= 1 stay non-overlapping), writes the
delta manifest (DELETE entries first, copied verbatim from the live ADD entries, then ADDs),
a base list of the latest base + delta manifests (merged as Java's ``ManifestFileMerger``
does at every commit), the index manifest if index files changed, and creates
``snapshot-<latest+1>`` exclusively. The live files of the latest snapshot come from the
job's own scan (``CommitChanges.base``), the files of the buckets a compaction plan's tasks
touch (also ``CommitChanges.base``, a ``paimond.table.commit.base.PlannedBuckets``: every check
concerns those buckets alone) or this committer's last attempt or commit, plus the delta
manifests of the snapshots committed since (``paimond.table.commit.reads``, as Java's retries
do), not from a scan of every manifest. The base manifests' merge streams
(``manifest_merge.RollingWriter``). Losing the race retries with backoff. Every precondition is
a requirement (``paimond.table.commit.requirements``): the job's own and those the changes
imply, each validated against the latest snapshot; a failed one raises
:class:`CommitConflictError` so the job re-plans. A snapshot is never overwritten and a
concurrent writer's commit is never lost: it becomes part of our base.

``compact_manifests`` is Java's ``compactManifestOnce`` through the same attempt loop: the
latest base + delta manifests merged with forced settings become the base of a COMPACT snapshot
with an empty delta, checked to describe exactly the latest snapshot's live files.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar, cast

from paimond import __version__
from paimond.clock import Clock
from paimond.errors import (
    CommitCancelledError,
    CommitConflictError,
    CorruptFileError,
    PaimondError,
)
from paimond.faults import crash_point
from paimond.format.meta.index_manifest import IndexManifestEntry
from paimond.format.meta.manifest import FILE_KIND_ADD, FILE_KIND_DELETE, ManifestEntry
from paimond.format.meta.manifest_list import ManifestFileMeta
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import BATCH_COMMIT_IDENTIFIER, Snapshot, encode_snapshot
from paimond.table.catalog import Table
from paimond.table.commit.base import PlannedBuckets
from paimond.table.commit.gate import check_open
from paimond.table.commit.index_combiner import combine_index_entries
from paimond.table.commit.manifest_files import ManifestWriter
from paimond.table.commit.manifest_merge import ManifestMergeOptions, RollingWriter, merge_manifests
from paimond.table.commit.reads import AttemptReads, LiveSet
from paimond.table.commit.requirements import (
    LatestState,
    RequireFilesLive,
    Requirement,
    change_requirements,
)
from paimond.table.layout import LATEST_HINT
from paimond.table.options.core import TableOptions
from paimond.table.scan.snapshot_scan import (
    SnapshotFiles,
    merge_entries,
    read_manifest,
    read_manifest_list,
)

WRITER_VERSION = f"paimond-{__version__}"
# Java's SequenceSnapshotProperties.MAX_SEQUENCE_NUMBER.
MAX_SEQUENCE_NUMBER_PROPERTY = "sequence.generation.max-sequence-number"
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class CommitChanges:
    """What one job changes. ``deleted`` are live ADD entries exactly as scanned."""

    deleted: Sequence[ManifestEntry] = ()
    added: Sequence[ManifestEntry] = ()
    index_added: Sequence[IndexManifestEntry] = ()
    index_deleted: Sequence[IndexManifestEntry] = ()
    # What the job requires of the latest snapshot beyond what the changes imply
    # (``paimond.table.commit.requirements``: the snapshot or index files it computed from).
    requirements: Sequence[Requirement] = ()
    # The new snapshot's ``properties`` (readers ignore them; paimond marks full compactions).
    properties: Mapping[str, str] | None = None
    # Changelog files compaction produced (ADD entries): the snapshot's changelog manifest list
    changelog: Sequence[ManifestEntry] = ()
    # Where the conflict check starts, so that it reads only the snapshots committed since:
    # the scan the changes were planned from, if the job still holds it, or a compaction
    # plan's buckets (``table.commit.base``: their files at the planned snapshot, used when the
    # changes touch no other bucket).
    base: SnapshotFiles | PlannedBuckets | None = None

    @property
    def is_empty(self) -> bool:
        return not (self.deleted or self.added or self.index_added or self.index_deleted
                    or self.changelog)

    def implied_requirements(self, schema: TableSchema) -> list[Requirement]:
        """What the changes themselves require of the latest snapshot."""
        return change_requirements(schema, self.deleted, self.added, self.changelog,
                                   self.index_added, self.index_deleted)


class ManifestsUnchanged:
    """What ``compact_manifests`` found: merging would change nothing, so nothing was committed."""


class CommitJournal(Protocol):
    """A running job's record of the metadata files its commits write: each is noted before
    it is written, and the files of a published snapshot are kept; whatever else a killed or
    failed commit left is the job's own garbage (``paimond.maintenance.job_cleanup``)."""

    def note(self, path: str) -> None: ...

    def keep(self, names: Iterable[str]) -> None: ...


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 10
    min_wait_s: float = 0.010
    max_wait_s: float = 10.0

    def wait_s(self, attempt: int, rng: random.Random) -> float:
        base: float = min(self.min_wait_s * 2.0 ** attempt, self.max_wait_s)
        return base + base * 0.2 * rng.random()


def merged_properties(latest: Snapshot | None, changes: CommitChanges, where: str, *,
                      snapshot_sequence: bool,
                      highest_written: Callable[[], int | None] = lambda: None
                      ) -> dict[str, str] | None:
    """The new snapshot's ``properties``: the commit's own (paimond's markers) and, on a table
    whose writers take their sequence numbers from the snapshot
    (``write.sequence-number-init-mode = snapshot``: ``snapshot_sequence``), what Java's commit
    (``FileStoreCommitImpl`` with ``SequenceSnapshotProperties``) merges in: the highest
    sequence number written so far, the latest snapshot's property (at ``where``) or, when it
    has none, ``highest_written()`` (every ADD entry of its data manifests), or the added
    files' if higher. Those writers start after it, so a value too low would make their rows
    lose to older ones. Other tables carry no such property (Java drops it)."""
    properties = dict(changes.properties) if changes.properties else {}
    if not snapshot_sequence:
        return properties or None
    highest = [e.file.max_sequence_number for e in changes.added]
    known = (latest.properties or {}).get(MAX_SEQUENCE_NUMBER_PROPERTY) if latest else None
    if known is not None:
        try:
            highest.append(int(known))
        except ValueError:
            raise CorruptFileError(where, f"property {MAX_SEQUENCE_NUMBER_PROPERTY} = "
                                          f"{known!r} is not a number") from None
    elif latest is not None and (written := highest_written()) is not None:
        highest.append(written)
    if highest:
        properties[MAX_SEQUENCE_NUMBER_PROPERTY] = str(max(highest))
    return properties or None


@dataclass
class Committer:
    """Commits changes to one table. One fresh ``commit_user`` per instance (per job run)."""

    table: Table
    commit_kind: str = "COMPACT"
    check_conflicts: bool = True
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    clock: Clock = field(kw_only=True)  # snapshots' timeMillis; no default: the caller's clock
    sleep: Callable[[float], None] = time.sleep
    commit_user: str = field(default_factory=lambda: str(uuid.uuid4()))
    rng: random.Random = field(default_factory=random.Random)
    merge_manifests: bool = True  # Java merges the base manifests at every commit
    journal: CommitJournal | None = None  # a recorded job's: notes what each attempt writes
    # The newest live-file set this committer read or committed (never changed once made)
    _known: LiveSet | None = field(default=None, init=False, repr=False)
    # How each attempt's check found the live files (tests and the bench read it)
    reads_log: list[str] = field(default_factory=list, init=False, repr=False)

    def commit(self, changes: CommitChanges) -> Snapshot:
        """Commit ``changes`` as the next snapshot; returns it."""
        if changes.is_empty:
            raise ValueError("nothing to commit")
        return self._retry(lambda: self._try_once(changes))

    def _retry(self, attempt: Callable[[], T | None]) -> T:
        """Run ``attempt`` until it returns something other than None (a lost race)."""
        for number in range(self.retry.max_retries + 1):
            result = attempt()
            if result is not None:
                return result
            if number < self.retry.max_retries:
                self.sleep(self.retry.wait_s(number, self.rng))
        attempts = self.retry.max_retries + 1
        raise CommitConflictError(self.table.name, "the next snapshot id",
                                  f"created within {attempts} attempts",
                                  f"lost the race {attempts} times")

    def _writer(self, schema: TableSchema) -> ManifestWriter:
        return ManifestWriter(self.table.storage, self.table.path,
                              schema.partition_type.field_types,
                              TableOptions.of(schema).manifest_compression,
                              before_write=self.journal.note if self.journal else None)

    def _try_once(self, changes: CommitChanges) -> Snapshot | None:
        latest = self.table.snapshots.latest()
        schema = self.table.latest_schema()
        reads = AttemptReads(self.table)
        live = None
        if self.check_conflicts and latest is not None:
            live = self._check_conflicts(latest, schema, changes, reads)
        else:
            state = LatestState(self.table.name, latest, schema, reads)
            for requirement in (RequireFilesLive(changes.deleted), *changes.requirements):
                requirement.validate(state)
        writer = self._writer(schema)
        try:
            snapshot = self._write_snapshot(writer, latest, schema, changes, reads)
        except BaseException:
            writer.remove_written()  # nothing was published: these files are ours alone
            raise
        published = self._publish(writer, snapshot)
        if published is not None and live is not None:
            scope = self._known.scope if self._known is not None else None
            self._known = LiveSet(published, live, reads.base_written, reads.delta_written,
                                  len(reads.base_written or ()) + len(reads.delta_written or ()),
                                  scope)
        return published

    def _check_conflicts(self, latest: Snapshot, schema: TableSchema, changes: CommitChanges,
                         reads: AttemptReads) -> dict[tuple[object, ...], ManifestEntry]:
        """Validate every requirement of ``changes`` against ``latest`` (Java
        ``ConflictDetection``): the job's, then those the changes imply; returns the live
        files once the changes are applied (the new snapshot's)."""
        state = LatestState(self.table.name, latest, schema, reads)
        for requirement in changes.requirements:
            requirement.validate(state)
        buckets = {(e.partition, e.bucket)
                   for e in (*changes.added, *changes.deleted, *changes.changelog)}
        base = changes.base
        start = (LiveSet.of_scan(base) if isinstance(base, SnapshotFiles)
                 else LiveSet.of_planned(base) if base is not None else None)
        current = reads.live_at(latest, (self._known, start), buckets)
        self.reads_log.extend(reads.read_log)
        self._known = current  # a lost race's retry starts from here
        after = dict(current.entries)  # of every bucket, or of those the changes touch
        for entry in changes.deleted:
            after.pop(entry.identifier, None)
        for entry in changes.added:
            after[entry.identifier] = entry
        state = replace(state, live=current.entries, after=after)
        for requirement in changes.implied_requirements(schema):
            requirement.validate(state)
        return after

    def _publish(self, writer: ManifestWriter, snapshot: Snapshot) -> Snapshot | None:
        """Create the snapshot file exclusively; None if another commit took its id."""
        table = self.table
        path = table.snapshots.path(snapshot.id)
        try:
            check_open(path)  # a stopping daemon cancelled its jobs: nothing more is published
        except CommitCancelledError:
            writer.remove_written()
            raise
        try:
            created = table.storage.create_exclusive(path, encode_snapshot(snapshot))
        except PaimondError:
            if self._committed_by_us(snapshot.id):
                created = True
            else:
                raise  # outcome unknown: leave our files; orphan removal takes them later
        if not created:
            if self._committed_by_us(snapshot.id):
                created = True
            else:
                writer.remove_written()
                return None
        if self.journal is not None:
            self.journal.keep(path.rpartition("/")[2] for path in writer.written)
        crash_point("commit.snapshot_created")
        self._write_latest_hint(snapshot.id)
        crash_point("commit.latest_hint_written")
        return snapshot

    def _committed_by_us(self, snapshot_id: int) -> bool:
        """After an ambiguous create (e.g. a retried PUT), is ``snapshot_id`` ours?"""
        try:
            existing = self.table.snapshots.load(snapshot_id)
        except PaimondError:
            return False
        return existing.commit_user == self.commit_user

    def _write_latest_hint(self, snapshot_id: int) -> None:
        try:
            self.table.storage.write_bytes(self.table.snapshots.hint_path(LATEST_HINT),
                                           str(snapshot_id).encode())
        except PaimondError:
            pass  # hints are advisory; readers fall back to listing

    def _merged(self, writer: ManifestWriter, latest: Snapshot, schema: TableSchema,
                metas: list[ManifestFileMeta], *, forced: bool,
                read: Callable[[ManifestFileMeta], list[ManifestEntry]] | None = None
                ) -> list[ManifestFileMeta]:
        options = ManifestMergeOptions.of(TableOptions.of(schema))
        if forced:
            options = options.forced()
        where = self.table.snapshots.path(latest.id)
        return merge_manifests(
            metas, options, read or (lambda meta: read_manifest(self.table, meta, where)),
            RollingWriter(writer, options.target_file_size_bytes),
            schema.partition_type.field_types)

    def _manifest_compaction_snapshot(self, writer: ManifestWriter, latest: Snapshot,
                                      base_metas: list[ManifestFileMeta]) -> Snapshot:
        """Java ``compactManifestOnce``: new base, empty delta, everything else inherited."""
        base_name, base_size = writer.write_manifest_list(base_metas)
        delta_name, delta_size = writer.write_manifest_list([])
        crash_point("commit.compacted_manifest_list_written")
        return Snapshot(
            id=latest.id + 1, schema_id=latest.schema_id,
            base_manifest_list=base_name, base_manifest_list_size=base_size,
            delta_manifest_list=delta_name, delta_manifest_list_size=delta_size,
            index_manifest=latest.index_manifest, commit_user=self.commit_user,
            commit_identifier=BATCH_COMMIT_IDENTIFIER, commit_kind="COMPACT",
            time_millis=self.clock.wall_ms(), total_record_count=latest.total_record_count,
            delta_record_count=0, watermark=latest.watermark, statistics=latest.statistics,
            properties=latest.properties, next_row_id=latest.next_row_id or 0,
            uuid=str(uuid.uuid4()), writer_version=WRITER_VERSION)

    def _write_snapshot(self, writer: ManifestWriter, latest: Snapshot | None,
                        schema: TableSchema, changes: CommitChanges,
                        reads: AttemptReads | None = None) -> Snapshot:
        reads = reads or AttemptReads(self.table)
        delta_entries = [replace(e, kind=FILE_KIND_DELETE) for e in changes.deleted]
        delta_entries += [replace(e, kind=FILE_KIND_ADD) for e in changes.added]
        base_metas = self._base_manifests(writer, latest, schema, reads)
        delta_metas = [writer.write_manifest(delta_entries)] if delta_entries else []
        reads.base_written, reads.delta_written = base_metas, delta_metas
        crash_point("commit.manifests_written")
        base_list = writer.write_manifest_list(base_metas)
        delta_list = writer.write_manifest_list(delta_metas)
        crash_point("commit.manifest_list_written")
        changelog_list: tuple[str | None, int | None] = (None, None)
        if changes.changelog:  # Java: a changelog manifest list only when there is changelog
            changelog_list = writer.write_manifest_list(
                [writer.write_manifest([replace(e, kind=FILE_KIND_ADD)
                                        for e in changes.changelog])])
        index_manifest = self._index_manifest(writer, latest, schema, changes, reads)
        return self._next_snapshot(latest, schema, changes, base_list, delta_list,
                                   changelog_list, index_manifest, reads)

    def _base_manifests(self, writer: ManifestWriter, latest: Snapshot | None,
                        schema: TableSchema, reads: AttemptReads) -> list[ManifestFileMeta]:
        """The new snapshot's base: the latest base + delta manifests, merged as Java does."""
        if latest is None:
            return []
        base, delta = reads.snapshot_manifests(latest)
        if not self.merge_manifests:
            return base + delta
        return self._merged(writer, latest, schema, base + delta, forced=False,
                            read=reads.passing_reader(self.table.snapshots.path(latest.id)))

    def _index_manifest(self, writer: ManifestWriter, latest: Snapshot | None,
                        schema: TableSchema, changes: CommitChanges,
                        reads: AttemptReads) -> str | None:
        """The new snapshot's index manifest: the latest one's, or a new one if the index
        files changed."""
        index_manifest = latest.index_manifest if latest else None
        if changes.index_added or changes.index_deleted:
            previous = reads.index_entries(latest) if latest else []
            unaware = TableOptions.of(schema).bucket_mode(schema) == "BUCKET_UNAWARE"
            combined = combine_index_entries(previous, changes.index_deleted, changes.index_added,
                                             by_file_name=unaware, table_name=self.table.name)
            index_manifest = writer.write_index_manifest(combined) if combined else None
            crash_point("commit.index_manifest_written")
        return index_manifest

    def _highest_written(self, latest: Snapshot | None, reads: AttemptReads) -> int | None:
        """The highest sequence number of any ADD entry of ``latest``'s data manifests
        (Java ``FileStoreCommitImpl.maxSequenceNumber`` of the manifests before merging)."""
        if latest is None:
            return None
        base, delta = reads.snapshot_manifests(latest)
        where = self.table.snapshots.path(latest.id)
        found = [e.file.max_sequence_number for entries in reads.manifests([*base, *delta], where)
                 for e in entries if e.kind == FILE_KIND_ADD]
        return max(found) if found else None

    def _next_snapshot(self, latest: Snapshot | None, schema: TableSchema,
                       changes: CommitChanges, base_list: tuple[str, int],
                       delta_list: tuple[str, int],
                       changelog_list: tuple[str | None, int | None],
                       index_manifest: str | None, reads: AttemptReads) -> Snapshot:
        delta_rows = (sum(e.file.row_count for e in changes.added)
                      - sum(e.file.row_count for e in changes.deleted))
        previous_total = (latest.total_record_count or 0) if latest else 0
        where = self.table.snapshots.path(latest.id) if latest else self.table.path
        return Snapshot(
            id=(latest.id if latest else 0) + 1, schema_id=schema.id,
            base_manifest_list=base_list[0], base_manifest_list_size=base_list[1],
            delta_manifest_list=delta_list[0], delta_manifest_list_size=delta_list[1],
            index_manifest=index_manifest, commit_user=self.commit_user,
            commit_identifier=BATCH_COMMIT_IDENTIFIER, commit_kind=self.commit_kind,
            time_millis=self.clock.wall_ms(), total_record_count=previous_total + delta_rows,
            delta_record_count=delta_rows,
            changelog_manifest_list=changelog_list[0],
            changelog_manifest_list_size=changelog_list[1],
            changelog_record_count=(sum(e.file.row_count for e in changes.changelog)
                                    if changes.changelog else None),
            watermark=latest.watermark if latest else None,
            statistics=latest.statistics if latest and latest.schema_id == schema.id else None,
            next_row_id=(latest.next_row_id or 0) if latest else 0,
            properties=merged_properties(
                latest, changes, where,
                snapshot_sequence=TableOptions.of(schema).sequence_number_init_mode == "snapshot",
                highest_written=lambda: self._highest_written(latest, reads)),
            uuid=str(uuid.uuid4()), writer_version=WRITER_VERSION)

    def compact_manifests(self, *, forced: bool = True) -> Snapshot | ManifestsUnchanged:
        """Rewrite the latest snapshot's manifests (Java ``compact_manifest``: ``forced``,
        else by the table's own merge thresholds) as a COMPACT snapshot with an empty delta;
        ``ManifestsUnchanged`` if merging changes nothing."""
        # mypy cannot solve T for a union; the attempt returns exactly this union or None.
        return cast("Snapshot | ManifestsUnchanged",
                    self._retry(lambda: self._try_compact_manifests_once(forced)))

    def _try_compact_manifests_once(self, forced: bool) -> Snapshot | ManifestsUnchanged | None:
        table = self.table
        latest = table.snapshots.latest()
        if latest is None:
            return ManifestsUnchanged()
        schema = table.latest_schema()
        writer = self._writer(schema)
        try:
            before = self._latest_manifests(latest)
            read = _once_each(self.table, self.table.snapshots.path(latest.id))
            after = self._merged(writer, latest, schema, before, forced=forced, read=read)
            if {m.file_name for m in after} == {m.file_name for m in before}:
                writer.remove_written()
                return ManifestsUnchanged()
            crash_point("commit.manifests_compacted")
            if self.check_conflicts:
                self._check_same_live_files(latest, before, after, read)
            snapshot = self._manifest_compaction_snapshot(writer, latest, after)
        except BaseException:
            writer.remove_written()
            raise
        return self._publish(writer, snapshot)

    def _latest_manifests(self, latest: Snapshot) -> list[ManifestFileMeta]:
        where = self.table.snapshots.path(latest.id)
        return (read_manifest_list(self.table, latest.base_manifest_list, where)
                + read_manifest_list(self.table, latest.delta_manifest_list, where))

    def _check_same_live_files(self, latest: Snapshot, previous: list[ManifestFileMeta],
                               metas: list[ManifestFileMeta],
                               read: Callable[[ManifestFileMeta], list[ManifestEntry]]) -> None:
        """Merged manifests must describe exactly the live files of ``latest`` (its
        ``previous`` manifests). Each manifest is read once for the merge and this check;
        the new ones are read back from storage."""
        where = self.table.snapshots.path(latest.id)
        before, after = ({f.entry.identifier for f in merge_entries(
            ((e, m.file_name) for m in group for e in read(m)), where)}
            for group in (previous, metas))
        if before != after:
            raise AssertionError(f"{self.table.name}: merged manifests describe "
                                 f"{len(after)} live files, snapshot {latest.id} has {len(before)}")


def _once_each(table: Table, where: str) -> Callable[[ManifestFileMeta], list[ManifestEntry]]:
    """A manifest reader that reads each manifest (immutable, uniquely named) at most once."""
    read: dict[str, list[ManifestEntry]] = {}

    def once(meta: ManifestFileMeta) -> list[ManifestEntry]:
        if meta.file_name not in read:
            read[meta.file_name] = read_manifest(table, meta, where)
        return read[meta.file_name]
    return once
