"""paimond rollback against a model: pypaimon reads the target's rows at the new latest
snapshot, and the snapshots, tags and files left are exactly those the target and what
remains name; refusals change nothing; a rollback killed while writing an expired tag's
snapshot back leaves a readable table that the rerun finishes."""

from __future__ import annotations

import datetime
import io
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pypaimon.schema.schema_change import SchemaChange
from support import warm_python
from support.consumer_tables import make_table, write_consumers
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_pk_deduplicate, catalog_for
from support.table_garbage import STATE_DIRS, unreferenced_files

from paimond.cli.main import main
from paimond.cli.rollback import parse_timestamp_ms
from paimond.faults import EXIT_CODE
from paimond.maintenance.expire.record import long_lived_changelogs
from paimond.maintenance.expire.references import referencing_snapshots, used_files
from paimond.maintenance.rollback import RollbackTarget, plan_rollback, records_dir
from paimond.table.catalog import Table, open_table
from paimond.table.storage.interface import open_storage

NAME = "db.pk_deduplicate"


@pytest.fixture(name="warehouse")
def _warehouse(tmp_path: Path) -> Iterator[str]:
    """Six snapshots, tags t2 and t5."""
    warehouse = str(tmp_path / "wh")
    build_pk_deduplicate(warehouse)
    for tag, snapshot in (("t2", "2"), ("t5", "5")):
        assert main(["create-tag", warehouse, "--table", NAME, "--tag", tag,
                     "--snapshot", snapshot]) == 0
    yield warehouse


def _open(warehouse: str, name: str = NAME) -> Table:
    return open_table(open_storage(warehouse), warehouse, name)


def _files(table: Table) -> set[str]:
    root = Path(table.path)
    return {p.name for p in root.rglob("*") if p.is_file()
            and p.relative_to(root).parts[0] not in STATE_DIRS | {".paimond"}}


def _kept_by(table: Table, target: int, tags: set[str]) -> set[str]:
    """Every file the snapshots up to ``target`` and the tags ``tags`` name."""
    sources = [s for s in referencing_snapshots(table)
               if (s.kind == "snapshot" and s.snapshot.id <= target)
               or (s.kind == "tag" and s.path.endswith(tuple(f"tag-{t}" for t in tags)))]
    return used_files(table, sources).all


def _rollback(warehouse: str, *target: str, name: str = NAME) -> int:
    return main(["rollback", warehouse, "--table", name, *target, "--yes"])


@pytest.mark.parametrize("target", [["--to-snapshot", "3"], ["--to-tag", "t2"],
                                    ["--to-timestamp", "{time3}"]])
def test_everything_newer_than_the_target_goes(warehouse: str, target: list[str]) -> None:
    table = _open(warehouse)
    time3 = table.snapshots.load(3).time_millis
    target = [a.replace("{time3}", str(time3)) for a in target]
    target_id = 2 if target[0] == "--to-tag" else 3
    if target[0] == "--to-timestamp" and table.snapshots.load(4).time_millis == time3:
        target_id = 4  # committed in the same millisecond: the latest at or before it
    expected_rows = read_rows(warehouse, NAME, snapshot_id=target_id)
    expected_files = _kept_by(table, target_id, {"t2"})

    assert _rollback(warehouse, *target) == 0

    assert table.snapshots.list_ids() == list(range(1, target_id + 1))
    assert table.snapshots.read_hint("LATEST") == target_id
    assert list(table.tags()) == ["t2"]
    assert read_rows(warehouse, NAME).equals(expected_rows)
    assert _files(table) == expected_files
    assert not Path(records_dir(table)).exists() or not list(Path(records_dir(table)).iterdir())


