"""`paimond compact` over a scope: --where over partition columns (only the partitions it
selects are compacted) and --database / --tables over many tables (one failing does not stop
the others)."""

from __future__ import annotations

import shutil
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import TableWriter, catalog_for, sort_rows

from paimond.cli.main import main
from paimond.table.catalog import open_table
from paimond.table.layout import partition_text
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
HOURS = (9, 10)
SCHEMA = pa.schema([pa.field("dt", pa.string(), nullable=False),
                    pa.field("hh", pa.int32(), nullable=False),
                    pa.field("id", pa.int32(), nullable=False), ("v", pa.string())])
NAMES = ("db.events", "db.orders", "db.clicks", "other.events")


def _write(warehouse: str, name: str) -> None:
    """Three commits into every (dt, hh) partition: three level-0 files in each."""
    writer = TableWriter(catalog_for(warehouse), name, SCHEMA, primary_keys=("dt", "hh", "id"),
                         partition_keys=("dt", "hh"), options={"bucket": "1"})
    for commit in range(3):
        writer.commit([{"dt": dt, "hh": hh, "id": i, "v": f"{name}-{commit}-{i}"}
                       for dt in DAYS for hh in HOURS for i in range(commit, commit + 4)])


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    warehouse = tmp_path_factory.mktemp("scope") / "wh"
    for name in NAMES:
        _write(str(warehouse), name)
    return warehouse


@pytest.fixture
def warehouse(pristine: Path, tmp_path: Path) -> str:
    shutil.copytree(pristine, tmp_path / "wh")
    return str(tmp_path / "wh")


def _levels(warehouse: str, name: str) -> dict[str, list[int]]:
    """The levels of the live files of each partition, at the latest snapshot."""
    storage = open_storage(warehouse)
    table = open_table(storage, storage.root, name)
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    schema = table.latest_schema()
    levels: dict[str, list[int]] = defaultdict(list)
    for entry in scan_snapshot(table, snapshot).files:
        levels[partition_text(schema, entry.entry.partition)].append(entry.meta.level)
    return {k: sorted(v) for k, v in levels.items()}


def _compacted(levels: dict[str, list[int]]) -> set[str]:
    return {partition for partition, found in levels.items() if 0 not in found}


@pytest.mark.parametrize(("where", "expected"), [
    ("dt < '2024-01-02' and hh = '10'", {("2024-01-01", 10)}),
    ("dt >= '2024-01-02' or hh <> 9", {("2024-01-01", 10), ("2024-01-02", 9),
                                       ("2024-01-02", 10), ("2024-01-03", 9),
                                       ("2024-01-03", 10)}),
    ("hh IN (9) AND NOT dt BETWEEN '2024-01-02' AND '2024-01-03'", {("2024-01-01", 9)}),
    ("(DT = '2024-01-03') and hh is not null", {("2024-01-03", 9), ("2024-01-03", 10)}),
    ("dt is null", set()),
])
def test_where_compacts_exactly_the_partitions_it_selects(
        warehouse: str, where: str, expected: set[tuple[str, int]]) -> None:
    rows = read_rows(warehouse, "db.events")
    before = _levels(warehouse, "db.events")
    assert _compacted(before) == set()
    assert main(["compact", warehouse, "--table", "db.events", "--full", "--where", where]) == 0
    after = _levels(warehouse, "db.events")
    assert _compacted(after) == {f"dt={dt}/hh={hh}" for dt, hh in expected}
    for partition in set(before) - _compacted(after):
        assert after[partition] == before[partition]  # untouched
    for partition in _compacted(after):
        assert after[partition] == [5]
    assert read_rows(warehouse, "db.events").equals(rows)


@pytest.mark.parametrize(("argv", "message"), [
    (["--where", "id = 1"], "only partition columns may be filtered: id"),
    (["--where", "nope = 1"], "nope is not a column of db.events"),
    (["--where", "dt = "], "expected a literal"),
    (["--where", "hh = 'ten'"], "'ten' is not a number value"),
    (["--where", "hh = 9", "--partition", "hh=9"], "cannot be used with --partition"),
])
def test_a_bad_where_is_a_usage_error(warehouse: str, capsys: pytest.CaptureFixture[str],
                                      argv: list[str], message: str) -> None:
    before = _levels(warehouse, "db.events")
    assert main(["compact", warehouse, "--table", "db.events", *argv]) == 2
    assert message in capsys.readouterr().err
    assert _levels(warehouse, "db.events") == before


