"""What a table looks like now: schema, snapshots, and per bucket its LSM shape.

Read-only and built from metadata alone (plus one listing per bucket when verifying that
data files exist). The daemon's prioritisation and ``paimond status`` both read it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from paimond.errors import PaimondError
from paimond.table.catalog import Table
from paimond.table.layout import CONSUMER_DIR, TAG_DIR, partition_text
from paimond.table.options.core import BUCKET_POSTPONE, TableOptions

if TYPE_CHECKING:  # scan, duties and refusals load with the first table described
    from paimond.format.meta.index_manifest import IndexManifestEntry
    from paimond.format.meta.schema import TableSchema
    from paimond.table.duties import DutyStatus
    from paimond.table.scan.snapshot_scan import BucketFiles, SnapshotFiles
    from paimond.table.status.windows import WindowReader


@dataclass(frozen=True, slots=True)
class LevelStatus:
    level: int
    files: int
    size_bytes: int
    rows: int


@dataclass(frozen=True, slots=True)
class BucketStatus:
    partition: str
    bucket: int
    levels: tuple[LevelStatus, ...]
    sorted_runs: int
    files_with_dv: int
    dv_deleted_rows: int
    small_files: int = 0  # under the compaction file size (append compaction's candidates)
    oldest_file_millis: int | None = None  # creation time of its oldest file (local wall millis)

    @property
    def files(self) -> int:
        return sum(level.files for level in self.levels)

    @property
    def rows(self) -> int:
        return sum(level.rows for level in self.levels)

    @property
    def deleted_ratio(self) -> float:
        """Rows deleted by vectors among the bucket's rows."""
        return self.dv_deleted_rows / self.rows if self.rows else 0.0

    @property
    def size_bytes(self) -> int:
        return sum(level.size_bytes for level in self.levels)


@dataclass(frozen=True, slots=True)
class ManifestStatus:
    base_files: int
    base_bytes: int
    delta_files: int
    delta_bytes: int
    index_files: Counter[str]


@dataclass(frozen=True, slots=True)
class TableStatus:
    name: str
    path: str
    schema_id: int | None = None
    primary_keys: tuple[str, ...] = ()
    partition_keys: tuple[str, ...] = ()
    merge_engine: str | None = None
    bucket_mode: str | None = None
    buckets_option: int | None = None
    file_format: str | None = None
    deletion_vectors: bool = False
    compaction_trigger: int | None = None
    stop_trigger: int | None = None
    earliest_snapshot: int | None = None
    latest_snapshot: int | None = None
    snapshot_count: int = 0
    latest_commit_kind: str | None = None
    latest_time_millis: int | None = None
    total_record_count: int | None = None
    tags: tuple[str, ...] = ()
    consumers: dict[str, int] = field(default_factory=dict)
    manifests: ManifestStatus | None = None
    buckets: tuple[BucketStatus, ...] = ()
    write_only: bool = False  # writers neither compact nor expire: paimond is the maintainer
    refusals: dict[str, tuple[str, ...]] = field(default_factory=dict)  # job -> reasons
    # option keys paimond has not decided (table/options/catalogue.py): compaction refuses the
    # table unless the operator accepts them (allow_unknown_options); the other jobs run
    undecided_options: tuple[str, ...] = ()
    duties: tuple[DutyStatus, ...] = ()
    error: str | None = None

    @property
    def postpone_rows(self) -> int:
        """Rows in postpone buckets: no reader sees them until compaction moves them."""
        return sum(b.rows for b in self.buckets if b.bucket == BUCKET_POSTPONE)

    @property
    def postpone_oldest_millis(self) -> int | None:
        """Creation time of the oldest postpone file (local wall millis; None: none)."""
        times = [b.oldest_file_millis for b in self.buckets
                 if b.bucket == BUCKET_POSTPONE and b.oldest_file_millis is not None]
        return min(times) if times else None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        if self.bucket_mode == "POSTPONE_MODE":
            out["postpone"] = {"invisible_rows": self.postpone_rows,
                               "oldest_file_millis": self.postpone_oldest_millis}
        if self.manifests is not None:
            out["manifests"]["index_files"] = dict(self.manifests.index_files)
        for bucket, source in zip(out["buckets"], self.buckets, strict=True):
            bucket["files"] = source.files
            bucket["size_bytes"] = source.size_bytes
            bucket["deleted_ratio"] = round(source.deleted_ratio, 6)
            bucket["needs_compaction"] = (bool(self.primary_keys)
                                          and self.compaction_trigger is not None
                                          and source.sorted_runs > self.compaction_trigger)
        return out


def bucket_status(schema: TableSchema, bucket: BucketFiles,
                   dv_cardinality: dict[str, int], small_size_bytes: int) -> BucketStatus:
    levels = []
    files_with_dv = deleted = small = 0
    oldest: int | None = None
    for level in sorted(bucket.levels):
        files = bucket.levels[level]
        levels.append(LevelStatus(level, len(files), sum(f.meta.file_size for f in files),
                                  sum(f.meta.row_count for f in files)))
        for live in files:
            small += live.meta.file_size < small_size_bytes
            created = live.meta.creation_time_millis
            if created is not None and (oldest is None or created < oldest):
                oldest = created
            if live.meta.file_name in dv_cardinality:
                files_with_dv += 1
                deleted += dv_cardinality[live.meta.file_name]
    return BucketStatus(partition_text(schema, bucket.partition), bucket.bucket,
                        tuple(levels), bucket.sorted_run_count(), files_with_dv, deleted, small,
                        oldest)


