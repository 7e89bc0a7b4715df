"""Orphan file removal: Java ``OrphanFilesClean`` / ``LocalOrphanFilesClean``
(apache/paimon 5dacde516b).

Candidates are the files under ``manifest/``, ``index/``, ``statistics/`` and every bucket
directory (reached through ``k=v`` directories to the partition depth), plus anything in a
``snapshot/`` or ``changelog/`` directory that is not a snapshot, changelog or hint file (a
stale temp file), for the main branch and every branch; ``schema/``, ``tag/`` and
``consumer/`` are never touched. The bucket directories under each of
``data-file.external-paths`` (whatever the strategy, as Java lists them; one the table's
storage cannot reach is skipped) are candidates too: a table must not share its external
paths with another. A candidate older than the window
(file mtime before ``older_than``) is removed unless a snapshot, tag or long-lived changelog of
any branch names it; matching is by file name, as in Java. Candidates are listed before the
references are read, so a file committed meanwhile is either young or already referenced.

Unlike Java, a referenced file that cannot be read aborts the job before anything is deleted
(a missing one is tolerated only when the snapshot naming it has vanished meanwhile), and a
window under one hour is refused unless forced. ``.paimond/`` (paimond's job records) is never a
candidate: dead jobs' records are cleaned first (``job_cleanup``), and the files a running job
has recorded are spared whatever the window.

With an executor that maps tasks (Spark), the bucket directories and the other candidate
directories are listed in its tasks and the orphans deleted in its tasks, as Paimon's Spark
orphan procedure lists in Spark tasks (``maintenance/distributed.py``); the driver still walks
the partition directories, reads the references and decides what goes.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterator
from typing import TYPE_CHECKING

from paimond.clock import Clock
from paimond.errors import ConfigError, CorruptFileError, UnsupportedError
from paimond.faults import crash_point
from paimond.maintenance.distributed import (
    TaskMapper,
    delete_paths,
    list_directories,
    mapper_of,
)
from paimond.maintenance.expire.references import (
    INDEX,
    OTHER,
    STATISTICS,
    FileTally,
    SnapshotSource,
    bucket_file_kind,
    metadata_kind,
    referencing_snapshots,
    used_files,
)
from paimond.maintenance.job_cleanup import clean_dead_jobs
from paimond.table.catalog import Table
from paimond.table.commit.job_records import recorded_names
from paimond.table.data_files.external_paths import java_path
from paimond.table.layout import (
    BRANCH_DIR,
    BRANCH_PREFIX,
    BUCKET_DIR_PREFIX,
    CHANGELOG_DIR,
    CHANGELOG_PREFIX,
    EARLIEST_HINT,
    INDEX_DIR,
    LATEST_HINT,
    MAIN_BRANCH,
    MANIFEST_DIR,
    SCHEMA_DIR,
    SCHEMA_PREFIX,
    SNAPSHOT_DIR,
    SNAPSHOT_PREFIX,
    STATISTICS_DIR,
)
from paimond.table.options.core import TableOptions
from paimond.table.options.semantic import refuse
from paimond.table.storage.interface import FileStatus, Storage

if TYPE_CHECKING:
    from paimond.maintenance.execution import TaskExecutor

DEFAULT_WINDOW_MS = 86_400_000  # Java: older_than defaults to now - 1 day
MIN_WINDOW_MS = 3_600_000  # below this, only with force


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    kind: str
    status: FileStatus
    by_name: bool  # False: never referenced by name (temp files beside snapshots)


@dataclasses.dataclass(frozen=True, slots=True)
class OrphanResult:
    table_name: str
    older_than_ms: int
    removed: FileTally
    young_files: int  # files inside the window, left alone
    examined_files: int  # files old enough to be candidates
    sources: tuple[SnapshotSource, ...]
    dry_run: bool

    def describe(self) -> str:
        moment = datetime.datetime.fromtimestamp(self.older_than_ms / 1000, datetime.timezone.utc)
        snapshot_ids = sorted(s.snapshot.id for s in self.sources
                              if s.kind == "snapshot" and s.branch == "main")
        span = f"{snapshot_ids[0]}..{snapshot_ids[-1]}" if snapshot_ids else "none"
        tags = sum(1 for s in self.sources if s.kind == "tag")
        changelogs = sum(1 for s in self.sources if s.kind == "changelog")
        branches = len({s.branch for s in self.sources} - {"main"})
        verb = "would remove" if self.dry_run else "removed"
        lines = [f"{self.table_name}: {verb} {self.removed.total_files} orphan files, "
                 f"{self.removed.total_bytes:,} bytes, of {self.examined_files} files older than "
                 f"{moment:%Y-%m-%d %H:%M:%S} UTC ({self.young_files} younger files left alone)",
                 *self.removed.lines("    "),
                 f"  references read from snapshots {span}, {tags} tags, {changelogs} "
                 f"changelogs, {branches} branches"]
        return "\n".join(lines)


def _files(storage: Storage, directory: str) -> Iterator[FileStatus]:
    return (s for s in storage.list_dir(directory) if not s.is_dir)


def bucket_dirs(storage: Storage, directory: str, depth: int) -> Iterator[str]:
    """Bucket directories below ``directory`` through ``depth`` levels of ``k=v`` directories
    (Java ``listFileDirs``); unknown directories are ignored."""
    for status in storage.list_dir(directory):
        if not status.is_dir:
            continue
        if depth == 0 and status.name.startswith(BUCKET_DIR_PREFIX):
            yield status.path
        elif depth > 0 and "=" in status.name:
            yield from bucket_dirs(storage, status.path, depth - 1)


def _branch_dirs(table: Table) -> list[str]:
    """The main table directory and each branch's, refusing branches without a schema."""
    roots = [table.path]
    for branch in table.branches():
        root = table.file_path(BRANCH_DIR, BRANCH_PREFIX + branch)
        schemas = table.storage.join(root, SCHEMA_DIR)
        if not any(s.name.startswith(SCHEMA_PREFIX) for s in _files(table.storage, schemas)):
            raise CorruptFileError(schemas, f"branch {branch} has no schema; orphan "
                                   "removal aborted, check the branch by hand")
        roots.append(root)
    return roots


