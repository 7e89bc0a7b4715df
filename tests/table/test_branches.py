"""Branches made by paimond's create-branch, maintained like tables of their own: a branch's
files are exactly Java's layout (byte copies of the tag, its snapshot and the schemas), its
compaction and expiry touch only its own snapshots, and nothing a branch does loses a file
the main branch still reads (pypaimon reads the main branch, the model of what it holds)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_pk_deduplicate

from paimond.cli.main import main
from paimond.errors import ConfigError
from paimond.table.branches import RENAME_MARKER, create_branch, delete_branch, rename_branch
from paimond.table.catalog import list_tables, open_table
from paimond.table.storage.interface import open_storage


@pytest.fixture
def warehouse(tmp_path: Path) -> tuple[str, str, Path]:
    warehouse = str(tmp_path / "wh")
    spec = build_pk_deduplicate(warehouse)
    return warehouse, spec.name, Path(warehouse) / "db.db" / spec.name.split(".")[1]


def test_a_branch_from_a_tag_is_byte_copies_of_the_tag_its_snapshot_and_schemas(
        warehouse: tuple[str, str, Path]) -> None:
    wh, name, root = warehouse
    assert main(["create-tag", wh, "--table", name, "--tag", "t3", "--snapshot", "3"]) == 0
    table = open_table(open_storage(wh), wh, name)

    made = create_branch(table, "b", "t3")

    assert (made.snapshot_id, made.schema_ids) == (3, (0,))
    branch = root / "branch" / "branch-b"
    assert sorted(str(p.relative_to(branch)) for p in branch.rglob("*") if p.is_file()) == [
        "schema/schema-0", "snapshot/snapshot-3", "tag/tag-t3"]
    for relative in ("schema/schema-0", "snapshot/snapshot-3", "tag/tag-t3"):
        original = root / relative
        assert (branch / relative).read_bytes() == original.read_bytes(), relative
    on_branch = open_table(open_storage(wh), wh, f"{name}$branch_b")
    assert on_branch.snapshots.latest_id() == 3 and list(on_branch.tags()) == ["t3"]
    assert open_table(open_storage(wh), wh, name, "b").meta_path == on_branch.meta_path
    names = [t.name for t in list_tables(open_storage(wh), wh, branches=True)]
    assert names == [name, f"{name}$branch_b"]
    assert [t.name for t in list_tables(open_storage(wh), wh)] == [name]


def test_names_paimon_refuses_and_missing_tags_and_branches_are_config_errors(
        warehouse: tuple[str, str, Path]) -> None:
    wh, name, root = warehouse
    table = open_table(open_storage(wh), wh, name)
    for bad in ("main", "123", " ", "a/b"):
        with pytest.raises(ConfigError):
            create_branch(table, bad)
    with pytest.raises(ConfigError, match="has no tag 'nope'"):
        create_branch(table, "b", "nope")
    create_branch(table, "b")
    with pytest.raises(ConfigError, match="already has a branch 'b'"):
        create_branch(table, "b")
    with pytest.raises(ConfigError, match="is a branch"):
        create_branch(table.on_branch("b"), "c")
    with pytest.raises(ConfigError, match=r"has no branch 'x' \(its branches: b\)"):
        open_table(open_storage(wh), wh, f"{name}$branch_x")
    with pytest.raises(ConfigError, match="names branch 'b'"):
        open_table(open_storage(wh), wh, f"{name}$branch_b", "c")
    with pytest.raises(ConfigError, match="has no branch 'x'"):
        delete_branch(table, "x")
    assert not (root / "branch" / "branch-x").exists()


def test_an_empty_branch_has_the_schemas_and_no_snapshot(
        warehouse: tuple[str, str, Path], capsys: Any) -> None:
    wh, name, root = warehouse
    assert main(["create-branch", wh, "--table", name, "--branch", "e", "--json"]) == 0
    assert '"snapshot_id": null' in capsys.readouterr().out
    assert sorted(p.name for p in (root / "branch" / "branch-e").rglob("*") if p.is_file()) == [
        "schema-0"]
    assert main(["compact", wh, "--table", f"{name}$branch_e"]) == 0
    assert "nothing to compact" in capsys.readouterr().out


def test_compacting_and_expiring_a_branch_keeps_every_file_the_main_branch_reads(
        warehouse: tuple[str, str, Path], capsys: Any) -> None:
    """The branch's compaction deletes (in its own snapshots) the main branch's files its
    first snapshot shares; its expiry must keep them: the main branch still reads them."""
    wh, name, root = warehouse
    expected = read_rows(wh, name, include_level0=True)
    assert main(["create-tag", wh, "--table", name, "--tag", "t6", "--snapshot", "6"]) == 0
    assert main(["create-branch", wh, "--table", name, "--branch", "b", "--tag", "t6"]) == 0
    assert main(["delete-tag", wh, "--table", name, "--tag", "t6", "--branch", "b"]) == 0
    assert main(["compact", wh, "--table", name, "--branch", "b", "--full"]) == 0
    assert main(["expire-snapshots", wh, "--table", f"{name}$branch_b", "--retain-max", "1",
                 "--retain-min", "1", "--older-than", "0 ms"]) == 0
    out = capsys.readouterr().out
    assert "expired snapshots 6..6 (1)" in out, out
    branch = open_table(open_storage(wh), wh, f"{name}$branch_b")
    assert branch.snapshots.list_ids() == [7] and not branch.tags()
    # the main branch: untouched, and everything it names still there
    assert read_rows(wh, name, include_level0=True).equals(expected)
    assert main(["status", wh, "--table", name]) == 0
    assert sorted(p.name for p in (root / "snapshot").glob("snapshot-*")) == [
        f"snapshot-{i}" for i in range(1, 7)]

    # deleting the branch leaves its data files to orphan removal, which then finds them
    assert main(["delete-branch", wh, "--table", name, "--branch", "b"]) == 0
    assert not (root / "branch" / "branch-b").exists()
    assert main(["remove-orphans", wh, "--table", name, "--older-than", "1 ms", "--force"]) == 0
    assert "removed" in capsys.readouterr().out
    assert read_rows(wh, name, include_level0=True).equals(expected)


def test_status_lists_each_branch_as_its_own_table(warehouse: tuple[str, str, Path],
                                                   capsys: Any) -> None:
    wh, name, _ = warehouse
    table = open_table(open_storage(wh), wh, name)
    create_branch(table, "b")
    capsys.readouterr()
    assert main(["status", wh, "--json"]) == 0
    out = capsys.readouterr().out
    assert f'"{name}"' in out and f'"{name}$branch_b"' in out
    assert main(["status", wh, "--branch", "b"]) == 2


def _branch_files(root: Path, branch: str) -> dict[str, bytes]:
    base = root / "branch" / f"branch-{branch}"
    return {str(p.relative_to(base)): p.read_bytes() for p in base.rglob("*") if p.is_file()}


def test_rename_moves_every_file_and_completes_an_interrupted_rename(
        warehouse: tuple[str, str, Path]) -> None:
    wh, name, root = warehouse
    assert main(["create-tag", wh, "--table", name, "--tag", "t3", "--snapshot", "3"]) == 0
    assert main(["create-branch", wh, "--table", name, "--branch", "b", "--tag", "t3"]) == 0
    assert main(["compact", wh, "--table", name, "--branch", "b", "--full"]) == 0
    files = _branch_files(root, "b")
    assert {"snapshot/snapshot-4", "snapshot/LATEST", "tag/tag-t3", "schema/schema-0"} <= set(files)
    table = open_table(open_storage(wh), wh, name)

    rename_branch(table, "b", "c")
    assert _branch_files(root, "c") == files and not (root / "branch" / "branch-b").exists()
    rows = read_rows(wh, f"{name}$branch_c")

    # killed while copying: the new directory has the marker and the schemas only
    rename_branch(table, "c", "d", dry_run=True)
    assert (root / "branch" / "branch-c").exists() and not (root / "branch" / "branch-d").exists()
    (root / "branch" / "branch-d" / "schema").mkdir(parents=True)
    (root / "branch" / "branch-d" / RENAME_MARKER).write_text("c")
    (root / "branch" / "branch-d" / "schema" / "schema-0").write_bytes(files["schema/schema-0"])
    assert rename_branch(table, "c", "d").resumed
    assert _branch_files(root, "d") == files and not (root / "branch" / "branch-c").exists()

    # killed while deleting: the old directory lost its snapshots already
    shutil.copytree(root / "branch" / "branch-d", root / "branch" / "branch-e")
    (root / "branch" / "branch-e" / RENAME_MARKER).write_text("d")
    shutil.rmtree(root / "branch" / "branch-d" / "snapshot")
    assert rename_branch(table, "d", "e").resumed
    assert _branch_files(root, "e") == files and read_rows(wh, f"{name}$branch_e").equals(rows)

    # killed before the marker went: only the marker is left to delete
    (root / "branch" / "branch-e" / RENAME_MARKER).write_text("gone")
    assert rename_branch(table, "gone", "e").resumed
    assert _branch_files(root, "e") == files

    # an existing branch of that name, even one with the same (schema) files, is refused
    create_branch(table, "f")
    with pytest.raises(ConfigError, match="already has a branch 'f'"):
        rename_branch(table, "e", "f")
    with pytest.raises(ConfigError, match="main branch cannot be renamed"):
        rename_branch(table, "main", "g")
    with pytest.raises(ConfigError, match="has no branch 'x'"):
        rename_branch(table, "x", "g")
