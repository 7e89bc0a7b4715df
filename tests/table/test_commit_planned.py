"""The compaction job hands its plan's buckets to the commit (``paimond.table.commit.base``):
the conflict check starts from the touched buckets' files at the planned snapshot and reads
only the snapshots committed since. A concurrent delete of an input still conflicts, a
concurrent append still commits, and under random concurrent commits the check from the
planned buckets reaches the verdict of a full scan of the latest snapshot, with the same live
files in those buckets. Oracles: a full scan of the snapshot, pypaimon reading the table."""

from __future__ import annotations

import dataclasses
import random
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
from support.incremental_commits import append_with_pypaimon, renamed
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_pk_deduplicate, sort_rows

from paimond.clock import Clock
from paimond.errors import CommitConflictError
from paimond.format.meta.manifest import ManifestEntry
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.compact.plan import plan_compaction
from paimond.table.catalog import Table, open_table
from paimond.table.commit.base import PlannedBuckets, PlannedBucketsBuilder
from paimond.table.commit.committer import CommitChanges, Committer
from paimond.table.commit.reads import AttemptReads
from paimond.table.scan.snapshot_scan import SnapshotFiles, scan_snapshot
from paimond.table.storage.interface import open_storage

CLOCK = Clock(fixed_ms=1_700_000_000_000)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    warehouse = tmp_path_factory.mktemp("commit_planned") / "wh"
    return warehouse, build_pk_deduplicate(str(warehouse))


@pytest.fixture
def table(pristine: tuple[Path, Any], tmp_path: Path) -> tuple[Table, Any, str]:
    warehouse, spec = pristine
    copy = tmp_path / "wh"
    shutil.copytree(warehouse, copy)
    return open_table(open_storage(str(copy)), str(copy), spec.name), spec, str(copy)


def _scan(table: Table) -> SnapshotFiles:
    latest = table.snapshots.latest()
    assert latest is not None
    return scan_snapshot(table, latest)


def _planned(scan: SnapshotFiles, buckets: Iterable[tuple[bytes, int]]) -> PlannedBuckets:
    builder = PlannedBucketsBuilder()
    builder.add_scan(scan, buckets)
    return builder.build(scan.snapshot)


def _upgrade(entries: Sequence[ManifestEntry], level: int,
             planned: PlannedBuckets | None = None) -> CommitChanges:
    return CommitChanges(
        deleted=list(entries),
        added=[dataclasses.replace(e, file=dataclasses.replace(e.file, level=level))
               for e in entries], base=planned)


def _bucket_keys(entries: Iterable[ManifestEntry]) -> set[tuple[bytes, int]]:
    return {(e.partition, e.bucket) for e in entries}


def test_the_plan_holds_the_files_of_its_tasks_buckets_with_their_key_ranges(
        table: tuple[Table, Any, str]) -> None:
    """The windowed planner's base (slim records, deeper files read back whole) names the
    same files as a whole scan of those buckets, with the same levels and key ranges; a
    plan of one-entry windows gives the same."""
    tbl, _, _ = table
    scan = _scan(tbl)
    for window_entries in (200_000, 1):
        plan = plan_compaction(tbl, full=True, moment=CLOCK.local_now(),
                               window_entries=window_entries, commit_base=True)
        base = plan.commit_base
        assert base is not None and plan.tasks
        touched = {(t.partition, t.bucket) for t in plan.tasks}
        assert base.buckets == touched and base.snapshot == scan.snapshot
        expected = {f.entry.identifier: f.entry for f in scan.files
                    if (f.entry.partition, f.entry.bucket) in touched}
        assert base.entries.keys() == expected.keys()
        for identifier, entry in base.entries.items():
            if entry.file.level > 0:
                assert (entry.file.min_key, entry.file.max_key) == (
                    expected[identifier].file.min_key, expected[identifier].file.max_key)
        assert base.manifest_count == len(scan.manifests)


def test_a_concurrent_delete_of_an_input_conflicts_from_the_planned_buckets(
        table: tuple[Table, Any, str]) -> None:
    tbl, _, _ = table
    assert plan_compaction(tbl, full=True, moment=CLOCK.local_now()).commit_base is None
    plan = plan_compaction(tbl, full=True, moment=CLOCK.local_now(), commit_base=True)
    assert plan.commit_base is not None
    task = plan.tasks[0]
    Committer(tbl, clock=CLOCK).commit(_upgrade(task.inputs[:1], 4))  # another job took one
    latest = tbl.snapshots.latest_id()
    committer = Committer(tbl, clock=CLOCK)
    with pytest.raises(CommitConflictError, match="no longer live"):
        committer.commit(_upgrade(task.inputs, 5, plan.commit_base))
    n = plan.base_snapshot_id
    assert committer.reads_log == [f"{n} + deltas to {n + 1} ({len(plan.tasks)} buckets)"]
    assert tbl.snapshots.latest_id() == latest


def test_a_change_outside_the_planned_buckets_is_checked_from_a_whole_scan(
        table: tuple[Table, Any, str]) -> None:
    tbl, _, _ = table
    scan = _scan(tbl)
    keys = sorted(_bucket_keys(f.entry for f in scan.files))
    inside = [f.entry for f in scan.files if (f.entry.partition, f.entry.bucket) == keys[0]
              and f.entry.file.level == 0][:1]
    outside = [f.entry for f in scan.files if (f.entry.partition, f.entry.bucket) == keys[1]
               and f.entry.file.level == 0][:1]
    committer = Committer(tbl, clock=CLOCK)
    committer.commit(_upgrade([*inside, *outside], 5, _planned(scan, keys[:1])))
    assert committer.reads_log == [f"scanned {scan.snapshot.id}"]


