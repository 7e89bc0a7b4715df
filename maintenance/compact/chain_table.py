"""Chain-table compaction: Paimon's ``compact_chain_table`` procedure (``CompactChainTableAction``,
``ChainGroupReadTable``, ``ChainTableUtils``, ``MergeFileSplitRead.createChainReader``;
apache/paimon release-2.0.0 and 5dacde516b).

A chain table (``chain-table.enabled``) keeps full partitions in its snapshot branch
(``scan.fallback-snapshot-branch``) and changes in its delta branch
(``scan.fallback-delta-branch``); a partition only the delta branch has is read by merging its
*anchor*, the nearest earlier snapshot partition of its group, with the delta partitions after
the anchor up to it. Compacting partition P writes that merge into the snapshot branch as
partition P, so that readers read it directly. What Java does, and paimond as well:

- the partition's group is the leading partition keys before ``chain-table.chain-partition-keys``
  (a suffix of the partition keys; default all of them, one group);
- the anchor is the snapshot partition of P's group whose chain values are the greatest below
  P's; the delta partitions read are those of P's group whose time (``partition.timestamp-
  pattern`` and ``-formatter`` over the chain keys) is after the anchor's and not after P's;
  without an anchor, every delta partition of the group up to P;
- every file of those partitions a batch read reads (not level 0 of a branch with deletion
  vectors, unless ``deletion-vectors.merge-on-read``, nor of a ``first-row`` one: a partition
  only there does not exist yet) is read with its branch's schema; a row a deletion vector
  deletes is read as a ``-D`` of itself, so a delete compacted away in one branch still
  removes the key; rows merge by the trimmed primary key (the partition keys are not part of
  it) with the delta branch's merge engine and sequence fields, the anchor's rows first;
  retractions are dropped and every row gets P's partition values;
- P already in the snapshot branch: nothing is done, unless ``overwrite``, which rebuilds it
  (its own snapshot partition is not the anchor) in an OVERWRITE snapshot; else an APPEND one.

paimond writes the merged rows as one sorted run per bucket at the max level (Java's sink writes
level-0 files that compaction later merges: the rows read are the same), each row keeping its
sequence number, and the commit fails if the snapshot branch changed since the plan. Memory:
the partition's rows, its anchor's and its deltas', at once.

Refused with the reason: a table that is not a chain table or lacks a branch; branches whose
fields, bucket numbers or primary keys differ (Java merges bucket by bucket); dynamic or
postpone buckets; a changelog producer on the snapshot branch (Java's writer or compaction
would write changelog files paimond does not); a partition spec that does not name every
partition key; a partition the snapshot branch holds only in level 0, which its
deletion-vector readers do not read yet (Java appends to it, even with ``overwrite``, its rows
numbered after the uncompacted ones; paimond's keep their sequence numbers).
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from paimond.clock import Clock
from paimond.errors import ConfigError, RefusedError
from paimond.format.binary.binary_row import decode_manifest_row
from paimond.format.meta.index_manifest import IndexManifestEntry
from paimond.format.meta.manifest import FILE_KIND_DELETE, ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.lsm.merge.engines import make_reducer
from paimond.lsm.merge.streaming import sort_slice
from paimond.maintenance.compact.partition_rewrite import (
    PartitionFiles,
    RunWriter,
    deletion_vector_entries,
    read_partition,
)
from paimond.maintenance.job_cleanup import clean_dead_jobs, committed_names, recorded_job
from paimond.table.bucketing import bucket_function_of
from paimond.table.catalog import Table
from paimond.table.chain import chain_branches, chain_order
from paimond.table.chain import group_size as chain_group_size
from paimond.table.commit.committer import CommitChanges, Committer
from paimond.table.commit.requirements import RequireSnapshot
from paimond.table.data_files.arrow_io import FILE_SOURCE_APPEND
from paimond.table.data_files.kv_layout import key_fields, physical_row_type, thin_mode
from paimond.table.layout import MAIN_BRANCH, partition_value_text
from paimond.table.options.core import TableOptions
from paimond.table.options.merge import MergeConfig
from paimond.table.options.semantic import refuse
from paimond.table.scan.snapshot_scan import scan_snapshot

JOB = "compact_chain_table"


@dataclass(frozen=True, slots=True)
class ChainCompaction:
    """What ``compact-chain-table`` did (or, ``dry_run``, would do) to one partition."""

    table: str
    partition: str
    snapshot_branch: str
    delta_branch: str
    action: str  # append | overwrite | skip
    reason: str = ""  # why nothing is done (skip)
    anchor: str | None = None  # the snapshot partition the merge starts from
    delta_partitions: tuple[str, ...] = ()
    rows_read: int = 0
    rows_written: int = 0
    files_written: int = 0
    snapshot_id: int | None = None  # the snapshot branch's new snapshot
    dry_run: bool = False
    duration_s: float = 0.0

    def describe(self) -> str:
        head = f"{self.table}: compact chain partition {self.partition} into branch " \
               f"{self.snapshot_branch}"
        if self.action == "skip":
            return f"{head}: nothing to do ({self.reason})"
        merged = f"anchor {self.anchor or 'none'} + {self.delta_branch} " \
                 f"{', '.join(self.delta_partitions)}"
        if self.dry_run:
            return f"{head} ({self.action}): would merge {merged} ({self.rows_read} rows)"
        if self.snapshot_id is None:
            return f"{head}: merged {merged}: no row left, nothing committed"
        return (f"{head}: merged {merged}: {self.rows_read} rows read, {self.rows_written} "
                f"written in {self.files_written} files, snapshot {self.snapshot_id} "
                f"({self.action.upper()}), {self.duration_s:.2f} s")


@dataclass(frozen=True, slots=True)
class _Partition:
    data: bytes
    text: str  # its path, k1=v1/k2=v2
    values: tuple[object, ...]  # internal values, partition-key order
    value_texts: tuple[str | None, ...]


@dataclass
class _Plan:
    snapshot: Table
    delta: Table
    schema: TableSchema  # the snapshot branch's: rows are read and written in it
    target: _Partition
    group_size: int
    base_snapshot_id: int | None
    exists: bool
    anchor: PartitionFiles | None = None
    anchor_text: str | None = None
    deltas: list[tuple[str, PartitionFiles]] = field(default_factory=list)
    replaced: PartitionFiles | None = None


def _branches(table: Table) -> tuple[Table, Table]:
    """The chain table's snapshot and delta branches, checked."""
    if table.branch != MAIN_BRANCH:
        raise ConfigError("--table", f"{table.name} is a branch: name the chain table itself "
                                     "(compact-chain-table reads both of its branches)")
    schema = table.latest_schema()
    if not TableOptions.of(schema).chain_table_enabled:
        raise RefusedError(JOB, f"{table.name} is not a chain table (chain-table.enabled is "
                                "not true)", table.path)
    return chain_branches(table, schema, JOB)


