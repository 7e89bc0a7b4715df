"""A writing job's own garbage, cleaned without orphan removal's window: every job that writes
files (compact, rewrite-index, rebuild-dv, merge-manifests) runs inside :func:`recorded_job`,
which notes each file before it is written (``paimond.table.commit.job_records``): data, file-index
and DV index files, and the manifests, manifest lists and index manifests of its commits. When
the job ends it deletes what it wrote but did not commit. A job killed on the way leaves its
record; the next writing job on the table (and the daemon, at start) finds it dead and deletes
the files it lists that no snapshot, tag, changelog or branch references (consumers pin
snapshots, so they are covered), then the record. A live job's record is never touched. No
Java counterpart: Paimon leaves such files to ``remove_orphan_files``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from paimond.clock import Clock
from paimond.errors import PaimondError
from paimond.maintenance.expire.references import referencing_snapshots, used_files
from paimond.table.catalog import Table
from paimond.table.catalogs.catalog_storage import creates_under_lock
from paimond.table.commit.committer import CommitChanges
from paimond.table.commit.job_records import (
    DEFAULT_DEAD_AFTER_MS,
    JobJournal,
    delete_files,
    delete_record,
    delete_unkept,
    is_dead,
    list_markers,
    listed_files,
    read_records,
    start_job,
)
from paimond.table.layout import CHANGELOG_DIR, SNAPSHOT_DIR, TAG_DIR
from paimond.table.storage.interface import Storage
from paimond.table.storage.schemes import check_writable
from paimond.table.storage.temp_files import sweep_temp_files

# Metadata folders whose killed writers' temp files go with the dead jobs' records.
TEMP_SWEPT_DIRS = (SNAPSHOT_DIR, CHANGELOG_DIR, TAG_DIR)


@dataclass(frozen=True, slots=True)
class JobCleanupResult:
    records_removed: int = 0
    files_deleted: int = 0


def clean_dead_jobs(table: Table, now_ms: int, dead_after_ms: int = DEFAULT_DEAD_AFTER_MS
                    ) -> JobCleanupResult:
    """Remove the records of dead jobs with every file they list that nothing references,
    and the dead temp files of the metadata folders (table/storage/temp_files.py). References are
    read only when there is a dead record; an unreadable one raises before anything is
    deleted."""
    sweep_temp_files(table.storage, [table.meta_file_path(d) for d in TEMP_SWEPT_DIRS],
                     now_ms / 1000)
    dead = [r for r in read_records(table) if is_dead(r, now_ms, dead_after_ms)]
    if not dead:
        return JobCleanupResult()
    storage = table.storage
    listed = {r.directory: listed_files(storage, r.directory) for r in dead}
    used = used_files(table, referencing_snapshots(table)).all if any(listed.values()) else set()
    deleted = 0
    for record in dead:
        deleted += delete_files(storage, listed[record.directory], keep=used)
        delete_record(storage, record.directory)
    return JobCleanupResult(len(dead), deleted)


def committed_names(changes: CommitChanges) -> set[str]:
    """The names of the files a commit made visible (with the data files' extra files)."""
    names = {n for e in (*changes.added, *changes.changelog)
             for n in (e.file.file_name, *e.file.extra_files)}
    return names | {e.index_file.file_name for e in changes.index_added}


@dataclass
class RecordedJob:
    """The running job's side: ``table`` to write data through, ``keep`` before each commit;
    also the :class:`~paimond.table.commit.committer.CommitJournal` of its commits (``journal=``)."""

    table: Table  # the job's table, writing through the journal
    journal: JobJournal
    storage: Storage  # the table's own storage, where notes are written
    kept: set[str] = field(default_factory=set)

    def note(self, path: str) -> None:
        """A commit is about to write the metadata file ``path``."""
        self.journal.note(self.storage, path)

    def keep(self, names: Iterable[str]) -> None:
        """Files about to be committed: not deleted when the job ends. (A commit that
        conflicts deletes its own files before re-planning.)"""
        self.kept.update(names)


def _finish(table: Table, journal: JobJournal, keep: Collection[str]) -> None:
    """Delete what the job noted and did not keep, then its record: one listing of the
    markers, which name the files (no marker is read back)."""
    storage = table.storage
    markers = list_markers(storage, journal.directory)
    delete_unkept(storage, listed_files(storage, journal.directory, markers), keep)
    delete_record(storage, journal.directory, markers)


@contextmanager
def recorded_job(table: Table, job: str, clock: Clock, *, replica: str | None = None
                 ) -> Iterator[RecordedJob]:
    """Clean dead jobs' files, then run one recorded job. It ends by deleting every file it
    noted and did not keep; a job that failed keeps whatever some snapshot references (its
    commit may have landed before the error), and if even that cannot be read its record
    stays for the next run. UnsupportedError before anything is written on a storage where
    paimond cannot create a file atomically (``table.storage.schemes``) and no catalog lock
    stands in for it."""
    if not creates_under_lock(table.storage):
        check_writable(table.storage.root)
    clean_dead_jobs(table, clock.wall_ms())
    journal = start_job(table, job, started_ms=clock.wall_ms(), replica=replica)
    running = RecordedJob(Table(journal.recording(table.storage), table.path, table.name),
                          journal, table.storage)
    try:
        yield running
    except BaseException:
        with suppress(PaimondError):
            _finish(table, journal, used_files(table, referencing_snapshots(table)).all)
        raise
    else:
        _finish(table, journal, running.kept)
    finally:
        journal.end()
