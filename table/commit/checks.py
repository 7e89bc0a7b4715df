"""The commit's conflict check (Java ``ConflictDetection``): the files a change deletes are
still live in the latest snapshot, the files it adds are not, no changelog file is a data file,
the index files the change was computed from are unchanged, no deletion vector names a file an
append-table change deletes, and levels >= 1 of a primary-key table stay non-overlapping. A
part of ``Committer`` (table/commit/committer.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from paimond.errors import CommitConflictError
from paimond.format.binary.key_order import max_key_order, min_key_order
from paimond.format.meta.manifest import ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.table.commit.index_combiner import combine_index_entries
from paimond.table.commit.reads import AttemptReads, LiveSet
from paimond.table.options.core import TableOptions

if TYPE_CHECKING:
    from paimond.table.catalog import Table
    from paimond.table.commit.committer import CommitChanges


class ConflictChecks:
    """``Committer``'s checks, run by each attempt before it writes anything."""

    if TYPE_CHECKING:  # Committer's fields
        table: Table
        _known: LiveSet | None
        reads_log: list[str]

    def _check_conflicts(self, latest: Snapshot, schema: TableSchema, changes: CommitChanges,
                         reads: AttemptReads) -> dict[tuple[object, ...], ManifestEntry]:
        """Raise CommitConflictError unless ``changes`` apply to ``latest``; returns the live
        files once they are applied (the new snapshot's)."""
        buckets = {(e.partition, e.bucket)
                   for e in (*changes.added, *changes.deleted, *changes.changelog)}
        base = LiveSet.of_scan(changes.base) if changes.base is not None else (
            LiveSet.of_planned(changes.planned) if changes.planned is not None else None)
        current = reads.live_at(latest, (self._known, base), buckets)
        self.reads_log.extend(reads.read_log)
        self._known = current  # a lost race's retry starts from here
        live = dict(current.entries)  # of every bucket, or of those the changes touch
        for entry in changes.deleted:
            if entry.identifier not in live:
                raise CommitConflictError(
                    f"{self.table.name}: file {entry.file.file_name} (bucket {entry.bucket}, "
                    f"level {entry.file.level}) is no longer live in snapshot {latest.id}")
            live.pop(entry.identifier)
        for entry in changes.added:
            if entry.identifier in live:
                raise CommitConflictError(f"{self.table.name}: file {entry.file.file_name} "
                                          f"is already live in snapshot {latest.id}")
            live[entry.identifier] = entry
        data_names = {e.file.file_name for e in live.values()}
        # a changelog file is never a data file too (of its bucket, when only the touched
        # buckets' files are known: the same name elsewhere is another file)
        for entry in changes.changelog:
            if entry.file.file_name in data_names:
                raise CommitConflictError(f"{self.table.name}: changelog file "
                                          f"{entry.file.file_name} is live as a data file")
        if changes.index_base:
            self._check_index_base(latest, changes.index_base, reads)
        if not schema.primary_keys and changes.deleted:
            self._check_no_vector_of_deleted_files(latest, schema, changes, reads)
        if schema.primary_keys:
            touched = {(e.partition, e.bucket) for e in (*changes.added, *changes.deleted)}
            _check_levels_do_not_overlap(self.table.name, schema,
                                         [e for e in live.values()
                                          if (e.partition, e.bucket) in touched])
        return live

    def _check_no_vector_of_deleted_files(self, latest: Snapshot, schema: TableSchema,
                                          changes: CommitChanges, reads: AttemptReads) -> None:
        """An append table: once committed, no deletion vector may name a data file this
        commit deletes; one that does was added meanwhile (a concurrent delete), and the
        rewrite computed without it would bring the deleted rows back."""
        removed = ({e.file.file_name for e in changes.deleted}
                   - {e.file.file_name for e in changes.added})
        unaware = TableOptions.of(schema).bucket_mode(schema) == "BUCKET_UNAWARE"
        combined = combine_index_entries(reads.index_entries(latest),
                                         changes.index_deleted, changes.index_added,
                                         by_file_name=unaware)
        for entry in combined:
            for dv in entry.index_file.dv_ranges or ():
                if dv.data_file_name in removed:
                    raise CommitConflictError(
                        f"{self.table.name}: data file {dv.data_file_name} got a deletion "
                        f"vector in snapshot {latest.id} (index file "
                        f"{entry.index_file.file_name})")

    def _check_index_base(self, latest: Snapshot,
                          base: Mapping[tuple[bytes, int, str], str | None],
                          reads: AttemptReads) -> None:
        current = {(e.partition, e.bucket, e.index_file.index_type): e.index_file.file_name
                   for e in reads.index_entries(latest)}
        for key, expected in base.items():
            if current.get(key) != expected:
                raise CommitConflictError(
                    f"{self.table.name}: the {key[2]} index of bucket {key[1]} changed to "
                    f"{current.get(key)} in snapshot {latest.id} (computed from {expected})")


def _check_levels_do_not_overlap(table_name: str, schema: TableSchema,
                                 entries: Sequence[ManifestEntry]) -> None:
    """Java's LSM conflict check: per (partition, bucket, level >= 1), files sorted by min key
    must satisfy max(a) < min(b)."""
    key_types = schema.key_type.field_types
    min_of, max_of = min_key_order(key_types), max_key_order(key_types)
    by_level: dict[tuple[bytes, int, int], list[ManifestEntry]] = defaultdict(list)
    for entry in entries:
        if entry.file.level > 0:
            by_level[(entry.partition, entry.bucket, entry.file.level)].append(entry)
    for (_, bucket, level), files in by_level.items():
        ordered = sorted(files, key=lambda e: min_of(e.file))
        for a, b in zip(ordered, ordered[1:], strict=False):
            if not max_of(a.file) < min_of(b.file):
                raise CommitConflictError(
                    f"{table_name}: LSM conflict in bucket {bucket} level {level}: "
                    f"{a.file.file_name} overlaps {b.file.file_name}")
