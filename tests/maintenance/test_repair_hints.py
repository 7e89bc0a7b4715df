"""``paimond repair``: the EARLIEST and LATEST hints of snapshot/ (and changelog/) rewritten to
what the snapshot files present say, whether missing, not a bare number, or naming the wrong
id; a LATEST beyond the last snapshot makes Java readers fail until it is repaired. Snapshot
files are never touched; a pending expiration keeps its EARLIEST; a branch's hints alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.java_reader import JavaReadError, JavaReaders
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_pk_deduplicate

from paimond.cli.main import main
from paimond.maintenance.expire.record import records_dir
from paimond.maintenance.repair.hints import (
    EXTRA,
    MISSING,
    OK,
    PENDING,
    UNREADABLE,
    WRONG,
    repair_hints,
)
from paimond.table.branches import create_branch
from paimond.table.catalog import Table, open_table
from paimond.table.storage.interface import open_storage

NAME = "db.pk_deduplicate"


@pytest.fixture(name="table")
def _table(tmp_path: Path) -> Table:
    warehouse = tmp_path / "wh"
    build_pk_deduplicate(str(warehouse))  # snapshots 1..6
    return open_table(open_storage(str(warehouse)), str(warehouse), NAME)


def _dir(table: Table, directory: str = "snapshot") -> Path:
    return Path(table.meta_file_path(directory))


def _write(table: Table, hint: str, text: str, directory: str = "snapshot") -> None:
    (_dir(table, directory) / hint).write_text(text)


def _hint(table: Table, hint: str, directory: str = "snapshot") -> str | None:
    path = _dir(table, directory) / hint
    return path.read_text() if path.exists() else None


def _states(table: Table) -> dict[str, str]:
    return {f"{h.directory}/{h.hint}": h.state for h in repair_hints(table, dry_run=True).hints}


def _snapshot_files(table: Table) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns)
            for d in ("snapshot", "changelog") for p in sorted(_dir(table, d).glob("*-*"))}


@pytest.mark.parametrize(("earliest", "latest", "states"), [
    (None, None, {"snapshot/EARLIEST": MISSING, "snapshot/LATEST": MISSING}),
    ("one", "6\n", {"snapshot/EARLIEST": UNREADABLE, "snapshot/LATEST": UNREADABLE}),
    ("4", "5", {"snapshot/EARLIEST": WRONG, "snapshot/LATEST": WRONG}),
    ("9", "99", {"snapshot/EARLIEST": WRONG, "snapshot/LATEST": WRONG}),
    ("1", "6", {"snapshot/EARLIEST": OK, "snapshot/LATEST": OK}),
], ids=["missing", "corrupt", "stale", "beyond", "right"])
def test_each_hint_repaired(table: Table, earliest: str | None, latest: str | None,
                            states: dict[str, str]) -> None:
    for hint, text in (("EARLIEST", earliest), ("LATEST", latest)):
        (_dir(table) / hint).unlink(missing_ok=True)
        if text is not None:
            _write(table, hint, text)
    files = _snapshot_files(table)
    assert _states(table) == states
    assert (_hint(table, "EARLIEST"), _hint(table, "LATEST")) == (earliest, latest)  # dry run

    result = repair_hints(table)
    assert [h.repaired for h in result.hints] == [s != OK for s in states.values()]
    assert (_hint(table, "EARLIEST"), _hint(table, "LATEST")) == ("1", "6")
    assert set(_states(table).values()) == {OK}
    assert _snapshot_files(table) == files


def test_a_latest_beyond_the_last_snapshot_fails_java_until_repaired(
        table: Table, java_readers: JavaReaders, capsys: pytest.CaptureFixture[str]) -> None:
    """Java trusts LATEST whenever the next id is absent: 9 names a snapshot that does not
    exist, and every Java release fails to read the table."""
    expected = sorted(java_readers.every()[0].read_rows(table.path))
    _write(table, "LATEST", "9")
    for reader in java_readers.every():
        with pytest.raises(JavaReadError):
            reader.read_rows(table.path)

    warehouse = str(Path(table.path).parent.parent)
    assert main(["repair", warehouse, "--table", NAME, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    latest = next(h for h in shown["hints"] if h["hint"] == "LATEST")
    assert latest == {"directory": "snapshot", "hint": "LATEST", "found": "9", "expected": 6,
                      "state": WRONG, "repaired": True}
    for reader in java_readers.every():
        assert sorted(reader.read_rows(table.path)) == expected, reader.release


def test_changelog_hints(table: Table, capsys: pytest.CaptureFixture[str]) -> None:
    """Long-lived changelogs (changelog/changelog-<id>) have hints of their own."""
    changelog = _dir(table, "changelog")
    changelog.mkdir()
    for snapshot_id in (2, 3):
        (changelog / f"changelog-{snapshot_id}").write_bytes(
            (_dir(table) / f"snapshot-{snapshot_id}").read_bytes())
    _write(table, "LATEST", "2", "changelog")
    states = _states(table)
    assert (states["changelog/EARLIEST"], states["changelog/LATEST"]) == (MISSING, WRONG)

    warehouse = str(Path(table.path).parent.parent)
    assert main(["repair", warehouse, "--table", NAME]) == 0
    out = capsys.readouterr().out
    assert "changelog/LATEST: '2' names the wrong id; set to 3" in out
    assert (_hint(table, "EARLIEST", "changelog"), _hint(table, "LATEST", "changelog")) == (
        "2", "3")


def test_a_pending_expiration_keeps_its_earliest(table: Table) -> None:
    """Expiration moves EARLIEST first, then deletes the snapshots below it: while its record
    is there, the snapshots below the hint are on their way out."""
    _write(table, "EARLIEST", "4")
    records = Path(records_dir(table))
    records.mkdir(parents=True)
    (records / "expiration-4-x.json").write_text("{}")
    result = repair_hints(table)
    assert [(h.hint, h.state, h.repaired) for h in result.hints] == [
        ("EARLIEST", PENDING, False), ("LATEST", OK, False)]
    assert _hint(table, "EARLIEST") == "4"


def test_a_branch(table: Table, capsys: pytest.CaptureFixture[str]) -> None:
    """--branch repairs the branch's hints alone; an empty branch keeps none."""
    warehouse = str(Path(table.path).parent.parent)
    create_branch(table, "b")
    branch = table.on_branch("b")
    _dir(branch).mkdir(parents=True, exist_ok=True)
    _write(branch, "LATEST", "3")
    _write(table, "LATEST", "2")
    assert _states(branch) == {"snapshot/EARLIEST": OK, "snapshot/LATEST": EXTRA}
    assert main(["repair", warehouse, "--table", NAME, "--branch", "b", "--dry-run"]) == 0
    assert "snapshot/LATEST: '3', but no snapshot file exists; would be removed" in \
        capsys.readouterr().out
    assert _hint(branch, "LATEST") == "3"

    assert main(["repair", warehouse, "--table", NAME, "--branch", "b"]) == 0
    assert "snapshot/LATEST: '3', but no snapshot file exists; removed" in \
        capsys.readouterr().out
    assert [(h.hint, h.state) for h in repair_hints(branch).hints] == [
        ("EARLIEST", OK), ("LATEST", OK)]
    assert _hint(branch, "LATEST") is None
    assert _hint(table, "LATEST") == "2"  # the main branch's hint: not this command's
    assert repair_hints(table, dry_run=True).hints[1].state == WRONG
    assert main(["repair", warehouse, "--table", f"{NAME}$branch_b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["table_name"] == f"{NAME}$branch_b"
    read_rows(warehouse, NAME)
