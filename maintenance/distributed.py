"""Work spread over an executor's tasks: orphan removal's listing and deleting,
``rewrite-index`` per bucket, and the shuffle of a range-partitioned sort
(:class:`TaskShuffler`, :mod:`paimond.maintenance.compact.sort_ranges`).

As Paimon's Spark orphan procedure (apache/paimon 5dacde516b,
``paimon-spark-common/.../spark/orphan/SparkOrphanFilesClean.scala``) lists the bucket
directories in Spark tasks, a job whose cost grows with the number of files hands the
listing of many directories and the deletion of many files to the executor's ``map_tasks``
(``paimond.spark.executor.SparkExecutor``), when it has one. The driver still plans and decides
(what is a candidate, what is referenced, what goes); a task is plain data: where the storage
is and which directories or paths (or, for rewrite-index, one bucket's files and the job's
journal, so every file a task writes is noted before it is written). Without such an executor
the work runs here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from paimond.format.meta.manifest import ManifestEntry
from paimond.table.catalog import Table
from paimond.table.commit.job_records import JobJournal
from paimond.table.indexes.file_index_rebuild import FileIndexChange, FileIndexRebuild, FileKey
from paimond.table.storage.interface import FileStatus, StorageLocation

if TYPE_CHECKING:
    from paimond.maintenance.execution import TaskExecutor

T = TypeVar("T")
R = TypeVar("R")
C = TypeVar("C")

DIRECTORIES_PER_TASK = 64
PATHS_PER_TASK = 2_000


@runtime_checkable
class TaskMapper(Protocol):
    """Runs ``function`` on each item as a task elsewhere, results in the items' order. A
    task that fails for good fails the whole call (nothing is committed on that account)."""

    def map_tasks(self, function: Callable[[T], R], items: Sequence[T], description: str
                  ) -> list[R]: ...


def mapper_of(executor: TaskExecutor | None) -> TaskMapper | None:
    """The executor as a ``TaskMapper`` when it can map tasks too (Spark), else None."""
    return executor if isinstance(executor, TaskMapper) else None


@runtime_checkable
class TaskShuffler(TaskMapper, Protocol):
    """A ``TaskMapper`` that also shuffles: ``produce`` runs as one task per item and yields
    (destination, blob) pairs; ``consume`` runs as one task per destination (an index into
    ``destinations``) with that destination and the blobs sent to it, in no particular order.
    The results come back in ``destinations``' order. A task that fails for good fails the
    whole call."""

    def shuffle_tasks(self, produce: Callable[[T], Iterable[tuple[int, bytes]]],
                      items: Sequence[T], consume: Callable[[C, Iterator[bytes]], R],
                      destinations: Sequence[C], description: str) -> list[R]: ...


def shuffler_of(executor: TaskExecutor | None) -> TaskShuffler | None:
    """The executor as a ``TaskShuffler`` when it can shuffle (Spark), else None."""
    return executor if isinstance(executor, TaskShuffler) else None


@dataclass(frozen=True, slots=True)
class ListFiles:
    location: StorageLocation
    directories: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeleteFiles:
    location: StorageLocation
    paths: tuple[str, ...]


def list_files(task: ListFiles) -> list[list[FileStatus]]:
    """A task: the files (not directories) in each directory, in the task's order."""
    storage = task.location.open()
    return [[s for s in storage.list_dir(d) if not s.is_dir] for d in task.directories]


def delete_files(task: DeleteFiles) -> list[str]:
    """A task: delete each path; the ones that were there."""
    storage = task.location.open()
    return [path for path in task.paths if storage.delete(path)]


def _chunks(items: Sequence[T], size: int) -> list[tuple[T, ...]]:
    return [tuple(items[i:i + size]) for i in range(0, len(items), size)]


def list_directories(mapper: TaskMapper, location: StorageLocation, directories: Sequence[str],
                     what: str) -> list[list[FileStatus]]:
    """The files of each directory, listed by the mapper's tasks."""
    tasks = [ListFiles(location, chunk) for chunk in _chunks(directories, DIRECTORIES_PER_TASK)]
    listed = mapper.map_tasks(list_files, tasks, f"paimond {what}: list {len(directories)} "
                              "directories") if tasks else []
    return [files for per_task in listed for files in per_task]


def delete_paths(mapper: TaskMapper, location: StorageLocation, paths: Sequence[str],
                 what: str) -> set[str]:
    """Delete ``paths`` in the mapper's tasks; the ones that were there."""
    tasks = [DeleteFiles(location, chunk) for chunk in _chunks(paths, PATHS_PER_TASK)]
    deleted = mapper.map_tasks(delete_files, tasks, f"paimond {what}: delete {len(paths)} "
                               "files") if tasks else []
    return {path for per_task in deleted for path in per_task}


@dataclass(frozen=True, slots=True)
class IndexRewriteTask:
    """rewrite-index of one bucket's files: the table as the job writes it (its storage
    location, noting through the job's journal) and what the file rebuild needs."""

    location: StorageLocation
    table_path: str
    table_name: str
    journal: JobJournal | None
    retired: Mapping[FileKey, tuple[ManifestEntry, ...]]
    entries: tuple[ManifestEntry, ...]
    batch_rows: int
    bitmap_version: int | None = None


def rewrite_bucket_indexes(task: IndexRewriteTask) -> list[FileIndexChange | None]:
    """A task: each file of the bucket re-indexed (None where its index stays)."""
    storage = task.location.open()
    if task.journal is not None:
        storage = task.journal.recording(storage)
    rebuild = FileIndexRebuild(Table(storage, task.table_path, task.table_name), task.retired,
                               dry_run=False, batch_rows=task.batch_rows,
                               bitmap_version=task.bitmap_version)
    return [rebuild(entry) for entry in task.entries]


def index_rewrite_tasks(table: Table, journal: JobJournal | None,
                        retired: Mapping[FileKey, tuple[ManifestEntry, ...]],
                        files: Sequence[ManifestEntry], batch_rows: int,
                        bitmap_version: int | None = None) -> list[IndexRewriteTask]:
    """One task per bucket, holding the bucket's files and their retired entries."""
    by_bucket: dict[tuple[bytes, int], list[ManifestEntry]] = {}
    for entry in files:
        by_bucket.setdefault((entry.partition, entry.bucket), []).append(entry)
    return [IndexRewriteTask(table.location, table.path, table.name, journal,
                             {k: v for k, v in retired.items() if k[:2] == bucket},
                             tuple(entries), batch_rows, bitmap_version)
            for bucket, entries in by_bucket.items()]