def _check_branches(table: Table, snapshot: TableSchema, delta: TableSchema) -> None:
    refuse(snapshot, "compact", table.path)
    refuse(delta, "compact", table.path)

    def differ(what: str) -> RefusedError:
        return RefusedError(JOB, f"the snapshot and delta branches' {what} differ: a chain "
                                 "table's branches must agree on them", table.path)

    if [(f.name, f.type) for f in snapshot.fields] != [(f.name, f.type) for f in delta.fields]:
        raise differ("fields")
    if snapshot.primary_keys != delta.primary_keys or not snapshot.primary_keys:
        raise differ("primary keys") if snapshot.primary_keys else RefusedError(
            JOB, "a chain table has a primary key", table.path)
    if snapshot.partition_keys != delta.partition_keys:
        raise differ("partition keys")
    snapshot_options, delta_options = TableOptions.of(snapshot), TableOptions.of(delta)
    if snapshot_options.bucket <= 0:
        raise RefusedError(JOB, f"bucket={snapshot_options.bucket}: chain-table compaction "
                                "writes fixed buckets", table.path)
    if snapshot_options.bucket != delta_options.bucket:
        raise differ(f"bucket numbers ({snapshot_options.bucket} and {delta_options.bucket})")
    if snapshot_options.changelog_producer != "none":
        raise RefusedError(JOB, f"the snapshot branch's changelog-producer is "
                                f"{snapshot_options.changelog_producer}: Java's write would "
                                "produce changelog files, which paimond does not write here",
                           table.path)