def dv_cardinality_by_bucket(index_entries: Iterable[IndexManifestEntry]
                             ) -> dict[tuple[bytes, int], dict[str, int]]:
    from paimond.format.meta.index_manifest import INDEX_TYPE_DELETION_VECTORS

    out: dict[tuple[bytes, int], dict[str, int]] = {}
    for entry in index_entries:
        meta = entry.index_file
        if meta.index_type != INDEX_TYPE_DELETION_VECTORS or not meta.dv_ranges:
            continue
        per_file = out.setdefault((entry.partition, entry.bucket), {})
        for dv in meta.dv_ranges:
            per_file[dv.data_file_name] = dv.cardinality or 0
    return out


def refusals_by_job(options: TableOptions) -> dict[str, tuple[str, ...]]:
    """Every job (and duty job) that refuses the table, with its reasons; undecided option
    keys are left to ``TableStatus.undecided_options`` (an operator may accept them)."""
    from paimond.table.options.catalogue import undecided
    from paimond.table.options.semantic import SEMANTIC_OPTIONS, refusals

    jobs = dict.fromkeys(job for row in SEMANTIC_OPTIONS for job in row.jobs)
    accepted = undecided(options.raw)
    found = {job: tuple(r.describe() for r in refusals(options, job, accepted)) for job in jobs}
    return {job: reasons for job, reasons in found.items() if reasons}


def undecided_options(options: TableOptions) -> tuple[str, ...]:
    from paimond.table.options.catalogue import undecided

    return undecided(options.raw)


def table_status(table: Table, *, verify_files: bool = True, parallelism: int = 8,
                 on_files: Callable[[SnapshotFiles], None] | None = None,
                 also: WindowReader | None = None) -> TableStatus:
    """Describe one table; any PaimondError is reported in ``error`` instead of raised.
    ``on_files`` also gets the latest snapshot's files: the whole scan (every live entry in
    memory at once); without it the files are read a window of partitions at a time
    (``table.status.windows``), with the same result, and ``also`` (the daemon's
    further figures) reads each window too."""
    try:
        return _table_status(table, verify_files, parallelism, on_files, also)
    except PaimondError as error:
        return TableStatus(table.name, table.path, error=f"{type(error).__name__}: {error}")


def _table_status(table: Table, verify_files: bool, parallelism: int,
                  on_files: Callable[[SnapshotFiles], None] | None,
                  also: WindowReader | None = None) -> TableStatus:
    from paimond.format.meta.index_manifest import INDEX_TYPE_DELETION_VECTORS, INDEX_TYPE_HASH
    from paimond.table.duties import duties
    from paimond.table.scan.snapshot_scan import scan_snapshot, verify_data_files

    schema = table.latest_schema()
    options = TableOptions.of(schema)
    # One listing each of the table folder and of snapshot/ answers what hints and probes
    # would otherwise ask the store one request at a time (bench/s3_requests.py).
    folders = {s.name for s in table.storage.list_dir(table.meta_path) if s.is_dir}
    snapshots = table.snapshots
    ids = snapshots.list_ids()
    latest = snapshots.load(ids[-1]) if ids else None
    status = TableStatus(
        name=table.name, path=table.path, schema_id=schema.id,
        primary_keys=schema.primary_keys, partition_keys=schema.partition_keys,
        merge_engine=options.merge_engine if schema.primary_keys else None,
        bucket_mode=options.bucket_mode(schema), buckets_option=options.bucket,
        file_format=options.file_format, deletion_vectors=options.deletion_vectors_enabled,
        compaction_trigger=options.num_sorted_run_compaction_trigger,
        stop_trigger=options.num_sorted_run_stop_trigger,
        earliest_snapshot=ids[0] if ids else None, latest_snapshot=latest.id if latest else None,
        snapshot_count=len(ids), tags=tuple(table.tags()) if TAG_DIR in folders else (),
        consumers=table.consumers() if CONSUMER_DIR in folders else {},
        write_only=options.write_only, refusals=refusals_by_job(options),
        undecided_options=undecided_options(options), duties=duties(options),
    )
    if latest is None:
        return status
    table.schema(latest.schema_id)  # the snapshot's own schema must be readable too
    if on_files is None:  # a window of partitions at a time, statistics-free (bounded memory)
        from paimond.table.status.windows import windowed_status

        manifests, buckets = windowed_status(table, schema, latest, verify_files=verify_files,
                                             parallelism=parallelism, also=also)
        return replace(status, manifests=manifests, buckets=buckets,
                       latest_commit_kind=latest.commit_kind, latest_time_millis=latest.time_millis,
                       total_record_count=latest.total_record_count)
    files = scan_snapshot(table, latest, parallelism=parallelism)  # whole entries for on_files
    on_files(files)
    if verify_files:
        verify_data_files(table, schema, files)
    base, delta = files.base_manifests, files.delta_manifests
    manifests = ManifestStatus(
        len(base), sum(m.file_size for m in base), len(delta), sum(m.file_size for m in delta),
        Counter(e.index_file.index_type for e in files.index_entries
                if e.index_file.index_type in (INDEX_TYPE_DELETION_VECTORS, INDEX_TYPE_HASH)),
    )
    dvs = dv_cardinality_by_bucket(files.index_entries)
    buckets = tuple(bucket_status(schema, b, dvs.get(key, {}), options.compaction_file_size_bytes)
                    for key, b in files.buckets().items())
    return replace(status, manifests=manifests, buckets=buckets,
                    latest_commit_kind=latest.commit_kind, latest_time_millis=latest.time_millis,
                    total_record_count=latest.total_record_count)
