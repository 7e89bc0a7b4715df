"""Partition expiration of chain tables: Java ``ChainTablePartitionExpire`` (apache/paimon
5dacde516b), which every writer of a chain table runs with its branch's options.

A delta partition is read through its anchor, the nearest earlier snapshot partition of its
group, so partitions expire in *segments*: a snapshot partition with the delta partitions from
its time up to (not including) the next snapshot partition's. Per group (the leading partition
keys before ``chain-table.chain-partition-keys``), of the snapshot partitions whose time (the
chain keys through ``partition.timestamp-pattern``/``-formatter``) is before ``now -
partition.expiration-time``, the latest is the anchor and stays; each earlier one expires with
its segment, at most ``partition.expiration-max-num`` segments per group, and with them the
delta partitions before the first snapshot partition. A group with fewer than two snapshot
partitions before the cutoff, or none at all, keeps everything. A partition whose time cannot
be read is never expired (Java logs and skips it).

The delta branch's partitions are dropped first, then the snapshot branch's (so Java's
``ChainTableCommitPreCallback`` check holds), each branch in OVERWRITE snapshots of
``partition.expiration-batch-size`` partitions (default: all); a run killed between them is
completed by the next, which finds the same segments. The daemon runs it from each branch's
job, as Java from each branch's writer: a drop that conflicts re-reads the branch and drops
what is still there.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Sequence
from dataclasses import dataclass

from paimond.clock import Clock
from paimond.errors import CommitConflictError, NullPartitionValueError
from paimond.format.binary.binary_row import decode_manifest_row
from paimond.format.meta.schema import TableSchema
from paimond.maintenance.expire.partitions import (
    ExpiredPartition,
    ExpireRule,
    PartitionExpireResult,
    PartitionState,
    drop_partitions,
    partition_states,
)
from paimond.table.catalog import Table
from paimond.table.chain import chain_branches, chain_order, group_size
from paimond.table.commit.committer import CommitJournal
from paimond.table.options.core import TableOptions
from paimond.table.partition_time import PartitionTimeExtractor
from paimond.table.scan.snapshot_scan import SnapshotFiles, scan_snapshot

JOB = "expire-partitions"


@dataclass(frozen=True, slots=True)
class ChainExpirePlan:
    delta: tuple[PartitionState, ...]  # the delta branch's partitions to drop
    snapshot: tuple[PartitionState, ...]  # the snapshot branch's
    warnings: tuple[str, ...]


def plan_chain_expire(snapshots: Sequence[PartitionState], deltas: Sequence[PartitionState],
                      schema: TableSchema, groups: int, extractor: PartitionTimeExtractor,
                      threshold: datetime.datetime, max_segments: int) -> ChainExpirePlan:
    """Pure: the segments that expire (module docstring). ``groups``: how many leading
    partition keys form the group."""
    keys, types = schema.partition_keys, schema.partition_type.field_types

    def chain_values(state: PartitionState) -> tuple[tuple[int, object], ...]:
        return chain_order(decode_manifest_row(state.partition, types)[groups:])

    warnings: list[str] = []

    def time_of(state: PartitionState) -> datetime.datetime | None:
        try:
            return extractor.extract(keys[groups:], state.texts[groups:])
        except (ValueError, NullPartitionValueError) as error:
            warnings.append(f"{state.path}: no time in the partition value ({error}); kept")
            return None

    delta_times = [(state, time_of(state)) for state in deltas]
    by_group: dict[tuple[str | None, ...], list[PartitionState]] = {}
    for state in snapshots:
        by_group.setdefault(state.texts[:groups], []).append(state)
    dropped_snapshots: list[PartitionState] = []
    dropped_deltas: list[PartitionState] = []
    for group, members in by_group.items():
        timed = [(s, time_of(s)) for s in sorted(members, key=chain_values)]
        before = [(s, t) for s, t in timed if t is not None and threshold > t]
        segments = min(len(before) - 1, max_segments)
        if segments <= 0:
            continue
        in_group = [(d, t) for d, t in delta_times if d.texts[:groups] == group and t is not None]
        chosen: dict[bytes, PartitionState] = {}
        for index in range(segments):
            start, end = before[index][1], before[index + 1][1]
            assert start is not None and end is not None
            dropped_snapshots.append(before[index][0])
            chosen.update((d.partition, d) for d, t in in_group if start <= t < end)
        first = before[0][1]
        assert first is not None
        chosen.update((d.partition, d) for d, t in in_group if t < first)
        dropped_deltas += [d for d, _ in in_group if d.partition in chosen]
    return ChainExpirePlan(tuple(dict.fromkeys(dropped_deltas)),
                           tuple(dropped_snapshots), tuple(dict.fromkeys(warnings)))


def _latest(table: Table) -> SnapshotFiles | None:
    latest = table.snapshots.latest()
    return None if latest is None else scan_snapshot(table, latest)


def expire_chain_partitions(table: Table, schema: TableSchema, rule: ExpireRule,
                            result: PartitionExpireResult, *, clock: Clock,
                            journal: CommitJournal | None, started: float
                            ) -> PartitionExpireResult:
    """Expire ``table``'s chain table by segments with ``rule`` (``schema``: the options of
    the branch that runs it, as a Java writer's); fills and returns ``result``."""
    snapshot_table, delta_table = chain_branches(table, schema, JOB)
    now = clock.local_now()
    threshold = now - datetime.timedelta(milliseconds=rule.expiration_ms)
    result.strategy = "values-time (chain segments)"
    result.threshold = threshold
    snapshot_files, delta_files = _latest(snapshot_table), _latest(delta_table)
    if snapshot_files is None:
        result.nothing_to_do = (f"branch {snapshot_table.branch} has no snapshot: no segment "
                                "to expire")
        return result
    plan = plan_chain_expire(
        partition_states(snapshot_table, schema, snapshot_files, with_deleted_entries=False),
        [] if delta_files is None else partition_states(delta_table, schema, delta_files,
                                                        with_deleted_entries=False),
        schema, group_size(schema), rule.extractor, threshold, max(rule.max_num, 0))
    result.base_snapshot_id = snapshot_files.snapshot.id
    result.warnings = list(plan.warnings)
    for branch, states in ((delta_table, plan.delta), (snapshot_table, plan.snapshot)):
        result.expired += [ExpiredPartition(s.partition, f"{branch.branch}:{s.path}",
                                            "in an expired segment", s.file_count, s.row_count)
                           for s in states]
    if result.dry_run:
        result.duration_s = time.monotonic() - started
        return result
    for branch, states in ((delta_table, plan.delta), (snapshot_table, plan.snapshot)):
        options = TableOptions.of(branch.latest_schema())
        size = rule.batch_size if rule.batch_size > 0 else max(len(states), 1)
        for start in range(0, len(states), size):
            batch = {s.partition for s in states[start:start + size]}
            dropped = _drop(branch, batch, options, clock=clock, journal=journal)
            result.snapshots += [] if dropped is None else [dropped]
    result.duration_s = time.monotonic() - started
    return result


def _drop(branch: Table, partitions: set[bytes], options: TableOptions, *, clock: Clock,
          journal: CommitJournal | None, attempts: int = 3) -> int | None:
    """Drop those of ``partitions`` still live in ``branch``; re-read on a conflict (another
    branch's job, run by the daemon at the same time, may have dropped them); the snapshot id,
    None when none was left."""
    for attempt in range(attempts):
        files = _latest(branch)
        live = set() if files is None else {f.entry.partition for f in files.files} & partitions
        if files is None or not live:
            return None
        try:
            return drop_partitions(branch, live, files, options, clock=clock,
                                   journal=journal).id
        except CommitConflictError:
            if attempt == attempts - 1:
                raise
    return None