def _partitions(schema: TableSchema, datas: Sequence[bytes]) -> list[_Partition]:
    options = TableOptions.of(schema)
    types = schema.partition_type.field_types
    out = []
    for data in datas:
        values = decode_manifest_row(data, types)
        texts = tuple(None if v is None else partition_value_text(
            v, t, options.partition_legacy_name) for v, t in zip(values, types, strict=True))
        text = "/".join(f"{k}={options.partition_default_name if t is None else t}"
                        for k, t in zip(schema.partition_keys, texts, strict=True))
        out.append(_Partition(data, text, values, texts))
    return out


@dataclass(frozen=True, slots=True)
class _BranchFiles:
    snapshot_id: int | None  # the branch's latest
    visible: dict[bytes, PartitionFiles]  # what a batch read reads, by partition
    every: dict[bytes, PartitionFiles]  # every live file, by partition


def _files_of(table: Table) -> _BranchFiles:
    """A branch's live files. A batch read leaves level 0 out where Java's batch scan skips
    it: a partition only there is not one yet."""
    latest = table.snapshots.latest()
    if latest is None:
        return _BranchFiles(None, {}, {})
    scan = scan_snapshot(table, latest)
    lowest = 1 if TableOptions.of(table.latest_schema()).batch_scan_skips_level0 else 0
    vectors = deletion_vector_entries(scan.index_entries)

    def by_partition(entries: Sequence[ManifestEntry]) -> dict[bytes, PartitionFiles]:
        files: dict[bytes, list[ManifestEntry]] = {}
        for entry in entries:
            files.setdefault(entry.partition, []).append(entry)
        return {p: PartitionFiles(p, tuple(e), tuple(vectors.get(p, ())))
                for p, e in files.items()}

    every = [live.entry for live in scan.files]
    return _BranchFiles(latest.id, by_partition([e for e in every if e.file.level >= lowest]),
                        by_partition(every))


def _wanted(spec: Mapping[str, str], schema: TableSchema, table: str) -> dict[str, str]:
    """The spec's values (quotes around one dropped); ConfigError unless it names every
    partition key and nothing else."""
    keys = list(schema.partition_keys)
    unknown = sorted(set(spec) - set(keys))
    if unknown:
        raise ConfigError("--partition", f"{', '.join(unknown)} is not a partition key of "
                                         f"{table} (partition keys: {keys})")
    if set(spec) != set(keys):
        raise ConfigError("--partition", f"name every partition key of the chain table "
                                         f"({', '.join(keys)}): it compacts one partition")
    return {k: v[1:-1] if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"" else v
            for k, v in spec.items()}