def list_candidates(table: Table, mapper: TaskMapper | None = None) -> list[Candidate]:
    """Every file orphan removal may consider, whatever its age; the directories' files are
    listed by ``mapper``'s tasks when there is one."""
    storage = table.storage
    metadata = [(table.file_path(MANIFEST_DIR), None), (table.file_path(INDEX_DIR), INDEX),
                (table.file_path(STATISTICS_DIR), STATISTICS)]
    options = table.options()
    data_root = (table.file_path(options.data_file_path_directory)
                 if options.data_file_path_directory else table.path)
    depth = len(table.latest_schema().partition_keys)
    buckets = [d for root in (data_root, *external_roots(storage, options))
               for d in bucket_dirs(storage, root, depth)]
    beside = [(storage.join(root, directory), prefix) for root in _branch_dirs(table)
              for directory, prefix in ((SNAPSHOT_DIR, SNAPSHOT_PREFIX),
                                        (CHANGELOG_DIR, CHANGELOG_PREFIX))]
    directories = [d for d, _ in metadata] + buckets + [d for d, _ in beside]
    if mapper is None:
        listed = [list(_files(storage, d)) for d in directories]
    else:
        listed = list_directories(mapper, table.location, directories, "remove-orphans")
    out: list[Candidate] = []
    for (_, kind), files in zip(metadata, listed[:len(metadata)], strict=True):
        out += [Candidate(kind or metadata_kind(s.name), s, True) for s in files]
    for files in listed[len(metadata):len(metadata) + len(buckets)]:
        out += [Candidate(bucket_file_kind(s.name), s, True) for s in files]
    for (_, prefix), files in zip(beside, listed[len(metadata) + len(buckets):], strict=True):
        out += [Candidate(OTHER, s, False) for s in files
                if not s.name.startswith(prefix) and s.name not in (EARLIEST_HINT, LATEST_HINT)]
    return out


