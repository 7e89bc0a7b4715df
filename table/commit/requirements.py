"""Commit preconditions as data: each requirement validates itself against the latest snapshot
as one commit attempt reads it, and a failed one raises :class:`CommitConflictError` naming
itself, what it expected, what it found and the table (as pyiceberg's
``AssertRefSnapshotId.validate``).

A job hands the committer the requirements only it knows (``CommitChanges.requirements``): the
snapshot its changes were computed from whole (:class:`RequireSnapshot`), the index file a new
one was computed from (:class:`RequireIndexFile`, built where that index is known:
``paimond.table.indexes.deletion_vectors.dv_index_unchanged``). The committer derives the rest
from the changes themselves (:func:`change_requirements`, Java ``ConflictDetection``): the files
a change deletes are still live, the files it adds are not, no changelog file is a data file, no
deletion vector names a file an append-table change deletes, and levels >= 1 of a primary-key
table stay non-overlapping.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from paimond.errors import CommitConflictError
from paimond.format.binary.key_order import max_key_order, min_key_order
from paimond.format.meta.index_manifest import IndexManifestEntry
from paimond.format.meta.manifest import ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.table.commit.index_combiner import combine_index_entries
from paimond.table.commit.reads import AttemptReads
from paimond.table.options.core import TableOptions

Identifier = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class LatestState:
    """The latest snapshot as one attempt reads it. ``live``: its live files (of every bucket,
    or at least of those the changes touch) and ``after``: the same once the changes apply;
    both None when the attempt checks no files (no snapshot, or conflict checks off)."""

    table_name: str
    snapshot: Snapshot | None
    schema: TableSchema
    reads: AttemptReads
    live: Mapping[Identifier, ManifestEntry] | None = None
    after: Mapping[Identifier, ManifestEntry] | None = None

    def index_entries(self) -> list[IndexManifestEntry]:
        return self.reads.index_entries(self.snapshot) if self.snapshot is not None else []

    def describe(self) -> str:
        return f"snapshot {self.snapshot.id}" if self.snapshot is not None else "no snapshot"


class Requirement(ABC):
    """A precondition of a commit; :meth:`validate` raises CommitConflictError unless it
    holds in ``state``."""

    @abstractmethod
    def validate(self, state: LatestState) -> None: ...

    def conflict(self, state: LatestState, expected: str, found: str) -> CommitConflictError:
        return CommitConflictError(state.table_name, type(self).__name__, expected, found)


@dataclass(frozen=True, slots=True)
class RequireSnapshot(Requirement):
    """Changes computed from the whole of one snapshot (None: from a table without one): any
    other latest one is a conflict."""

    snapshot_id: int | None

    def validate(self, state: LatestState) -> None:
        found = state.snapshot.id if state.snapshot is not None else None
        if found != self.snapshot_id:
            raise self.conflict(state, f"snapshot {self.snapshot_id} as the latest",
                                state.describe())


@dataclass(frozen=True, slots=True)
class RequireIndexFile(Requirement):
    """The index file of (partition, bucket, index type) the changes were computed from
    (None: there was none). A different file in the latest snapshot is a conflict: the new
    file would silently drop what that one added."""

    partition: bytes
    bucket: int
    index_type: str
    file_name: str | None

    def validate(self, state: LatestState) -> None:
        current = next((e.index_file.file_name for e in state.index_entries()
                        if (e.partition, e.bucket, e.index_file.index_type)
                        == (self.partition, self.bucket, self.index_type)), None)
        if current != self.file_name:
            raise self.conflict(state, f"the {self.index_type} index of bucket {self.bucket} "
                                       f"to be {self.file_name}",
                                f"{current} in {state.describe()}")


@dataclass(frozen=True, slots=True)
class RequireFilesLive(Requirement):
    """The files a change deletes are live in the latest snapshot (entries as scanned)."""

    entries: Sequence[ManifestEntry]

    def validate(self, state: LatestState) -> None:
        if state.live is None:
            if self.entries and state.snapshot is None:
                entry = self.entries[0]
                raise self.conflict(state, f"file {entry.file.file_name} live",
                                    "no snapshot: the table has none any more")
            return
        seen: set[Identifier] = set()
        for entry in self.entries:
            if entry.identifier not in state.live or entry.identifier in seen:
                raise self.conflict(state, f"file {entry.file.file_name} (bucket {entry.bucket}, "
                                           f"level {entry.file.level}) live",
                                    f"it no longer live in {state.describe()}")
            seen.add(entry.identifier)


@dataclass(frozen=True, slots=True)
class RequireFilesNew(Requirement):
    """The files a change adds are not live once its deletions apply."""

    entries: Sequence[ManifestEntry]
    deleted: Sequence[ManifestEntry]

    def validate(self, state: LatestState) -> None:
        if state.live is None:
            return
        gone = {e.identifier for e in self.deleted}
        seen: set[Identifier] = set()
        for entry in self.entries:
            identifier = entry.identifier
            if identifier in seen or (identifier in state.live and identifier not in gone):
                raise self.conflict(state, f"file {entry.file.file_name} not live",
                                    f"it already live in {state.describe()}")
            seen.add(identifier)


@dataclass(frozen=True, slots=True)
class RequireChangelogNotData(Requirement):
    """A changelog file is never a data file too (of its bucket, when only the touched
    buckets' files are known: the same name elsewhere is another file)."""

    entries: Sequence[ManifestEntry]

    def validate(self, state: LatestState) -> None:
        if state.after is None or not self.entries:
            return
        data_names = {e.file.file_name for e in state.after.values()}
        for entry in self.entries:
            if entry.file.file_name in data_names:
                raise self.conflict(state, f"changelog file {entry.file.file_name} not a data file",
                                    f"it live as a data file in {state.describe()}")


@dataclass(frozen=True, slots=True)
class RequireNoVectorOfDeleted(Requirement):
    """An append table: once committed, no deletion vector may name a data file the change
    deletes; one that does was added meanwhile (a concurrent delete), and the rewrite
    computed without it would bring the deleted rows back."""

    removed: frozenset[str]  # data file names the change deletes and does not add back
    index_added: Sequence[IndexManifestEntry]
    index_deleted: Sequence[IndexManifestEntry]

    def validate(self, state: LatestState) -> None:
        if state.snapshot is None or state.live is None:
            return
        unaware = TableOptions.of(state.schema).bucket_mode(state.schema) == "BUCKET_UNAWARE"
        combined = combine_index_entries(state.index_entries(), self.index_deleted,
                                         self.index_added, by_file_name=unaware,
                                         table_name=state.table_name)
        for entry in combined:
            for dv in entry.index_file.dv_ranges or ():
                if dv.data_file_name in self.removed:
                    raise self.conflict(
                        state, f"no deletion vector of deleted data file {dv.data_file_name}",
                        f"one in index file {entry.index_file.file_name} in {state.describe()}")


@dataclass(frozen=True, slots=True)
class RequireLevelsDisjoint(Requirement):
    """Java's LSM conflict check: per (partition, bucket, level >= 1) of the buckets a change
    touches, the files once it applies, sorted by min key, satisfy max(a) < min(b)."""

    buckets: frozenset[tuple[bytes, int]]

    def validate(self, state: LatestState) -> None:
        if state.after is None:
            return
        key_types = state.schema.key_type.field_types
        min_of, max_of = min_key_order(key_types), max_key_order(key_types)
        for (_, bucket, level), files in self._by_level(state.after.values()).items():
            ordered = sorted(files, key=lambda e: min_of(e.file))
            for a, b in zip(ordered, ordered[1:], strict=False):
                if not max_of(a.file) < min_of(b.file):
                    raise self.conflict(
                        state, f"levels >= 1 of bucket {bucket} without overlaps",
                        f"LSM conflict in bucket {bucket} level {level}: {a.file.file_name} "
                        f"overlaps {b.file.file_name} once applied to {state.describe()}")

    def _by_level(self, entries: Iterable[ManifestEntry]
                  ) -> dict[tuple[bytes, int, int], list[ManifestEntry]]:
        by_level: dict[tuple[bytes, int, int], list[ManifestEntry]] = defaultdict(list)
        for entry in entries:
            if entry.file.level > 0 and (entry.partition, entry.bucket) in self.buckets:
                by_level[(entry.partition, entry.bucket, entry.file.level)].append(entry)
        return by_level


def change_requirements(schema: TableSchema, deleted: Sequence[ManifestEntry],
                        added: Sequence[ManifestEntry], changelog: Sequence[ManifestEntry],
                        index_added: Sequence[IndexManifestEntry],
                        index_deleted: Sequence[IndexManifestEntry]) -> list[Requirement]:
    """What every change requires of the latest snapshot, in the order they are checked."""
    found: list[Requirement] = [RequireFilesLive(deleted), RequireFilesNew(added, deleted),
                                RequireChangelogNotData(changelog)]
    if not schema.primary_keys and deleted:
        removed = frozenset({e.file.file_name for e in deleted} - {e.file.file_name for e in added})
        found.append(RequireNoVectorOfDeleted(removed, index_added, index_deleted))
    if schema.primary_keys:
        found.append(RequireLevelsDisjoint(frozenset((e.partition, e.bucket)
                                                     for e in (*added, *deleted))))
    return found