def plan_chain_compaction(table: Table, spec: Mapping[str, str], *, overwrite: bool
                          ) -> _Plan | ChainCompaction:
    """The plan, or the result when there is nothing to do."""
    wanted = _wanted(spec, table.latest_schema(), table.name)
    snapshot_table, delta_table = _branches(table)
    schema, delta_schema = snapshot_table.latest_schema(), delta_table.latest_schema()
    _check_branches(table, schema, delta_schema)
    group_size = chain_group_size(schema)
    text = "/".join(f"{k}={wanted[k]}" for k in schema.partition_keys)
    names = (snapshot_table.branch, delta_table.branch)

    def skip(reason: str) -> ChainCompaction:
        return ChainCompaction(table.name, text, *names, action="skip", reason=reason)

    delta_files = _files_of(delta_table).visible
    snapshot_branch = _files_of(snapshot_table)
    snapshot_files = snapshot_branch.visible
    deltas = _partitions(schema, list(delta_files))
    target = next((p for p in deltas if p.value_texts == tuple(
        None if wanted[k] == TableOptions.of(schema).partition_default_name else wanted[k]
        for k in schema.partition_keys)), None)
    if target is None:
        return skip(f"branch {delta_table.branch} has no partition {text}")
    exists = target.data in snapshot_files
    if not exists and target.data in snapshot_branch.every:
        raise RefusedError(JOB, f"branch {snapshot_table.branch} has level-0 files of partition "
                                f"{target.text} that its readers do not read yet (deletion "
                                "vectors): compact that branch first", table.path)
    if exists and not overwrite:
        return skip(f"branch {snapshot_table.branch} already has partition {target.text} "
                    "(--overwrite rebuilds it)")
    plan = _Plan(snapshot_table, delta_table, schema, target, group_size,
                 snapshot_branch.snapshot_id, exists,
                 replaced=snapshot_branch.every.get(target.data) if exists else None)
    group = target.values[:group_size]
    chain = chain_order(target.values[group_size:])
    earlier = [p for p in _partitions(schema, [d for d in snapshot_files if d != target.data])
               if p.values[:group_size] == group and chain_order(p.values[group_size:]) < chain]
    anchor = max(earlier, key=lambda p: chain_order(p.values[group_size:]), default=None)
    same_group = sorted((p for p in deltas if p.values[:group_size] == group),
                        key=lambda p: chain_order(p.values[group_size:]))
    if anchor is None:
        chosen = [p for p in same_group if chain_order(p.values[group_size:]) <= chain]
    else:
        plan.anchor, plan.anchor_text = snapshot_files[anchor.data], anchor.text
        chosen = _after_anchor(schema, group_size, anchor, target, same_group)
    plan.deltas = [(p.text, delta_files[p.data]) for p in chosen]
    return plan


def _after_anchor(schema: TableSchema, group_size: int, anchor: _Partition, target: _Partition,
                  candidates: Sequence[_Partition]) -> list[_Partition]:
    """The delta partitions whose time is after the anchor's, up to the target's (Java
    enumerates the times by the formatter's smallest step and reads those it finds)."""
    options = TableOptions.of(schema)
    for option, value in (("partition.timestamp-pattern", options.partition_timestamp_pattern),
                          ("partition.timestamp-formatter", options.partition_timestamp_formatter)):
        if not value:
            raise ConfigError(option, "a chain table needs it to find the delta partitions "
                                      f"after the anchor {anchor.text} (Java: cannot be null)")
    extractor = options.partition_time_extractor
    keys = list(schema.partition_keys)[group_size:]

    def time_of(partition: _Partition) -> datetime.datetime:
        try:
            return extractor.extract(keys, partition.value_texts[group_size:])
        except ValueError as error:
            raise ConfigError("partition.timestamp-formatter",
                              f"partition {partition.text} has no time: {error}") from error

    start, end = time_of(anchor), time_of(target)
    return [p for p in candidates if start < time_of(p) <= end]