def test_database_compacts_its_tables_and_a_failing_one_does_not_stop_the_others(
        warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    rows = {name: read_rows(warehouse, name) for name in ("db.events", "db.clicks")}
    # db.orders' latest snapshot is not JSON: its compaction fails
    snapshots = Path(warehouse, "db.db", "orders", "snapshot")
    (snapshots / "snapshot-3").write_text("{not json")
    assert main(["compact", warehouse, "--database", "db", "--full"]) == 1
    captured = capsys.readouterr()
    assert "db.orders" in captured.err
    assert "compacted 2 of 3 table(s); failed: db.orders" in captured.out
    for name in ("db.events", "db.clicks"):  # clicks, events, orders: orders ran last
        assert all(levels == [5] for levels in _levels(warehouse, name).values())
        assert read_rows(warehouse, name).equals(rows[name])
    assert _compacted(_levels(warehouse, "other.events")) == set()


def test_tables_patterns_and_excluding_choose_the_tables(warehouse: str,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    assert main(["compact", warehouse, "--tables", "*.events", "--tables", "db.c*",
                 "--excluding", "db.clicks", "--where", "hh = 9", "--full"]) == 0
    assert "compacted 2 of 2 table(s)" in capsys.readouterr().out
    for name in ("db.events", "other.events"):
        assert _compacted(_levels(warehouse, name)) == {f"dt={dt}/hh=9" for dt in DAYS}
    for name in ("db.clicks", "db.orders"):
        assert _compacted(_levels(warehouse, name)) == set()


def test_database_dry_run_changes_nothing(warehouse: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in Path(warehouse).rglob("*"))
    assert main(["compact", warehouse, "--database", "db", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "planned 3 of 3 table(s)" in out
    assert sorted(str(p) for p in Path(warehouse).rglob("*")) == files


@pytest.mark.parametrize(("argv", "message"), [
    ([], "give exactly one of --table, --database or --tables"),
    (["--table", "db.events", "--database", "db"], "got --table, --database"),
    (["--database", "nodb"], "no table of"),
    (["--database", "db", "--branch", "b"], "--branch: goes with --table"),
    (["--table", "db.events", "--excluding", "x"], "--excluding: goes with --database"),
])
def test_scope_usage_errors_exit_2(warehouse: str, capsys: pytest.CaptureFixture[str],
                                   argv: list[str], message: str) -> None:
    assert main(["compact", warehouse, *argv]) == 2
    assert message in capsys.readouterr().err


def test_branches_compacts_each_branch_too(warehouse: str, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    assert main(["create-branch", warehouse, "--table", "db.events", "--branch", "b"]) == 0
    capsys.readouterr()
    assert main(["compact", warehouse, "--tables", "db.events", "--branches", "--full"]) == 0
    out = capsys.readouterr().out
    assert "compacted 2 of 2 table(s)" in out and "db.events$branch_b" in out


def test_where_selects_the_partitions_of_an_append_table(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    writer = TableWriter(catalog_for(warehouse), "db.log", SCHEMA, partition_keys=("dt", "hh"),
                         options={"bucket": "-1"})
    for commit in range(6):
        writer.commit([{"dt": dt, "hh": hh, "id": commit, "v": "x"} for dt in DAYS
                       for hh in HOURS])
    rows = read_rows(warehouse, "db.log")
    assert main(["compact", warehouse, "--table", "db.log", "--full",
                 "--where", "dt in ('2024-01-02', '2024-01-03') and not hh > 9"]) == 0
    storage = open_storage(warehouse)
    table = open_table(storage, storage.root, "db.log")
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    files: dict[str, int] = defaultdict(int)
    for entry in scan_snapshot(table, snapshot).files:
        files[partition_text(table.latest_schema(), entry.entry.partition)] += 1
    assert {p for p, count in files.items() if count == 1} == {"dt=2024-01-02/hh=9",
                                                               "dt=2024-01-03/hh=9"}
    assert {p for p, count in files.items() if count == 6} == {
        f"dt={dt}/hh={hh}" for dt in DAYS for hh in HOURS} - {"dt=2024-01-02/hh=9",
                                                               "dt=2024-01-03/hh=9"}
    columns = ("dt", "hh", "id", "v")
    assert sort_rows(read_rows(warehouse, "db.log"), columns).equals(sort_rows(rows, columns))