def test_the_job_commits_after_a_concurrent_append_reading_only_the_snapshots_since(
        table: tuple[Table, Any, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer appends while the job's tasks run: the job's commit starts from its plan's
    buckets plus the append's delta, commits, and pypaimon reads the rows it read before."""
    tbl, spec, warehouse = table
    logs: list[list[str]] = []
    commit = Committer.commit

    def logged(self: Committer, changes: CommitChanges) -> Any:
        try:
            return commit(self, changes)
        finally:
            logs.append(list(self.reads_log))

    monkeypatch.setattr(Committer, "commit", logged)

    class AppendingExecutor:
        """Runs the tasks in this process; a writer commits meanwhile."""

        def execute(self, tasks: Any, runner: Any, progress: Any) -> Any:
            results = [runner(task) for task in tasks]
            append_with_pypaimon(warehouse, spec.name)
            return results, []

    before = tbl.snapshots.latest_id()
    assert before is not None
    summary = CompactJob(tbl, full=True, clock=CLOCK, executor=AppendingExecutor()).run()
    assert summary.snapshot is not None and summary.snapshot.id == before + 2
    assert summary.plan is not None
    assert logs == [[f"{before} + deltas to {before + 1} ({len(summary.plan.tasks)} buckets)"]]
    rows = sort_rows(read_rows(warehouse, spec.name), spec.sort_columns)
    appended = tbl.snapshots.load(before + 1)
    live = {f.entry.identifier for f in scan_snapshot(tbl, summary.snapshot).files}
    assert {f.entry.identifier for f in scan_snapshot(tbl, appended).files
            if f.entry.file.level == 0 and f.entry.file.file_name not in
            {e.file.file_name for r in summary.results for e in r.deleted}} <= live
    assert rows.equals(sort_rows(read_rows(warehouse, spec.name), spec.sort_columns))


def _verdict(table: Table, changes: CommitChanges) -> tuple[object, list[str]]:
    latest = table.snapshots.latest()
    assert latest is not None
    committer = Committer(table, clock=CLOCK)
    try:
        live = committer._check_conflicts(latest, table.latest_schema(), changes,
                                          AttemptReads(table))
    except CommitConflictError as conflict:
        return str(conflict), committer.reads_log
    return live, committer.reads_log


def test_the_check_from_planned_buckets_agrees_with_a_full_scan_under_random_commits(
        table: tuple[Table, Any, str]) -> None:
    """Differential: writers append (into the planned buckets too), other jobs move files up
    (taking inputs away), manifests get merged; at every step a change planned from an
    earlier snapshot is checked from its planned buckets and from a scan of the latest
    snapshot whole: same verdict, and the same live files in the planned buckets."""
    tbl, _, _ = table
    rng = random.Random(22)
    scans = [_scan(tbl)]
    paths: set[str] = set()
    kinds: set[str] = set()
    for step in range(16):
        action = rng.choice(["append", "upgrade", "merge", "plan"])
        live = [f for f in _scan(tbl).files if f.meta.level == 0]
        if action == "append":
            Committer(tbl, clock=CLOCK, commit_kind="APPEND").commit(CommitChanges(
                added=[renamed(rng.choice(live).entry, f"data-writer-{step}.parquet")]))
        elif action == "upgrade" and live:
            try:
                Committer(tbl, clock=CLOCK).commit(
                    _upgrade([rng.choice(live).entry], rng.randint(1, 5)))
            except CommitConflictError:
                pass  # an overlap in that level: nothing committed
        elif action == "merge":
            Committer(tbl, clock=CLOCK).compact_manifests(forced=True)
        else:
            scans.append(_scan(tbl))
        for scan in scans[-2:]:
            inputs = [f.entry for f in scan.files if f.meta.level == 0]
            picked = rng.sample(inputs, min(len(inputs), rng.randint(1, 2)))
            current = {f.entry.identifier for f in _scan(tbl).files}
            gone = [e for e in inputs if e.identifier not in current]
            if gone and rng.random() < 0.5:  # an input another job took meanwhile
                picked = [rng.choice(gone), *picked[1:]]
            keys = _bucket_keys(picked)
            extra = rng.sample(sorted(_bucket_keys(inputs)), 1)  # a bucket not touched
            planned = _planned(scan, keys | set(extra))
            changes = _upgrade(picked, rng.randint(1, 5))
            full, _ = _verdict(tbl, changes)
            scoped, log = _verdict(tbl, dataclasses.replace(changes, base=planned))
            paths.update(log)
            kinds.add(full.split(":")[1].split()[0] if isinstance(full, str) else "committed")
            if isinstance(full, str):
                assert scoped == full, (step, action)
            else:
                assert isinstance(scoped, dict) and isinstance(full, dict)
                whole = any(p.startswith("scanned") for p in log)  # the fallback
                assert scoped.keys() == {i for i in full if whole or (i[0], i[1])
                                         in planned.buckets}, (step, action, log)
    assert kinds >= {"committed", "RequireFilesLive", "RequireLevelsDisjoint"}, kinds
    assert any("deltas" in p and "buckets" in p for p in paths)
    assert any("known at" in p and "buckets" in p for p in paths)