def test_an_expired_tag_is_written_back_as_the_only_snapshot(warehouse: str) -> None:
    expected_rows = read_rows(warehouse, NAME, snapshot_id=2)
    table = _open(warehouse)
    assert main(["expire-snapshots", warehouse, "--table", NAME, "--retain-max", "2",
                 "--retain-min", "1"]) == 0
    assert table.snapshots.list_ids() == [5, 6]
    expected_files = _kept_by(table, 0, {"t2"})

    assert _rollback(warehouse, "--to-snapshot", "2") == 0  # expired: tag t2 pins it

    assert table.snapshots.list_ids() == [2]
    assert (table.snapshots.read_hint("EARLIEST"), table.snapshots.read_hint("LATEST")) == (2, 2)
    assert list(table.tags()) == ["t2"]
    assert table.snapshots.load(2) == table.tags()["t2"]  # no retention: the same JSON
    assert read_rows(warehouse, NAME).equals(expected_rows)
    assert _files(table) == expected_files
    assert unreferenced_files(warehouse, NAME) == []


def test_a_branch_rolls_back_and_the_main_branch_keeps_its_files(warehouse: str) -> None:
    main_rows, main_files = read_rows(warehouse, NAME), _files(_open(warehouse))
    assert main(["create-branch", warehouse, "--table", NAME, "--branch", "b",
                 "--tag", "t5"]) == 0
    branch_name = f"{NAME}$branch_b"
    assert main(["compact", warehouse, "--table", branch_name, "--full",
                 "--parallelism", "1"]) == 0
    branch = _open(warehouse, branch_name)
    assert branch.snapshots.list_ids() == [5, 6]
    assert _files(_open(warehouse)) > main_files  # the branch's compaction wrote files

    assert _rollback(warehouse, "--to-snapshot", "5", name=branch_name) == 0

    assert branch.snapshots.list_ids() == [5]
    assert list(branch.tags()) == ["t5"]
    assert _open(warehouse).snapshots.list_ids() == [1, 2, 3, 4, 5, 6]
    assert read_rows(warehouse, NAME).equals(main_rows)
    assert _files(_open(warehouse)) == main_files  # only the compaction's files went
    assert unreferenced_files(warehouse, NAME) == []


