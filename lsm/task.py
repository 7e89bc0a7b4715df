"""One bucket's compaction as plain data: the task a planner emits and the result an
executor returns (Java ``CompactUnit`` + ``CompactResult``; executed by ``lsm.rewrite``).

Tasks and results are frozen, picklable and free of storage handles, so they can be printed
by ``--dry-run``, sent to a process pool or to a Spark executor, and committed centrally.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from paimond.format.meta.index_manifest import IndexManifestEntry
from paimond.format.meta.manifest import ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.lsm.merge.record_expire import RecordExpiry
from paimond.table.commit.requirements import Requirement
from paimond.table.indexes.deletion_vectors import dv_index_unchanged
from paimond.table.options.core import TableOptions
from paimond.table.storage.interface import StorageLocation


@dataclass(frozen=True, slots=True)
class TaskTable:
    """What a worker needs of the table, resolved by the planner: where its storage is, the
    schema and typed options to write with, and the schemas the task's files were written
    with. A worker reads neither schema files nor option strings again."""

    name: str
    path: str
    location: StorageLocation
    schema: TableSchema
    options: TableOptions
    file_schemas: tuple[TableSchema, ...] = ()

    def schema_of(self, schema_id: int) -> TableSchema:
        """The schema a task's file was written with (KeyError: the planner did not resolve it)."""
        if schema_id == self.schema.id:
            return self.schema
        for schema in self.file_schemas:
            if schema.id == schema_id:
                return schema
        raise KeyError(f"schema {schema_id} of {self.name} was not resolved by the planner")


@dataclass(frozen=True, slots=True)
class CompactTask:
    table: TaskTable
    base_snapshot_id: int
    partition: bytes
    partition_text: str
    bucket: int
    total_buckets: int
    directory: str  # the bucket's data file directory
    output_level: int
    max_level: int
    inputs: tuple[ManifestEntry, ...]
    drop_deletes: bool
    trigger: str
    reason: str
    file_rewrite: bool = False
    # Deletion-vector tables: the bucket's DV index file (None: no vectors yet) and the live
    # files above the output level, where level-0 keys look up the rows they supersede.
    deletion_vectors: bool = False
    dv_index: IndexManifestEntry | None = None
    lookup_files: tuple[ManifestEntry, ...] = ()
    # record-level.expire-time: rows past their TTL at the plan's moment are dropped on read
    record_expiry: RecordExpiry | None = None
    # An append table's task (maintenance.append_plan): the inputs are concatenated in order
    # into new level-0 files (maintenance.append_rewrite), nothing is merged.
    append: bool = False
    # A bucket-unaware append table's DV index files holding the inputs' vectors (several
    # per partition; the ones the task rewrites without the inputs' entries)
    dv_index_files: tuple[IndexManifestEntry, ...] = ()
    # changelog-producer lookup / full-compaction: changelog files written beside the output
    # (lsm.changelog); None: the table's compaction produces none
    changelog_producer: str | None = None

    @property
    def table_name(self) -> str:
        return self.table.name

    @property
    def table_path(self) -> str:
        return self.table.path

    @property
    def schema_id(self) -> int:
        return self.table.schema.id

    @property
    def input_bytes(self) -> int:
        return sum(e.file.file_size for e in self.inputs)

    def describe(self) -> str:
        where = f"{self.partition_text or '-'} bucket {self.bucket}"
        levels = sorted({e.file.level for e in self.inputs})
        changelog = f", changelog: {self.changelog_producer}" if self.changelog_producer else ""
        return (f"{where}: {len(self.inputs)} files ({self.input_bytes} bytes) from levels "
                f"{levels} -> level {self.output_level} [{self.trigger}: {self.reason}"
                f"{changelog}]")


@dataclass(frozen=True, slots=True)
class CompactResult:
    task: CompactTask
    deleted: tuple[ManifestEntry, ...] = ()
    added: tuple[ManifestEntry, ...] = ()
    rows_read: int = 0
    rows_expired: int = 0  # rows past record-level.expire-time dropped on read
    rows_written: int = 0
    files_rewritten: int = 0
    files_upgraded: int = 0
    duration_s: float = 0.0
    written_paths: tuple[str, ...] = field(default=())
    index_added: tuple[IndexManifestEntry, ...] = ()  # the bucket's new DV index file
    index_deleted: tuple[IndexManifestEntry, ...] = ()  # DV index files rewritten (append)
    rows_superseded: int = 0  # higher-level rows newly marked in deletion vectors
    cache_hits: int = 0  # key-lookup cache: files answered from the cache
    cache_misses: int = 0  # ... cached now (read from storage once)
    cache_discarded: int = 0  # ... cache files that failed validation (rebuilt)
    changelog: tuple[ManifestEntry, ...] = ()  # changelog files written (ADD entries)

    @property
    def requirements(self) -> tuple[Requirement, ...]:
        """What committing this result requires beyond its files: a bucket's new DV index
        file was computed from the task's one, which must still be the bucket's (a
        bucket-unaware table's DV files are checked by name as the commit combines them)."""
        if self.index_added and not self.task.dv_index_files:
            return (dv_index_unchanged(self.task.partition, self.task.bucket, self.task.dv_index),)
        return ()

    @property
    def bytes_written(self) -> int:
        upgraded = {e.file.file_name for e in self.deleted}
        return sum(e.file.file_size for e in self.added if e.file.file_name not in upgraded)
