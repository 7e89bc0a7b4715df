"""``remove-unexisting-files``: Java's ``remove_unexisting_files`` procedure
(``RemoveUnexistingFilesProcedure``, ``RemoveUnexistingFilesAction``, ``ListUnexistingFiles``
and ``SparkRemoveUnexistingFiles``; apache/paimon release-2.0.0).

After a storage accident (a data file deleted by hand, an orphan removal with a window too
short), readers fail on the live data files of the latest snapshot that are gone. Java lists,
partition by partition, every live data file of the latest snapshot (every level) and checks
that it exists; the missing ones become the deleted files of a ``DataIncrement``, committed as
one snapshot of DELETE entries and no ADD, of kind OVERWRITE (``FileStoreCommitImpl`` makes any
commit whose new-file entries hold a DELETE an overwrite: ``ConflictDetection
.shouldBeOverwriteCommit``; streaming readers skip it as they skip every overwrite). Readers
then skip those files' rows. Nothing is deleted from storage.

paimond does the same from the latest snapshot's manifests: each bucket directory is listed
once (a file with an external path is checked by itself), ``--partition`` narrows the
partitions, and one OVERWRITE snapshot drops the missing files. Its commit requires the planned
snapshot to be the latest; on a conflict the table is planned again and committed only if the
new plan drops no file the first one did not name (what was printed, and confirmed, stays
what is dropped). Java checks data files only (not their extra files, nor changelog files),
and so does this.

Deletion vectors: Java's message carries no index change, so a deletion vector naming a
dropped file stays in its index file, where readers never look it up (they look vectors up by
the files of their split). paimond leaves them the same way on primary-key tables, and reports
them. On an append table a vector naming a dropped file is refused with the reason: Java's
conflict check rejects that commit on unaware-bucket tables (a DELETE entry whose vector is
not deleted with it), and paimond's commit requires it for every append table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from paimond.clock import Clock
from paimond.errors import CommitConflictError, RefusedError
from paimond.format.meta.manifest import ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.maintenance.job_cleanup import clean_dead_jobs, recorded_job
from paimond.maintenance.replan import Attempt, commit_with_replan
from paimond.table.catalog import Table
from paimond.table.commit.committer import CommitChanges, Committer
from paimond.table.commit.requirements import RequireSnapshot
from paimond.table.layout import partition_matches, partition_text
from paimond.table.options.core import TableOptions
from paimond.table.options.semantic import MANIFESTS, refuse
from paimond.table.scan.snapshot_scan import (
    SnapshotFiles,
    bucket_path,
    data_file_path,
    scan_snapshot,
)

JOB = "remove_unexisting_files"
# Re-plans after a commit that landed between the plan and ours; each must still drop only
# what the first plan named.
MAX_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class MissingFile:
    """A live data file of the latest snapshot that is not on storage."""

    partition: str  # the partition's path, ``k=v/...`` ('' when unpartitioned)
    bucket: int
    level: int
    file_name: str
    path: str
    row_count: int
    size_bytes: int

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.partition, self.bucket, self.file_name)

    def describe(self) -> str:
        where = f"{self.partition or '(unpartitioned)'} bucket {self.bucket}"
        return (f"{where} level {self.level}: {self.file_name} "
                f"({self.row_count} rows, {self.size_bytes:,} bytes)")


@dataclass(frozen=True, slots=True)
class StaleVector:
    """A deletion vector left in an index file, naming a dropped data file."""

    index_file: str
    data_file: str


@dataclass(frozen=True, slots=True)
class UnexistingFilesPlan:
    """What the latest snapshot lists and storage lacks: the entries to delete."""

    table_name: str
    partitions: tuple[tuple[str, str], ...]  # the partition values checked (none: every one)
    snapshot_id: int | None
    checked_files: int
    missing: tuple[MissingFile, ...]
    entries: tuple[ManifestEntry, ...]  # the live ADD entries of ``missing``, as scanned
    stale_vectors: tuple[StaleVector, ...]
    files: SnapshotFiles | None  # the scan, the commit's conflict-check base

    def result(self, snapshot_id: int | None = None, *, dry_run: bool = False,
               declined: bool = False) -> UnexistingFilesResult:
        return UnexistingFilesResult(self.table_name, self.snapshot_id, snapshot_id,
                                     self.checked_files, self.missing, self.stale_vectors,
                                     dry_run, declined)


@dataclass(frozen=True, slots=True)
class UnexistingFilesResult:
    table_name: str
    base_snapshot_id: int | None  # the snapshot whose files were checked
    snapshot_id: int | None  # the OVERWRITE snapshot committed (None: nothing committed)
    checked_files: int
    missing: tuple[MissingFile, ...]
    stale_vectors: tuple[StaleVector, ...]
    dry_run: bool
    declined: bool = False  # the operator answered no

    def describe(self) -> str:
        name = self.table_name
        if self.base_snapshot_id is None:
            return f"{name}: no snapshot, no data files to check"
        head = (f"{name}: {len(self.missing)} of the {self.checked_files} data files of "
                f"snapshot {self.base_snapshot_id} are missing")
        if not self.missing:
            return head
        if self.dry_run:
            verdict = "would be dropped by one OVERWRITE snapshot (dry run: nothing committed)"
        elif self.declined:
            verdict = "not dropped: declined, nothing committed"
        else:
            verdict = f"dropped by snapshot {self.snapshot_id} (OVERWRITE, DELETE entries only)"
        rows = sum(f.row_count for f in self.missing)
        lines = [head, f"  {rows} rows {verdict}",
                 *(f"  {f.describe()}" for f in self.missing)]
        if self.stale_vectors:
            lines.append(f"  {len(self.stale_vectors)} deletion vectors of dropped files stay "
                         "in their index files (as Java leaves them; readers never look them up)")
            lines += [f"    {v.index_file}: {v.data_file}" for v in self.stale_vectors]
        return "\n".join(lines)


def plan_unexisting_files(table: Table, partitions: Mapping[str, str] | None = None
                          ) -> UnexistingFilesPlan:
    """The live data files of the latest snapshot (of ``partitions`` only, if given) that
    are not on storage. RefusedError if dropping them cannot be committed (module doc)."""
    wanted = tuple(sorted((partitions or {}).items()))
    latest = table.snapshots.latest()
    if latest is None:
        return UnexistingFilesPlan(table.name, wanted, None, 0, (), (), (), None)
    schema = table.schema(latest.schema_id)
    try:  # the commit writes manifests: what refuses merging them refuses this
        refuse(table.latest_schema(), MANIFESTS, table.path)
    except RefusedError as refused:
        raise RefusedError(JOB, refused.reason, table.path, refused.fingerprint) from None
    if TableOptions.of(table.latest_schema()).chain_table_enabled:
        raise RefusedError(JOB, "chain tables (chain-table.enabled): Java checks a commit that "
                                "only deletes files of a chain table's branch against the "
                                "other branch's partitions (ChainTableCommitPreCallback); "
                                "paimond does not", table.path)
    files = scan_snapshot(table, latest)
    checked = 0
    missing: list[tuple[MissingFile, ManifestEntry]] = []
    for (partition, bucket), bucket_files in files.buckets().items():
        text = partition_text(schema, partition)
        if partitions and not partition_matches(text, partitions):
            continue
        present = _present(table, schema, partition, bucket)
        for live in bucket_files.files:
            checked += 1
            path = data_file_path(table, schema, live)
            if not present(path, live.meta.file_name, live.meta.external_path):
                meta = live.meta
                missing.append((MissingFile(text, bucket, meta.level, meta.file_name, path,
                                            meta.row_count, meta.file_size), live.entry))
    stale = _stale_vectors(table, schema, latest, files, [e for _, e in missing])
    return UnexistingFilesPlan(table.name, wanted, latest.id, checked,
                               tuple(m for m, _ in missing), tuple(e for _, e in missing),
                               stale, files)


def _present(table: Table, schema: TableSchema, partition: bytes, bucket: int
             ) -> Callable[[str, str, str | None], bool]:
    """Whether a data file exists: its bucket directory listed once, on first need; a file
    with an external path checked by itself."""
    listed: list[set[str]] = []

    def present(path: str, name: str, external_path: str | None) -> bool:
        if external_path:
            return table.storage.is_file(path)
        if not listed:
            directory = bucket_path(table, schema, partition, bucket)
            listed.append({s.name for s in table.storage.list_dir(directory) if not s.is_dir})
        return name in listed[0]
    return present


def _stale_vectors(table: Table, schema: TableSchema, latest: Snapshot, files: SnapshotFiles,
                   dropped: Sequence[ManifestEntry]) -> tuple[StaleVector, ...]:
    """The deletion vectors naming a dropped file (of its bucket); refused on an append
    table (module doc)."""
    names = {e.file.file_name for e in dropped}  # data file names are unique in a table
    stale = [StaleVector(index.index_file.file_name, dv.data_file_name)
             for index in files.index_entries for dv in index.index_file.dv_ranges or ()
             if dv.data_file_name in names]
    if stale and not schema.primary_keys:
        raise RefusedError(
            JOB, f"the deletion vector of missing data file {stale[0].data_file} (index file "
                 f"{stale[0].index_file}) would outlive it: an append table's commit may not "
                 "delete a file whose vector stays (Java's conflict check refuses it too); "
                 "remove the vector first (paimond rebuild-dv), then run this again",
            table.snapshots.path(latest.id))
    return tuple(stale)


def remove_unexisting_files(table: Table, plan: UnexistingFilesPlan, clock: Clock
                            ) -> UnexistingFilesResult:
    """Commit ``plan``: one OVERWRITE snapshot of DELETE entries, as a recorded job; re-planned
    on a conflict (module doc). CommitConflictError when a new plan would drop a file
    ``plan`` does not name, or when every attempt conflicted."""
    if not plan.missing:  # a killed run's leftovers go all the same
        clean_dead_jobs(table, clock.wall_ms())
        return plan.result()
    confirmed = {m.key for m in plan.missing}
    planned = [plan]

    def attempt(number: int) -> Attempt:
        current = plan if number == 1 else plan_unexisting_files(table, dict(plan.partitions))
        planned[0] = current
        extra = sorted({m.key for m in current.missing} - confirmed)
        if extra:
            raise CommitConflictError(
                table.name, "the files to drop", "those planned",
                f"snapshot {current.snapshot_id} misses {extra[0][2]} too: run the command again")
        if not current.missing:
            return Attempt()
        assert current.snapshot_id is not None
        changes = CommitChanges(deleted=current.entries,
                                requirements=[RequireSnapshot(current.snapshot_id)],
                                base=current.files)
        return Attempt(commit=lambda: committer.commit(changes))

    with recorded_job(table, "remove-unexisting-files", clock) as recorded:
        committer = Committer(table, commit_kind="OVERWRITE", clock=clock, journal=recorded)
        snapshot, _ = commit_with_replan(attempt, MAX_ATTEMPTS)
    return planned[0].result(snapshot.id if snapshot is not None else None)
