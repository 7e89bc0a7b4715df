"""Partition expiration: Java ``NormalPartitionExpire`` with ``PartitionValuesTimeExpireStrategy``
and ``PartitionUpdateTimeExpireStrategy``, dropping through ``FileStoreCommitImpl
.dropPartitions`` (apache/paimon 5dacde516b). Writers with ``write-only=true`` skip it.

The threshold is the local ``now - partition.expiration-time`` (``--older-than`` overrides
the option). ``values-time``: a partition expires when its time (``PartitionTimeExtractor``)
is strictly before the threshold; a value that does not parse, or a null the time needs, keeps
the partition and is reported as a warning (Java logs and skips it). ``update-time``: when the
newest creation time of its files in the latest snapshot's manifests (Java's
``PartitionEntry.lastFileCreationTime``: ADD and DELETE entries alike) is before the threshold.
Expired partitions are sorted by their values joined with ``,`` (nulls as the default
partition name) and the first ``partition.expiration-max-num`` kept.

A drop is one OVERWRITE snapshot per ``partition.expiration-batch-size`` partitions (default:
all of them): a DELETE entry for every live file of those partitions (buckets >= 0 unless the
table is postpone-bucket) and a DELETE of their index manifest entries, computed from the whole
latest snapshot, so any concurrent commit makes the job re-plan. No file is deleted here:
snapshot expiration deletes them once no kept snapshot holds them. Chain tables
(``chain-table.enabled``) expire by segments across their branches
(:mod:`paimond.maintenance.expire.chain_partitions`).

A table with ``metastore.partitioned-table=true`` in a Hive catalog's warehouse: each batch's
partitions, and their ``.done`` partitions (the last value with ``.done``), are dropped from
the metastore first, then the drop is committed (Java ``HiveCatalog.dropPartitions``), so a
commit that fails or is killed after the metastore's drop leaves partitions the next run finds
and drops again (the metastore skipping those it no longer has). A partition that still has
files on another branch stays in the metastore (Java
``removePartitionsExistsInOtherBranches``). In any other warehouse such a table is refused:
Java drops through a metastore paimond would not reach.
"""

from __future__ import annotations

import datetime
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from paimond.clock import Clock
from paimond.errors import ConfigError, NullPartitionValueError, UnsupportedError
from paimond.faults import crash_point
from paimond.format.binary.binary_row import decode_manifest_row
from paimond.format.meta.manifest import FILE_KIND_ADD, FILE_KIND_DELETE
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.maintenance.job_cleanup import recorded_job
from paimond.maintenance.replan import Attempt, commit_with_replan
from paimond.table.catalog import Table, split_branch
from paimond.table.catalogs.catalog_storage import catalog_of
from paimond.table.catalogs.hive import HiveCatalog
from paimond.table.commit.committer import CommitChanges, CommitJournal, Committer
from paimond.table.commit.requirements import RequireSnapshot
from paimond.table.layout import MAIN_BRANCH, partition_text, partition_value_text
from paimond.table.options.core import BUCKET_POSTPONE, TableOptions
from paimond.table.partition_time import PartitionTimeExtractor
from paimond.table.scan.snapshot_scan import SnapshotFiles, read_manifest, scan_snapshot

