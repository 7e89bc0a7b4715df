"""Merging a branch into another: Paimon 2.x's ``merge_branch`` procedure (Java
``FileSystemBranchManager.mergeBranch`` and ``BranchMergeHandler``, release-2.0.0).

A file-level merge of append tables, as Java's: every data file live in the source branch's
latest snapshot that the target's latest does not hold is added to the target in one APPEND
snapshot (the files are shared, nothing is copied or rewritten). Refused as Java refuses: a
branch merged into itself; a branch that does not exist or has no snapshot; a branch whose
history does not run complete from snapshot 1 in APPEND (or ANALYZE) snapshots only (without
fork metadata, that is what makes the set difference safe); primary keys; data evolution;
row tracking enabled on one side only; latest schemas with different fields; a file written
in a schema the target lacks or has otherwise. Refused by paimond: row-tracking tables (Java
gives the merged files fresh row ids, paimond's commit does not assign row ids). The commit
fails if a merged file became live in the target meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass

from paimond.clock import Clock
from paimond.errors import ConfigError, RefusedError
from paimond.format.meta.manifest import ManifestEntry
from paimond.format.meta.schema import TableSchema
from paimond.maintenance.job_cleanup import committed_names, recorded_job
from paimond.table.catalog import Table
from paimond.table.commit.committer import CommitChanges, Committer
from paimond.table.layout import BRANCH_DIR, BRANCH_PREFIX, MAIN_BRANCH
from paimond.table.options.core import TableOptions
from paimond.table.scan.snapshot_scan import scan_snapshot

JOB = "merge_branch"
_MERGEABLE_KINDS = ("APPEND", "ANALYZE")


@dataclass(frozen=True, slots=True)
class BranchMerge:
    table: str
    source: str
    target: str
    files: int  # data files added to the target
    rows: int
    snapshot_id: int | None  # the target's new snapshot
    dry_run: bool

    def describe(self) -> str:
        if not self.files:
            return f"{self.table}: branch {self.target} holds every file of {self.source}: " \
                   "nothing to merge"
        head = f"{self.table}: merge {self.files} files ({self.rows} rows) of branch " \
               f"{self.source} into {self.target}"
        if self.dry_run:
            return f"{head} (dry run: nothing written)"
        return f"{head}: snapshot {self.snapshot_id} (APPEND)"


def _branch(main: Table, name: str, role: str) -> Table:
    if not name.strip():
        raise ConfigError("branch", f"{role} branch name {name!r} is blank")
    if name != MAIN_BRANCH and not main.storage.exists(
            main.file_path(BRANCH_DIR, BRANCH_PREFIX + name)):
        known = ", ".join(main.branches()) or "none"
        raise ConfigError("branch", f"{main.name} has no branch {name!r} (its branches: {known})")
    return main.on_branch(name)


def _check_history(table: Table) -> None:
    """Complete from snapshot 1, APPEND or ANALYZE only (Java ``validateCompleteAppendOnly``)."""
    ids = table.snapshots.list_ids()
    if not ids:
        raise RefusedError(JOB, f"branch {table.branch} has no snapshot", table.path)
    if ids[0] != 1 or ids != list(range(1, ids[-1] + 1)):
        first_gap = next((i for i in range(1, ids[-1] + 1) if i not in set(ids)), ids[0])
        raise RefusedError(JOB, f"branch {table.branch} does not hold every snapshot from 1 "
                                f"(snapshot {first_gap} is missing): a merge needs its complete "
                                "append-only history", table.path)
    for snapshot_id in ids:
        kind = table.snapshots.load(snapshot_id).commit_kind
        if kind not in _MERGEABLE_KINDS:
            raise RefusedError(JOB, f"snapshot {snapshot_id} of branch {table.branch} is a "
                                    f"{kind} commit: a merge needs an append-only history",
                               table.path)


def _check_schemas(source: Table, target: Table, latest: tuple[TableSchema, TableSchema]) -> None:
    for table, schema in zip((source, target), latest, strict=True):
        options = TableOptions.of(schema)
        if schema.primary_keys:
            raise RefusedError(JOB, f"branch {table.branch} has primary keys: branches of "
                                    "append tables only are merged", table.path)
        if options.flag("data-evolution.enabled"):
            raise RefusedError(JOB, f"branch {table.branch} is a data-evolution table",
                               table.path)
        if options.flag("row-tracking.enabled"):
            raise RefusedError(JOB, f"branch {table.branch} tracks row ids: Java gives merged "
                                    "files fresh row ids, which paimond's commit does not",
                               table.path)
    if latest[0].fields != latest[1].fields:
        raise RefusedError(JOB, f"the latest schemas of branches {source.branch} and "
                                f"{target.branch} have different fields", target.path)


def _same_schema(left: TableSchema, right: TableSchema) -> bool:
    """Java ``TableSchema.equals``: everything but the creation time."""
    return (left.id, left.fields, left.highest_field_id, left.partition_keys, left.primary_keys,
            left.options, left.comment, left.version) == (
        right.id, right.fields, right.highest_field_id, right.partition_keys,
        right.primary_keys, right.options, right.comment, right.version)


def merge_branch(table: Table, source_branch: str, target_branch: str = MAIN_BRANCH, *,
                 clock: Clock, dry_run: bool = False) -> BranchMerge:
    """Merge ``source_branch`` into ``target_branch`` of ``table`` (module docstring)."""
    main = table.on_branch(MAIN_BRANCH)
    if source_branch == target_branch:
        raise ConfigError("branch", f"cannot merge branch {source_branch!r} into itself")
    source = _branch(main, source_branch, "source")
    target = _branch(main, target_branch, "target")
    _check_history(source)
    _check_history(target)
    _check_schemas(source, target, (source.latest_schema(), target.latest_schema()))
    source_latest, target_latest = source.snapshots.latest(), target.snapshots.latest()
    assert source_latest is not None and target_latest is not None  # checked above
    held = {live.entry.identifier for live in scan_snapshot(target, target_latest).files}
    missing: list[ManifestEntry] = [live.entry for live in
                                    scan_snapshot(source, source_latest).files
                                    if live.entry.identifier not in held]
    for schema_id in sorted({e.file.schema_id for e in missing}):
        if schema_id not in target.schema_ids():
            raise RefusedError(JOB, f"branch {target.branch} lacks schema {schema_id}, which "
                                    f"files of {source.branch} were written in", target.path)
        if not _same_schema(source.schema(schema_id), target.schema(schema_id)):
            raise RefusedError(JOB, f"schema {schema_id} differs between branches "
                                    f"{source.branch} and {target.branch}", target.path)
    result = BranchMerge(main.name, source.branch, target.branch, len(missing),
                         sum(e.file.row_count for e in missing), None, dry_run)
    if dry_run or not missing:
        return result
    with recorded_job(target, JOB, clock) as recorded:  # a killed run's manifests go
        changes = CommitChanges(added=missing)
        recorded.keep(committed_names(changes))
        snapshot = Committer(recorded.table, commit_kind="APPEND", clock=clock,
                             journal=recorded).commit(changes)
    return BranchMerge(main.name, source.branch, target.branch, len(missing), result.rows,
                       snapshot.id, dry_run)
