"""The commit's conflict check from the job's own scan plus the snapshots committed since
(``paimond.table.commit.reads``): a concurrent delete of an input still conflicts, a concurrent
append still commits, and whenever the snapshots since cannot be trusted the latest is scanned
whole. The oracle is a full scan of the snapshot (and pypaimon reading the table back)."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.incremental_commits import append_with_pypaimon, renamed
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_pk_deduplicate, sort_rows

from paimond.clock import Clock
from paimond.errors import CommitConflictError
from paimond.format.meta.snapshot import Snapshot
from paimond.table.catalog import Table, open_table
from paimond.table.commit.committer import CommitChanges, Committer
from paimond.table.layout import LATEST_HINT
from paimond.table.scan.snapshot_scan import LiveFile, SnapshotFiles, scan_snapshot
from paimond.table.storage.interface import open_storage

CLOCK = Clock(fixed_ms=1_700_000_000_000)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    warehouse = tmp_path_factory.mktemp("commit_incremental") / "wh"
    return warehouse, build_pk_deduplicate(str(warehouse))


@pytest.fixture
def table(pristine: tuple[Path, Any], tmp_path: Path) -> tuple[Table, Any, str]:
    warehouse, spec = pristine
    copy = tmp_path / "wh"
    shutil.copytree(warehouse, copy)
    return open_table(open_storage(str(copy)), str(copy), spec.name), spec, str(copy)


def _plan(table: Table) -> SnapshotFiles:
    latest = table.snapshots.latest()
    assert latest is not None
    return scan_snapshot(table, latest)


def _level0(plan: SnapshotFiles, *, newest: bool = False) -> list[LiveFile]:
    """One level-0 file per bucket: the oldest (or the newest) by sequence number."""
    picked = []
    for bucket in plan.buckets().values():
        files = sorted(bucket.levels[0], key=lambda f: f.meta.max_sequence_number)
        picked.append(files[-1] if newest else files[0])
    return picked


def _upgrade(files: list[LiveFile], level: int, base: SnapshotFiles | None = None
             ) -> CommitChanges:
    return CommitChanges(
        deleted=[f.entry for f in files],
        added=[dataclasses.replace(f.entry, file=dataclasses.replace(f.meta, level=level))
               for f in files], base=base)


def _live(table: Table, snapshot: Snapshot) -> set[tuple[object, ...]]:
    return {f.entry.identifier for f in scan_snapshot(table, snapshot).files}


def _known(committer: Committer) -> set[tuple[object, ...]]:
    known = committer._known
    assert known is not None
    return set(known.entries)


def test_a_concurrent_delete_of_an_input_between_plan_and_commit_conflicts(
        table: tuple[Table, Any, str]) -> None:
    tbl, _, _ = table
    plan = _plan(tbl)
    files = _level0(plan)
    Committer(tbl, clock=CLOCK).commit(_upgrade(files[:1], 4))  # another job took one input
    latest = tbl.snapshots.latest_id()
    committer = Committer(tbl, clock=CLOCK)
    with pytest.raises(CommitConflictError, match="no longer live"):
        committer.commit(_upgrade(files, 5, base=plan))
    assert committer.reads_log == [f"{plan.snapshot.id} + deltas to {plan.snapshot.id + 1}"]
    assert tbl.snapshots.latest_id() == latest


def test_a_concurrent_append_between_plan_and_commit_still_commits(
        table: tuple[Table, Any, str]) -> None:
    tbl, spec, warehouse = table
    plan = _plan(tbl)
    files = _level0(plan)
    append_with_pypaimon(warehouse, spec.name)  # a writer commits new level-0 files
    appended = tbl.snapshots.latest()
    assert appended is not None and appended.id == plan.snapshot.id + 1
    rows = sort_rows(read_rows(warehouse, spec.name), spec.sort_columns)

    committer = Committer(tbl, clock=CLOCK)
    snapshot = committer.commit(_upgrade(files, 5, base=plan))
    assert committer.reads_log == [f"{plan.snapshot.id} + deltas to {appended.id}"]
    assert _known(committer) == _live(tbl, snapshot), "the set it built is the snapshot's"
    expected = (_live(tbl, appended) - {f.entry.identifier for f in files}) | {
        e.identifier for e in _upgrade(files, 5).added}
    assert _live(tbl, snapshot) == expected
    assert sort_rows(read_rows(warehouse, spec.name), spec.sort_columns).equals(rows)

    # the same committer's next commit starts from what it committed: nothing is read
    more = [f for f in _level0(scan_snapshot(tbl, snapshot)) if f.meta.level == 0][:1]
    again = committer.commit(_upgrade(more, 3))
    assert committer.reads_log[-1] == f"known at {snapshot.id}"
    assert _known(committer) == _live(tbl, again)


def test_a_lost_race_retries_from_the_attempt_it_lost(table: tuple[Table, Any, str]) -> None:
    tbl, _, _ = table
    plan = _plan(tbl)
    files = _level0(plan)

    class Racing:
        """A concurrent job commits right before our snapshot's create, once."""

        def __init__(self, inner: Any) -> None:
            self._inner, self._raced = inner, False

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        def create_exclusive(self, path: str, data: bytes) -> bool:
            if not self._raced and "/snapshot/snapshot-" in path:
                self._raced = True
                Committer(tbl, clock=CLOCK).commit(_upgrade(files[1:2], 4))
            return bool(self._inner.create_exclusive(path, data))

    racing = dataclasses.replace(tbl, storage=Racing(tbl.storage))
    committer = Committer(racing, sleep=lambda _: None, clock=CLOCK)
    snapshot = committer.commit(_upgrade(files[:1], 5))  # no base: the first attempt scans
    first = plan.snapshot.id
    assert committer.reads_log == [f"scanned {first}", f"{first} + deltas to {first + 1}"]
    assert snapshot.id == first + 2
    assert _known(committer) == _live(tbl, snapshot)
    levels = {f.meta.file_name: f.meta.level for f in scan_snapshot(tbl, snapshot).files}
    assert levels[files[0].meta.file_name] == 5
    assert levels[files[1].meta.file_name] == 4, "the concurrent commit survived"


