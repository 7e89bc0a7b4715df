"""reset-consumer and clear-consumers on a pypaimon-written table with consumer files as Java
and pypaimon write them: a reset writes Java's bytes (which pypaimon reads back), a missing
snapshot exits 2 naming it; which consumers a clear deletes against a model of Java's
``clearConsumers`` (whole-id matches); dry runs change nothing; a branch's consumers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pypaimon.consumer.consumer_manager import ConsumerManager
from support.consumer_tables import NAME, _java_json, consumer_path, make_table, write_consumers
from support.pypaimon_tables import catalog_for
from support.table_history import tree

from paimond.cli.main import main
from paimond.clock import Clock
from paimond.maintenance.expire.consumer_edits import encode_consumer
from paimond.maintenance.tags.job import create_tag
from paimond.table.branches import create_branch
from paimond.table.catalog import Table, open_table
from paimond.table.storage.interface import open_storage

MTIME_MS = 1_700_000_000_000
IDS = ("a", "ab", "b1", "b2", "bad", "c.x")


def _table(tmp_path: Path) -> Table:
    table = make_table(tmp_path / "wh", {})
    write_consumers(table, {i: (None if i == "bad" else 2, MTIME_MS) for i in IDS})
    return table


def _ids(table: Table) -> set[str]:
    directory = Path(table.meta_file_path("consumer"))
    return {p.name.removeprefix("consumer-") for p in directory.iterdir()} \
        if directory.is_dir() else set()


def _manager(table: Table, branch: str | None = None) -> ConsumerManager:
    warehouse = str(Path(table.path).parents[1])
    return ConsumerManager(catalog_for(warehouse).get_table(NAME).file_io, table.path, branch)


def test_consumer_json_is_javas() -> None:
    assert encode_consumer(12) == _java_json(12)


def test_reset_writes_javas_consumer_and_deletes_without_a_snapshot(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = _table(tmp_path)
    wh = str(tmp_path / "wh")
    before = tree(table.path)
    assert main(["reset-consumer", wh, "--table", NAME, "--consumer", "a", "--next-snapshot",
                 "4", "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "table_name": NAME, "consumer_id": "a", "existed": True, "previous_next_snapshot": 2,
        "next_snapshot": 4, "dry_run": True}
    assert tree(table.path) == before
    assert main(["reset-consumer", wh, "--table", NAME, "--consumer", "a", "--next-snapshot",
                 "4"]) == 0
    assert "reset consumer 'a' to next snapshot 4 (was: next snapshot 2)" in \
        capsys.readouterr().out
    assert Path(consumer_path(table, "a")).read_bytes() == _java_json(4)
    consumer = _manager(table).consumer("a")
    assert consumer is not None and consumer.next_snapshot == 4
    # A new consumer, and one whose file did not parse, are written the same way.
    for consumer_id in ("new", "bad"):
        assert main(["reset-consumer", wh, "--table", NAME, "--consumer", consumer_id,
                     "--next-snapshot", "5"]) == 0
        assert Path(consumer_path(table, consumer_id)).read_bytes() == _java_json(5)
    assert table.consumers()["new"] == 5
    # Java loads the snapshot first: a missing one is an error, nothing written.
    assert main(["reset-consumer", wh, "--table", NAME, "--consumer", "a", "--next-snapshot",
                 "9"]) == 2
    assert "--next-snapshot: snapshot 9 of db.t does not exist" in capsys.readouterr().err
    assert Path(consumer_path(table, "a")).read_bytes() == _java_json(4)
    # Without a snapshot: deleted; a missing consumer is not an error.
    assert main(["reset-consumer", wh, "--table", NAME, "--consumer", "a"]) == 0
    assert main(["reset-consumer", wh, "--table", NAME, "--consumer", "a"]) == 0
    assert "consumer 'a' does not exist; nothing to do" in capsys.readouterr().out
    assert "a" not in _ids(table)
    assert main(["reset-consumer", wh, "--table", NAME, "--consumer", "../x"]) == 2


def _java_clear(ids: set[str], including: str | None, excluding: str | None) -> set[str]:
    """Java ``ClearConsumersProcedure``: a blank pattern is absent; ``Matcher.matches`` is a
    match of the whole id."""
    include = ".*" if including is None or not including.strip() else including
    exclude = None if excluding is None or not excluding.strip() else excluding
    return {i for i in ids if re.fullmatch(include, i)
            and not (exclude is not None and re.fullmatch(exclude, i))}


@pytest.mark.parametrize(("including", "excluding"), [
    (None, None), ("a", None), ("b.*", None), (None, "b.*"), ("b.*", "b2"), (" ", " "),
    ("c.x", None), ("c\\.x|a", "a"), (".*", ".*"), ("nothing", None),
])
def test_clear_deletes_what_java_would(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       including: str | None, excluding: str | None) -> None:
    table = _table(tmp_path)
    wh = str(tmp_path / "wh")
    argv = ["clear-consumers", wh, "--table", NAME]
    argv += [] if including is None else ["--including", including]
    argv += [] if excluding is None else ["--excluding", excluding]
    expected = _java_clear(set(IDS), including, excluding)
    before = tree(table.path)
    assert main([*argv, "--dry-run", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["cleared"]) == expected and report["consumers"] == sorted(IDS)
    assert tree(table.path) == before
    assert main(argv) == 0
    assert _ids(table) == set(IDS) - expected
    capsys.readouterr()


def test_a_bad_pattern_exits_2_naming_it(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    table = _table(tmp_path)
    assert main(["clear-consumers", str(tmp_path / "wh"), "--table", NAME,
                 "--excluding", "(a"]) == 2
    assert "--excluding: '(a' is not a regular expression" in capsys.readouterr().err
    assert _ids(table) == set(IDS)


def test_consumer_tools_on_a_branch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = _table(tmp_path)
    wh = str(tmp_path / "wh")
    create_tag(table, clock=Clock(fixed_ms=MTIME_MS), name="base", snapshot_id=3)
    create_branch(table, "b", "base")
    branch = open_table(open_storage(wh), wh, NAME, "b")
    assert main(["reset-consumer", wh, "--table", NAME, "--branch", "b", "--consumer", "x",
                 "--next-snapshot", "3"]) == 0
    assert main(["reset-consumer", wh, "--table", f"{NAME}$branch_b", "--consumer", "y",
                 "--next-snapshot", "4"]) == 2  # the branch has snapshot 3 only
    assert main(["reset-consumer", wh, "--table", NAME, "--branch", "b", "--consumer", "y",
                 "--next-snapshot", "3"]) == 0
    consumer = _manager(table, "b").consumer("x")
    assert consumer is not None and consumer.next_snapshot == 3
    assert Path(branch.meta_file_path("consumer", "consumer-x")).read_bytes() == _java_json(3)
    assert main(["clear-consumers", wh, "--table", NAME, "--branch", "b", "--including",
                 "x"]) == 0
    capsys.readouterr()
    assert _ids(branch) == {"y"}
    assert _ids(table) == set(IDS)  # main's consumers untouched
