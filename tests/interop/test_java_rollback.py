"""paimond rollback on a table Java Paimon wrote: to a snapshot, to a tag (live and expired), to
a moment, and on a branch; every Java release then reads the target's rows, and Java 2.0
writes on top of the rolled-back table and reads what it wrote."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from support.java_maintainer import JavaMaintainer
from support.java_reader import JavaReaders, multiset_diff
from support.java_written_tables import create_table, random_rows
from support.table_garbage import unreferenced_files

from paimond.cli.main import main
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage


def _every_read(readers: JavaReaders, path: str, **at: Any) -> list[str]:
    found = {r.release: sorted(r.read_rows(path, **at)) for r in readers.every()}
    assert len({tuple(rows) for rows in found.values()}) == 1, found
    return next(iter(found.values()))


def _write_more_and_read(java_maintainer: JavaMaintainer, readers: JavaReaders, path: str,
                         expected: list[str]) -> None:
    assert _every_read(readers, path) == expected
    java_maintainer.write(path, [["+I", 1, 1000, "after"]])
    rows = _every_read(readers, path)
    added = [r for r in rows if "after" in r]
    assert len(added) == 1 and sorted([*expected, *added]) == rows, multiset_diff(rows, expected)


@pytest.mark.parametrize("kind", ["snapshot", "tag", "expired-tag", "timestamp"])
def test_java_reads_the_target_and_writes_on_top(
        kind: str, java_maintainer: JavaMaintainer, java_readers: JavaReaders,
        tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    root = create_table(warehouse)
    rng = random.Random(3)
    for _ in range(6):
        java_maintainer.write(root, random_rows(rng, 30))
    java_maintainer.tag(root, "t3", 3)
    java_maintainer.tag(root, "t5", 5)
    expected = _every_read(java_readers, str(root), snapshot_id=3)
    table = open_table(open_storage(str(warehouse)), str(warehouse), "db.t")
    target = {"snapshot": ["--to-snapshot", "3"], "tag": ["--to-tag", "t3"],
              "expired-tag": ["--to-tag", "t3"],
              "timestamp": ["--to-timestamp", str(table.snapshots.load(3).time_millis)]}[kind]
    if kind == "expired-tag":
        java_maintainer.expire(root, 2)  # snapshots 5 and 6 are left
    assert main(["rollback", str(warehouse), "--table", "db.t", *target, "--yes"]) == 0
    assert table.snapshots.list_ids() == ([3] if kind == "expired-tag" else [1, 2, 3])
    assert table.snapshots.read_hint("LATEST") == 3
    if kind == "expired-tag":
        assert table.snapshots.read_hint("EARLIEST") == 3
    assert list(table.tags()) == ["t3"]
    assert unreferenced_files(str(warehouse), "db.t") == []
    _write_more_and_read(java_maintainer, java_readers, str(root), expected)
    assert table.snapshots.latest_id() == 4


def test_a_branch_rolls_back_alone(java_maintainer: JavaMaintainer, java_readers: JavaReaders,
                                   tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    root = create_table(warehouse)
    rng = random.Random(7)
    for _ in range(3):
        java_maintainer.write(root, random_rows(rng, 30))
    java_maintainer.tag(root, "t2", 2)
    assert java_maintainer.create_branch(root, "b", "t2") == 2
    branch = f"{root}$branch_b"
    for _ in range(3):
        java_maintainer.write(branch, random_rows(rng, 30))
    main_rows = _every_read(java_readers, str(root))
    expected = _every_read(java_readers, branch, snapshot_id=3)
    assert main(["rollback", str(warehouse), "--table", "db.t", "--branch", "b",
                 "--to-snapshot", "3", "--yes"]) == 0
    storage = open_storage(str(warehouse))
    assert open_table(storage, str(warehouse), "db.t$branch_b").snapshots.list_ids() == [2, 3]
    assert open_table(storage, str(warehouse), "db.t").snapshots.list_ids() == [1, 2, 3]
    assert _every_read(java_readers, str(root)) == main_rows
    assert unreferenced_files(str(warehouse), "db.t") == []
    _write_more_and_read(java_maintainer, java_readers, branch, expected)
