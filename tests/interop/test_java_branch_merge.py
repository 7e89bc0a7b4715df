"""merge-branch and rename-branch against Java Paimon 2.0's ``mergeBranch`` and
``renameBranch`` on copies of one table: the same files end up live in the target, the same
refusals, the same branch directory byte for byte; every Java release reads the result."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pypaimon import Schema
from support.java_maintainer import JavaMaintainer, JavaMaintenanceError
from support.java_reader import JavaReaders
from support.pypaimon_tables import catalog_for

from paimond.cli.main import main
from paimond.table.catalog import open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()),
                    ("dt", pa.string())])


def _write(warehouse: Path, name: str, ids: range) -> None:
    table = catalog_for(str(warehouse)).get_table(name)
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.Table.from_pylist(
        [{"id": i, "v": f"v{i}", "dt": "a" if i % 2 else "b"} for i in ids], schema=SCHEMA))
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def _append_table(warehouse: Path, tag_snapshot: int) -> Path:
    """``db.a`` (append, partitioned by ``dt``): main 3 commits, branch ``b`` from the tag of
    snapshot ``tag_snapshot`` with 2 commits of its own."""
    catalog = catalog_for(str(warehouse))
    catalog.create_database("db", True)
    catalog.create_table("db.a", Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=["dt"], options={"bucket": "-1"}), False)
    _write(warehouse, "db.a", range(0, 10))
    _write(warehouse, "db.a", range(10, 20))
    wh = str(warehouse)
    assert main(["create-tag", wh, "--table", "db.a", "--tag", "t", "--snapshot",
                 str(tag_snapshot)]) == 0
    assert main(["create-branch", wh, "--table", "db.a", "--branch", "b", "--tag", "t"]) == 0
    _write(warehouse, "db.a$branch_b", range(100, 110))
    _write(warehouse, "db.a$branch_b", range(110, 115))
    _write(warehouse, "db.a", range(20, 25))
    return warehouse / "db.db" / "a"


def _live(warehouse: Path, name: str) -> set[tuple[object, ...]]:
    table = open_table(open_storage(str(warehouse)), str(warehouse), name)
    latest = table.snapshots.latest()
    assert latest is not None
    return {f.entry.identifier for f in scan_snapshot(table, latest).files}


def _merge(warehouse: Path, *extra: str) -> tuple[int, dict[str, Any] | None, str]:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["merge-branch", str(warehouse), "--table", "db.a", "--branch", "b",
                     "--json", *extra])
    return code, json.loads(out.getvalue()) if code == 0 else None, err.getvalue()


def test_merge_branch_adds_what_java_adds(java_maintainer: JavaMaintainer,
                                          java_readers: JavaReaders, tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    root = _append_table(ours, tag_snapshot=1)
    shutil.copytree(ours, theirs)
    branch_only = _live(ours, "db.a$branch_b") - _live(ours, "db.a")

    code, planned, _ = _merge(ours, "--dry-run")
    assert code == 0 and planned is not None and planned["files"] == len(branch_only) > 0
    code, merged, _ = _merge(ours)
    assert code == 0 and merged is not None and merged["snapshot_id"] == 4
    assert java_maintainer.merge_branch(theirs / "db.db" / "a", "b") == 4

    assert _live(ours, "db.a") == _live(theirs, "db.a")
    assert branch_only <= _live(ours, "db.a")
    latest = open_table(open_storage(str(ours)), str(ours), "db.a").snapshots.latest()
    assert latest is not None and latest.commit_kind == "APPEND"
    expected = sorted(java_readers.get("2.0").read_rows(theirs / "db.db" / "a"))
    assert len(expected) == 25 + 15  # main's 25 and the 15 the branch wrote itself
    for reader in java_readers.every():
        assert sorted(reader.read_rows(root)) == expected, reader.release
    code, again, _ = _merge(ours)
    assert code == 0 and again is not None and (again["files"], again["snapshot_id"]) == (0, None)
    # Java goes on appending to the merged main branch
    java_maintainer.write(root, [["+I", 7, "java", "a"]])
    assert len(java_readers.get("2.0").read_rows(root)) == len(expected) + 1


def test_merge_is_refused_where_java_refuses(java_maintainer: JavaMaintainer,
                                             tmp_path: Path) -> None:
    """A branch from the tag of snapshot 2 lacks snapshot 1: no complete history."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    _append_table(ours, tag_snapshot=2)
    shutil.copytree(ours, theirs)
    code, _, err = _merge(ours)
    assert code == 1 and "does not hold every snapshot from 1" in err
    with pytest.raises(JavaMaintenanceError, match="does not start at snapshot 1"):
        java_maintainer.merge_branch(theirs / "db.db" / "a", "b")
    assert _live(ours, "db.a") == _live(theirs, "db.a")  # neither changed anything
    code, _, err = _merge(ours, "--into", "b")
    assert code == 2 and "into itself" in err


def test_rename_branch_leaves_the_directory_java_leaves(
        java_maintainer: JavaMaintainer, java_readers: JavaReaders, tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    root = _append_table(ours, tag_snapshot=1)
    shutil.copytree(ours, theirs)
    before = sorted(java_readers.get("2.0").read_rows(f"{root}$branch_b"))
    assert main(["rename-branch", str(ours), "--table", "db.a", "--branch", "b",
                 "--to", "c"]) == 0
    assert java_maintainer.rename_branch(theirs / "db.db" / "a", "b", "c") == 3

    def tree(warehouse: Path) -> dict[str, bytes]:
        base = warehouse / "db.db" / "a" / "branch"
        return {str(p.relative_to(base)): p.read_bytes() for p in base.rglob("*") if p.is_file()}

    assert tree(ours) == tree(theirs) and all(k.startswith("branch-c/") for k in tree(ours))
    for reader in java_readers.every():
        assert sorted(reader.read_rows(f"{root}$branch_c")) == before, reader.release
    java_maintainer.write(f"{root}$branch_c", [["+I", 8, "java", "b"]])
    assert len(java_readers.get("2.0").read_rows(f"{root}$branch_c")) == len(before) + 1