def external_roots(storage: Storage, options: TableOptions) -> list[str]:
    """The external data roots this storage reaches (with ``data-file.path-directory``)."""
    text = options.text("data-file.external-paths")
    roots = []
    for part in (text or "").split(","):
        if not part.strip():
            continue
        root = java_path(part)
        if options.data_file_path_directory:
            root = f"{root}/{options.data_file_path_directory.strip('/')}"
        try:
            storage.exists(root)
        except UnsupportedError:  # another file system: its files are left alone
            continue
        roots.append(root)
    return roots


def check_window(now_ms: int, older_than_ms: int, force: bool) -> None:
    window_ms = now_ms - older_than_ms
    if window_ms <= 0:
        raise ConfigError("older_than", "must be earlier than now: files being written now "
                          "are not referenced by any snapshot yet")
    if window_ms < MIN_WINDOW_MS and not force:
        raise ConfigError("older_than", f"a window of {window_ms / 1000:.0f} s is under one "
                          "hour; a running job's files could be taken for orphans (use force)")


@dataclasses.dataclass
class OrphanJob:
    table: Table
    clock: Clock
    older_than_ms: int | None = None  # absolute (epoch millis); default now - 1 day
    dry_run: bool = False
    force: bool = False
    executor: TaskExecutor | None = None  # one that maps tasks (Spark) lists and deletes in its tasks

    def run(self) -> OrphanResult:
        if self.table.branch != MAIN_BRANCH:  # files are the table's, whichever branch asks
            return dataclasses.replace(self, table=self.table.on_branch(MAIN_BRANCH)).run()
        refuse(self.table.latest_schema(), "remove_orphans", self.table.path)
        now = self.clock.wall_ms()
        older_than = now - DEFAULT_WINDOW_MS if self.older_than_ms is None else self.older_than_ms
        check_window(now, older_than, self.force)
        mapper = mapper_of(self.executor)
        candidates = list_candidates(self.table, mapper)
        old = [c for c in candidates
               if c.status.mtime_s is not None and c.status.mtime_s * 1000 < older_than]
        if not self.dry_run:
            clean_dead_jobs(self.table, now)
        sources = tuple(referencing_snapshots(self.table))
        # A running job's files are young, unless the window was forced short: spare them.
        used = used_files(self.table, sources).all | recorded_names(self.table) if old else set()
        orphans = [c for c in old if not c.by_name or c.status.name not in used]
        removed = FileTally()
        emptied: set[str] = set()
        if mapper is not None and not self.dry_run:
            deleted = delete_paths(mapper, self.table.location,
                                   [c.status.path for c in orphans], "remove-orphans")
            orphans = [c for c in orphans if c.status.path in deleted]
        for candidate in orphans:
            if mapper is not None and not self.dry_run:  # deleted in the tasks
                removed.add(candidate.kind, candidate.status.size_bytes)
                emptied.add(candidate.status.path.rsplit("/", 1)[0])
                continue
            if self.dry_run or self.table.storage.delete(candidate.status.path):
                crash_point("orphans.file_deleted")
                removed.add(candidate.kind, candidate.status.size_bytes)
                emptied.add(candidate.status.path.rsplit("/", 1)[0])
        if not self.dry_run:
            self._remove_empty_bucket_dirs(emptied)
        return OrphanResult(self.table.name, older_than, removed, len(candidates) - len(old),
                            len(old), sources, self.dry_run)

    def _remove_empty_bucket_dirs(self, directories: set[str]) -> None:
        """Bucket directories we emptied, then their partition directories (Java
        ``cleanEmptyDataDirectory``)."""
        storage = self.table.storage
        level = {d for d in directories if d.rsplit("/", 1)[-1].startswith(BUCKET_DIR_PREFIX)
                 and storage.delete_dir_if_empty(d)}
        for _ in range(len(self.table.latest_schema().partition_keys)):
            level = {p for p in {d.rsplit("/", 1)[0] for d in level}
                     if p.rsplit("/", 1)[-1].count("=") and storage.delete_dir_if_empty(p)}