_EPOCH = datetime.datetime(1970, 1, 1)


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition of the latest snapshot (Java ``PartitionEntry``)."""

    partition: bytes  # manifest BinaryRow bytes
    path: str  # k1=v1/k2=v2
    texts: tuple[str | None, ...]  # Java toString() of each value (None: null)
    file_count: int
    row_count: int
    last_file_creation_ms: int  # local wall-clock millis, as files record them


@dataclass(frozen=True, slots=True)
class ExpireRule:
    expiration_ms: int
    strategy: str  # values-time | update-time
    extractor: PartitionTimeExtractor
    max_num: int
    batch_size: int  # partitions per commit; <= 0: all in one
    default_name: str = "__DEFAULT_PARTITION__"


@dataclass(frozen=True, slots=True)
class ExpiredPartition:
    partition: bytes
    path: str
    reason: str
    file_count: int
    row_count: int
    values: tuple[str, ...] = ()  # each key's value text, in partition-key order


@dataclass(frozen=True, slots=True)
class PartitionExpirePlan:
    base_snapshot_id: int
    threshold: datetime.datetime  # local now - expiration
    expired: tuple[ExpiredPartition, ...]  # sorted as Java sorts, cut to max_num
    over_limit: int  # expired partitions beyond max_num, left for a later run
    warnings: tuple[str, ...]


def plan_partition_expire(partitions: Sequence[PartitionState], keys: Sequence[str],
                          rule: ExpireRule, now_local: datetime.datetime,
                          base_snapshot_id: int) -> PartitionExpirePlan:
    """Pure: which partitions expire at ``now_local`` and why."""
    threshold = now_local - datetime.timedelta(milliseconds=rule.expiration_ms)
    found: list[tuple[str, ExpiredPartition]] = []
    warnings: list[str] = []
    for state in partitions:
        if state.file_count <= 0:
            continue
        reason = _expired_because(state, keys, rule, threshold, warnings)
        if reason is None:
            continue
        if any(t is None for t in state.texts):
            warnings.append(f"{state.path}: expired ({reason}) but has a null value, which Java "
                            "cannot drop (NullPointerException); drop it by hand")
            continue
        joined = ",".join(rule.default_name if t is None else t for t in state.texts)
        found.append((joined, ExpiredPartition(state.partition, state.path, reason,
                                               state.file_count, state.row_count,
                                               tuple(t or "" for t in state.texts))))
    found.sort(key=lambda pair: pair[0].encode("utf-16-be"))  # Java String order
    kept = [p for _, p in found[:max(rule.max_num, 0)]]
    return PartitionExpirePlan(base_snapshot_id, threshold, tuple(kept),
                               len(found) - len(kept), tuple(warnings))


def _expired_because(state: PartitionState, keys: Sequence[str], rule: ExpireRule,
                     threshold: datetime.datetime, warnings: list[str]) -> str | None:
    if rule.strategy == "update-time":
        updated = _EPOCH + datetime.timedelta(milliseconds=state.last_file_creation_ms)
        # Java compares epoch millis of both local date-times in the system zone
        if _local_epoch_s(threshold) > _local_epoch_s(updated):
            return f"last updated {updated.isoformat(' ')} < {threshold.isoformat(' ')}"
        return None
    try:
        moment = rule.extractor.extract(keys, state.texts)
    except NullPartitionValueError as error:
        warnings.append(f"{state.path}: cannot be expired, {error} (use update-time or drop "
                        "it by hand)")
        return None
    except ValueError as error:
        warnings.append(f"{state.path}: no time in the partition value ({error}); kept")
        return None
    if threshold > moment:
        return f"partition time {moment.isoformat(' ')} < {threshold.isoformat(' ')}"
    return None


def _local_epoch_s(moment: datetime.datetime) -> float:
    try:
        return moment.timestamp()
    except (OverflowError, ValueError, OSError):
        return float("inf") if moment.year > 5000 else float("-inf")


def partition_states(table: Table, schema: TableSchema, files: SnapshotFiles,
                     *, with_deleted_entries: bool) -> list[PartitionState]:
    """Per partition of ``files``: live file and row counts, newest file creation time (over
    every manifest entry when ``with_deleted_entries``, as Java's partition entries are)."""
    types = schema.partition_type.field_types
    counts: dict[bytes, list[int]] = {}
    for live in files.files:
        state = counts.setdefault(live.entry.partition, [0, 0, 0])
        state[0] += 1
        state[1] += live.meta.row_count
        state[2] = max(state[2], live.meta.creation_time_millis or 0)
    if with_deleted_entries:
        where = table.snapshots.path(files.snapshot.id)
        for meta in files.manifests:
            for entry in read_manifest(table, meta, where):
                if entry.partition in counts and entry.kind in (FILE_KIND_ADD, FILE_KIND_DELETE):
                    state = counts[entry.partition]
                    state[2] = max(state[2], entry.file.creation_time_millis or 0)
    out = []
    for partition, (file_count, row_count, created) in counts.items():
        values = decode_manifest_row(partition, types)
        texts = tuple(None if v is None else partition_value_text(v, t, True)
                      for v, t in zip(values, types, strict=True))
        out.append(PartitionState(partition, partition_text(schema, partition), texts,
                                  file_count, row_count, created))
    return out


@dataclass
class PartitionExpireResult:
    table_name: str
    nothing_to_do: str | None = None  # why the job did not look at partitions
    # nothing_to_do by the schema or for want of a snapshot: so until either changes
    settled: bool = False
    strategy: str = ""
    expiration_ms: int = 0
    threshold: datetime.datetime | None = None
    base_snapshot_id: int | None = None
    expired: list[ExpiredPartition] = field(default_factory=list)  # dropped, or would be
    over_limit: int = 0
    warnings: list[str] = field(default_factory=list)
    snapshots: list[int] = field(default_factory=list)
    dry_run: bool = False
    attempts: int = 0
    duration_s: float = 0.0

    def quiet_until_ms(self) -> float | None:
        """Nothing to do until a new snapshot or schema (inf): the table is not partitioned,
        has no expiration time, or no snapshot. None otherwise: partitions age with the clock."""
        return math.inf if self.settled and not self.dry_run else None

    def describe(self) -> str:
        if self.nothing_to_do is not None:
            return f"{self.table_name}: {self.nothing_to_do}"
        head = (f"{self.table_name}: {self.strategy}, partitions older than "
                f"{self.threshold.isoformat(' ') if self.threshold else '?'} "
                f"(now - {self.expiration_ms} ms), snapshot {self.base_snapshot_id}: ")
        if not self.expired:
            lines = [head + "no partition expired"]
        else:
            done = ("would be dropped (dry run)" if self.dry_run else "dropped in OVERWRITE "
                    f"snapshot(s) {', '.join(map(str, self.snapshots))}")
            lines = [head + f"{len(self.expired)} partition(s) {done} in {self.duration_s:.2f} s"]
            lines += [f"  {p.path}: {p.file_count} files, {p.row_count} rows; {p.reason}"
                      for p in self.expired]
        if self.over_limit:
            lines.append(f"  {self.over_limit} more expired partition(s) beyond "
                         "partition.expiration-max-num are left for the next run")
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


@dataclass
class PartitionExpireJob:
    table: Table
    clock: Clock = field(kw_only=True)  # now, and the snapshots' timeMillis
    older_than_ms: int | None = None  # overrides partition.expiration-time
    max_num: int | None = None  # overrides partition.expiration-max-num
    dry_run: bool = False
    max_attempts: int = 3
    _journal: CommitJournal | None = field(default=None, init=False, repr=False)

    def run(self) -> PartitionExpireResult:
        """Runs as a recorded job (a dry run writes nothing): a drop killed before its
        snapshot leaves manifests the next writing job deletes."""
        if self.dry_run:
            return self._run()
        with recorded_job(self.table, "expire-partitions", self.clock) as recorded:
            self._journal = recorded
            try:
                return self._run()
            finally:
                self._journal = None

    def _run(self) -> PartitionExpireResult:
        started = time.monotonic()
        table = self.table
        schema = table.latest_schema()
        options = TableOptions.of(schema)
        result = PartitionExpireResult(table.name, dry_run=self.dry_run)
        rule = self._rule(schema, options, result)
        if rule is None:
            return result
        if options.chain_table_enabled:  # Java ChainTablePartitionExpire
            from paimond.maintenance.expire.chain_partitions import expire_chain_partitions

            return expire_chain_partitions(self.table, schema, rule, result, clock=self.clock,
                                           journal=self._journal, started=started)
        now = self.clock.local_now()  # one reading of now for the whole run, as Java
        remaining = rule.max_num
        while True:
            snapshot, attempts, plan, batch = self._round(schema, options, rule, remaining, now)
            result.attempts += attempts
            if result.base_snapshot_id is None:
                result.base_snapshot_id = plan.base_snapshot_id
                result.threshold = plan.threshold
                result.warnings = list(plan.warnings)
            result.over_limit = plan.over_limit
            if snapshot is None:
                if self.dry_run:
                    result.expired = list(plan.expired)
                break
            result.expired += batch
            result.snapshots.append(snapshot.id)
            remaining -= len(batch)
            if len(batch) == len(plan.expired) or remaining <= 0:
                break
            crash_point("partition_expire.batch_committed")
        result.duration_s = time.monotonic() - started
        return result

    def _round(self, schema: TableSchema, options: TableOptions, rule: ExpireRule,
               remaining: int, now: datetime.datetime
               ) -> tuple[Snapshot | None, int, PartitionExpirePlan, tuple[ExpiredPartition, ...]]:
        """Plan and drop one batch, re-planned on a conflict; the last plan and its batch."""
        plans: list[tuple[PartitionExpirePlan, tuple[ExpiredPartition, ...]]] = []

        def attempt(number: int) -> Attempt:
            plan, files = self._plan(schema, replace(rule, max_num=remaining), now)
            size = rule.batch_size if rule.batch_size > 0 else len(plan.expired)
            batch = plan.expired[:size]
            plans.append((plan, batch))
            if self.dry_run or files is None or not batch:
                return Attempt()
            return Attempt(lambda: self._commit(plan, batch, files, options))

        snapshot, attempts = commit_with_replan(attempt, self.max_attempts)
        return snapshot, attempts, *plans[-1]

    def _rule(self, schema: TableSchema, options: TableOptions,
              result: PartitionExpireResult) -> ExpireRule | None:
        if not schema.partition_keys:
            result.nothing_to_do = "the table is not partitioned: no partition to expire"
            result.settled = True
            return None
        expiration = self.older_than_ms
        if expiration is None:
            expiration = options.partition_expiration_time_ms
        if expiration is None:
            result.nothing_to_do = ("partition.expiration-time is not set and no --older-than "
                                    "given: partitions never expire")
            result.settled = True
            return None
        if options.metastore_partitioned_table and self._metastore() is None:
            raise UnsupportedError(f"{self.table.name}: with metastore.partitioned-table=true "
                                   "Java drops expired partitions (and their .done partitions) "
                                   "through the metastore; configure the warehouse's Hive "
                                   "catalog (metastore = \"hive\") so paimond does too")
        max_num = options.partition_expiration_max_num if self.max_num is None else self.max_num
        if max_num < 0:
            raise ConfigError("partition.expiration-max-num", f"must not be negative: {max_num}")
        rule = ExpireRule(expiration, options.partition_expiration_strategy,
                          options.partition_time_extractor, max_num,
                          options.partition_expiration_batch_size, options.partition_default_name)
        result.strategy, result.expiration_ms = rule.strategy, expiration
        if not options.chain_table_enabled and self.table.snapshots.latest_id() is None:
            result.nothing_to_do = "no snapshot yet: no partition to expire"
            result.settled = True
            return None
        return rule

    def _plan(self, schema: TableSchema, rule: ExpireRule, now: datetime.datetime
              ) -> tuple[PartitionExpirePlan, SnapshotFiles | None]:
        latest: Snapshot | None = self.table.snapshots.latest()
        if latest is None:
            return PartitionExpirePlan(0, now, (), 0, ()), None
        files = scan_snapshot(self.table, latest)
        states = partition_states(self.table, schema, files,
                                  with_deleted_entries=rule.strategy == "update-time")
        plan = plan_partition_expire(states, schema.partition_keys, rule, now, latest.id)
        return plan, files

    def _metastore(self) -> HiveCatalog | None:
        catalog = catalog_of(self.table.storage)
        return catalog if isinstance(catalog, HiveCatalog) else None

    def _commit(self, plan: PartitionExpirePlan, batch: Sequence[ExpiredPartition],
                files: SnapshotFiles, options: TableOptions) -> Snapshot:
        metastore = self._metastore()
        if options.metastore_partitioned_table and metastore is not None:
            self._drop_from_metastore(metastore, batch)
        return drop_partitions(self.table, {p.partition for p in batch}, files, options,
                               clock=self.clock, journal=self._journal)

    def _drop_from_metastore(self, metastore: HiveCatalog,
                             batch: Sequence[ExpiredPartition]) -> None:
        """Drop ``batch`` and its ``.done`` partitions from the metastore, but not a partition
        another branch still has files in."""
        elsewhere = _partitions_on_other_branches(self.table, {p.partition for p in batch})
        values = [p.values for p in batch if p.partition not in elsewhere]
        done = [(*v[:-1], v[-1] + ".done") for v in values if v]
        database, name = split_branch(self.table.name)[0].split(".", 1)
        metastore.drop_partitions(database, name, [*values, *done])


def _partitions_on_other_branches(table: Table, partitions: set[bytes]) -> set[bytes]:
    """Which of ``partitions`` have live files in the latest snapshot of another branch of
    ``table`` (the main branch included when ``table`` is a branch)."""
    found: set[bytes] = set()
    others = [b for b in [MAIN_BRANCH, *table.branches()] if b != table.branch]
    for branch in others:
        other = table.on_branch(branch)
        latest = other.snapshots.latest()
        if latest is None:
            continue
        found |= {f.entry.partition for f in scan_snapshot(other, latest).files
                  if f.entry.partition in partitions}
    return found


def drop_partitions(table: Table, dropped: set[bytes], files: SnapshotFiles,
                    options: TableOptions, *, clock: Clock, journal: CommitJournal | None
                    ) -> Snapshot:
    """One OVERWRITE snapshot deleting every live file (buckets >= 0 unless the table is
    postpone-bucket) and index entry of ``dropped`` (Java ``dropPartitions``); it requires
    ``files``' snapshot to be the latest."""
    every_bucket = options.bucket == BUCKET_POSTPONE
    deleted = [f.entry for f in files.files if f.entry.partition in dropped
               and (every_bucket or f.entry.bucket >= 0)]
    index_deleted = [replace(e, kind=FILE_KIND_DELETE) for e in files.index_entries
                     if e.partition in dropped]
    changes = CommitChanges(deleted=deleted, index_deleted=index_deleted,
                            requirements=[RequireSnapshot(files.snapshot.id)], base=files)
    return Committer(table, commit_kind="OVERWRITE", clock=clock, journal=journal
                     ).commit(changes)