def test_a_dry_run_and_refusals_change_nothing(warehouse: str, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    table = _open(warehouse)
    before = sorted(str(p) for p in Path(table.path).rglob("*"))
    assert main(["rollback", warehouse, "--table", NAME, "--to-snapshot", "3",
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "snapshots to delete: 6, 5, 4" in out and "tags after the target to delete" in out
    assert main(["rollback", warehouse, "--table", NAME, "--to-snapshot", "9", "--yes"]) == 2
    assert main(["rollback", warehouse, "--table", NAME, "--yes"]) == 2  # no target
    assert main(["rollback", warehouse, "--table", NAME, "--to-tag", "nope", "--yes"]) == 2
    assert main(["rollback", warehouse, "--table", NAME, "--to-timestamp", "1000",
                 "--yes"]) == 2
    assert main(["rollback", warehouse, "--table", NAME, "--to-timestamp", "soon",
                 "--yes"]) == 2
    assert main(["rollback", warehouse, "--table", NAME, "--to-snapshot", "3"]) == 2
    assert "pass --yes" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", _Terminal("n\n"))
    assert main(["rollback", warehouse, "--table", NAME, "--to-snapshot", "3"]) == 1
    assert sorted(str(p) for p in Path(table.path).rglob("*")) == before
    monkeypatch.setattr("sys.stdin", _Terminal("y\n"))
    assert main(["rollback", warehouse, "--table", NAME, "--to-snapshot", "3", "--json"]) == 0
    assert table.snapshots.list_ids() == [1, 2, 3]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_consumers_are_kept_and_named_in_the_plan(tmp_path: Path) -> None:
    table = make_table(tmp_path / "wh", {})
    write_consumers(table, {"early": (2, 0), "late": (5, 0)})
    plan = plan_rollback(table, RollbackTarget("snapshot", snapshot_id=3))
    assert plan.consumers_past == (("late", 5),)
    assert _rollback(str(tmp_path / "wh"), "--to-snapshot", "3", name=table.name) == 0
    assert table.consumers() == {"early": 2, "late": 5}


def test_timestamps_are_epoch_millis_or_local_date_times() -> None:
    assert parse_timestamp_ms("1714564800000") == 1714564800000
    local = parse_timestamp_ms("2024-05-01 12:00:00")
    assert local == int(datetime.datetime(2024, 5, 1, 12).timestamp() * 1000)
    assert parse_timestamp_ms("2024-05-01T12:00:00+00:00") == 1714564800000


@pytest.mark.parametrize("point", ["rollback.snapshot_deleted:1", "rollback.snapshot_restored",
                                   "rollback.latest_hint_written", "rollback.snapshot_deleted:2",
                                   "rollback.earliest_hint_written", "rollback.tag_deleted",
                                   "rollback.file_deleted"])
def test_a_killed_expired_tag_rollback_reads_and_the_rerun_finishes(
        warehouse: str, point: str) -> None:
    """The expired tag's path: snapshots 6, then 5 after snapshot 2 is written back."""
    tag_rows = read_rows(warehouse, NAME, snapshot_id=2)
    assert main(["expire-snapshots", warehouse, "--table", NAME, "--retain-max", "2",
                 "--retain-min", "1"]) == 0
    contents = [read_rows(warehouse, NAME, snapshot_id=i) for i in (6, 5)]
    argv = ["-m", "paimond.cli", "rollback", warehouse, "--table", NAME, "--to-tag", "t2",
            "--yes"]
    table = _open(warehouse)
    died = warm_python.run(argv, {**os.environ, "PAIMOND_CRASH_AT": point})
    assert died.returncode == EXIT_CODE, died.stdout + died.stderr
    assert any(read_rows(warehouse, NAME).equals(c) for c in [*contents, tag_rows])
    for snapshot_id in table.snapshots.list_ids():
        read_rows(warehouse, NAME, snapshot_id=snapshot_id)
    assert _rollback(warehouse, "--to-tag", "t2") == 0
    assert table.snapshots.list_ids() == [2]
    assert read_rows(warehouse, NAME).equals(tag_rows)
    assert unreferenced_files(warehouse, NAME) == []


@pytest.mark.parametrize("point", [None, "rollback.changelog_hint_written",
                                   "rollback.changelog_deleted:1", "rollback.changelog_deleted:2"])
def test_long_lived_changelogs_after_the_target_go(warehouse: str, point: str | None) -> None:
    """Decoupled: expiry keeps snapshots 1-4 as long-lived changelogs; rolling back to the
    expired tag t2 deletes changelogs 3 and 4 (killed on the way: the rerun finishes)."""
    tag_rows = read_rows(warehouse, NAME, snapshot_id=2)
    catalog_for(warehouse).alter_table(
        NAME, [SchemaChange.set_option("changelog.num-retained.min", "10"),
               SchemaChange.set_option("changelog.num-retained.max", "10")], False)
    assert main(["expire-snapshots", warehouse, "--table", NAME, "--retain-max", "2",
                 "--retain-min", "1"]) == 0
    table = _open(warehouse)
    changelogs = long_lived_changelogs(table)
    assert changelogs.list_ids() == [1, 2, 3, 4]
    if point is not None:
        died = warm_python.run(["-m", "paimond.cli", "rollback", warehouse, "--table", NAME,
                                "--to-tag", "t2", "--yes"],
                               {**os.environ, "PAIMOND_CRASH_AT": point})
        assert died.returncode == EXIT_CODE, died.stdout + died.stderr
        assert read_rows(warehouse, NAME).equals(tag_rows)
    assert _rollback(warehouse, "--to-tag", "t2") == 0
    assert table.snapshots.list_ids() == [2]
    assert changelogs.list_ids() == [1, 2]
    assert changelogs.read_hint("LATEST") == 2
    assert read_rows(warehouse, NAME).equals(tag_rows)
    assert unreferenced_files(warehouse, NAME) == []