def test_a_rolled_back_plan_snapshot_is_not_trusted(table: tuple[Table, Any, str]) -> None:
    """The plan's snapshot was rolled back and its id taken by a commit without the file the
    plan's snapshot added: the check scans and finds the input gone."""
    tbl, _, _ = table
    plan = _plan(tbl)
    newest = _level0(plan, newest=True)[:1]
    n = plan.snapshot.id
    tbl.storage.delete(tbl.snapshots.path(n))  # rollback to n - 1
    tbl.storage.write_bytes(tbl.snapshots.hint_path(LATEST_HINT), str(n - 1).encode())
    other = _level0(scan_snapshot(tbl, tbl.snapshots.load(n - 1)))[0]
    replaced = Committer(tbl, clock=CLOCK, commit_kind="APPEND").commit(
        CommitChanges(added=[renamed(other.entry, "data-other-writer-0.parquet")]))
    assert replaced.id == n and newest[0].entry.identifier not in _live(tbl, replaced)

    committer = Committer(tbl, clock=CLOCK)
    with pytest.raises(CommitConflictError, match="no longer live"):
        committer.commit(_upgrade(newest, 5, base=plan))
    assert committer.reads_log == [f"scanned {n}"]


@pytest.mark.parametrize("case", ["plan snapshot expired", "overwrite since"])
def test_snapshots_since_that_cannot_be_trusted_are_scanned_whole(
        table: tuple[Table, Any, str], case: str) -> None:
    tbl, _, _ = table
    plan = _plan(tbl)
    files = _level0(plan)
    kind = "OVERWRITE" if case == "overwrite since" else "COMPACT"
    Committer(tbl, clock=CLOCK, commit_kind=kind).commit(_upgrade(files[1:2], 4))
    if case == "plan snapshot expired":
        tbl.storage.delete(tbl.snapshots.path(plan.snapshot.id))
    committer = Committer(tbl, clock=CLOCK)
    snapshot = committer.commit(_upgrade(files[:1], 5, base=plan))
    assert committer.reads_log == [f"scanned {plan.snapshot.id + 1}"]
    assert _known(committer) == _live(tbl, snapshot)
    # and a delete of an input is still caught on that path
    with pytest.raises(CommitConflictError, match="no longer live"):
        Committer(tbl, clock=CLOCK).commit(_upgrade(files[1:2], 5, base=plan))


def test_the_check_from_a_plan_agrees_with_a_full_scan_under_random_commits(
        table: tuple[Table, Any, str]) -> None:
    """Differential: writers append, other jobs move files up, manifests get merged; at every
    step the check of a change planned from an earlier snapshot (incremental) and the check
    scanning the latest whole reach the same verdict and the same live files."""
    import random

    from paimond.table.commit.reads import AttemptReads

    tbl, _, _ = table
    rng = random.Random(22)
    plans = [_plan(tbl)]
    paths = set()
    for step in range(12):
        action = rng.choice(["append", "upgrade", "merge", "plan"])
        live = [f for f in _plan(tbl).files if f.meta.level == 0]
        if action == "append":
            Committer(tbl, clock=CLOCK, commit_kind="APPEND").commit(CommitChanges(
                added=[renamed(rng.choice(live).entry, f"data-writer-{step}.parquet")]))
        elif action == "upgrade" and live:
            try:
                Committer(tbl, clock=CLOCK).commit(_upgrade([rng.choice(live)], rng.randint(1, 5)))
            except CommitConflictError:
                pass  # an overlap in that level: nothing committed
        elif action == "merge":
            Committer(tbl, clock=CLOCK).compact_manifests(forced=True)
        else:
            plans.append(_plan(tbl))
        latest = tbl.snapshots.latest()
        assert latest is not None
        schema = tbl.latest_schema()
        for plan in plans[-2:]:
            inputs = [f for f in plan.files if f.meta.level == 0]
            changes = _upgrade([rng.choice(inputs)], rng.randint(1, 5), base=plan)
            verdicts = []
            for base in (plan, None):
                committer = Committer(tbl, clock=CLOCK)
                try:
                    result: object = set(committer._check_conflicts(
                        latest, schema, dataclasses.replace(changes, base=base),
                        AttemptReads(tbl)))
                except CommitConflictError as conflict:
                    result = str(conflict)
                verdicts.append(result)
                paths.update(committer.reads_log)
            assert verdicts[0] == verdicts[1], (step, action, plan.snapshot.id, latest.id)
    assert any("deltas" in p for p in paths) and any("scanned" in p for p in paths)