def compact_chain_table(table: Table, partition: Mapping[str, str], *, clock: Clock,
                        overwrite: bool = False, dry_run: bool = False) -> ChainCompaction:
    """Compact one partition of a chain table into its snapshot branch (module docstring);
    a recorded job: a run killed midway leaves files the next run deletes."""
    planned = plan_chain_compaction(table, partition, overwrite=overwrite)
    if isinstance(planned, ChainCompaction):
        if not dry_run:  # a killed run's files go even when its commit landed
            clean_dead_jobs(table.on_branch(planned.snapshot_branch), clock.wall_ms())
        return planned
    plan = planned
    result = ChainCompaction(
        table.name, plan.target.text, plan.snapshot.branch, plan.delta.branch,
        action="overwrite" if plan.exists else "append", anchor=plan.anchor_text,
        delta_partitions=tuple(t for t, _ in plan.deltas),
        rows_read=(plan.anchor.rows if plan.anchor else 0) + sum(f.rows for _, f in plan.deltas),
        dry_run=dry_run)
    if dry_run:
        return result
    started = time.monotonic()
    options = TableOptions.of(plan.schema)
    with recorded_job(plan.snapshot, JOB, clock) as recorded:
        writer = RunWriter.of(recorded.table, plan.schema, level=options.num_levels - 1,
                              file_source=FILE_SOURCE_APPEND, now_millis=clock.local_ms)
        try:
            merged = _merge(plan)
            total = options.bucket
            columns = physical_row_type(plan.schema, key_value=True,
                                        thin=thin_mode(plan.schema, options)).field_names
            for bucket, rows in bucket_function_of(plan.schema, options).split(merged, total):
                writer.write(plan.target.data, bucket, total, rows, columns)
            if not writer.added:
                return result
            replaced = plan.replaced or PartitionFiles(plan.target.data, ())
            changes = CommitChanges(
                added=writer.added, deleted=list(replaced.files),
                index_deleted=[_deleted(e) for e in replaced.dv_entries],
                requirements=[RequireSnapshot(plan.base_snapshot_id)])
            recorded.keep(committed_names(changes))
            snapshot = Committer(recorded.table, commit_kind=result.action.upper(), clock=clock,
                                 journal=recorded).commit(changes)
        except BaseException:
            writer.delete_written()
            raise
    return dataclasses.replace(result, rows_written=merged.num_rows,
                               files_written=len(writer.added), snapshot_id=snapshot.id,
                               duration_s=time.monotonic() - started)


def _merge(plan: _Plan) -> pa.Table:
    """The target partition's rows: the anchor's and the deltas' merged (module docstring)."""
    schema = plan.schema
    pieces = []
    if plan.anchor is not None:
        pieces.append(read_partition(
            plan.snapshot, schema, plan.anchor, retract_deleted=True,
            bitmap64=TableOptions.of(plan.snapshot.latest_schema()).deletion_vectors_bitmap64))
    bitmap64 = TableOptions.of(plan.delta.latest_schema()).deletion_vectors_bitmap64
    target_rows = None
    for _, files in plan.deltas:
        rows = read_partition(plan.delta, schema, files, retract_deleted=True, bitmap64=bitmap64)
        if files.partition == plan.target.data:
            target_rows = rows
        pieces.append(rows)
    assert target_rows is not None and target_rows.num_rows, "the target is a delta partition"
    pieces = [_in_partition(p, target_rows, schema.partition_keys) for p in pieces]
    config = MergeConfig.of(plan.delta.latest_schema())  # Java reads with the delta branch
    order = "descending" if config.sequence_descending else "ascending"
    reducer = make_reducer(config, schema.field_names, drop_deletes=True)
    return reducer(sort_slice(pieces, [f.name for f in key_fields(schema)],
                              [(name, order) for name in config.sequence_fields]))


def _in_partition(rows: pa.Table, target_rows: pa.Table, keys: Sequence[str]) -> pa.Table:
    """``rows`` with the target partition's values in its partition columns."""
    first = np.zeros(rows.num_rows, dtype=np.int64)
    for key in keys:
        index = rows.schema.get_field_index(key)
        rows = rows.set_column(index, rows.schema.field(index),
                               target_rows.column(key).take(pa.array(first)))
    return rows


def _deleted(entry: IndexManifestEntry) -> IndexManifestEntry:
    return dataclasses.replace(entry, kind=FILE_KIND_DELETE)
