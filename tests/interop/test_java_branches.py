"""Branches, as Java Paimon makes them and writes into them: one daemon pass compacts and
expires the main branch and every branch, each with its own snapshots, and every Java release
reads each branch (and the tags they keep) exactly as before; Java then keeps writing into the
branches; orphan removal keeps every file any branch uses. paimond's own create-branch and
delete-branch make branches Java reads and writes like its own."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from support.java_maintainer import JavaMaintainer
from support.java_reader import JavaReaders, multiset_diff
from support.java_written_tables import create_table, random_rows

from paimond.cli.main import main
from paimond.clock import Clock
from paimond.config.settings import load_settings
from paimond.daemon.metrics import Metrics
from paimond.daemon.service import Daemon
from paimond.maintenance.expire.orphans import OrphanJob
from paimond.maintenance.jobs import ROUTINE
from paimond.table.catalog import Table, open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

MAX_LEVEL = 5  # num-levels 6


def _open(warehouse: Path, name: str) -> Table:
    return open_table(open_storage(str(warehouse)), str(warehouse), name)


def _levels(table: Table) -> set[int]:
    latest = table.snapshots.latest()
    assert latest is not None
    return {f.entry.file.level for f in scan_snapshot(table, latest).files}


def _read_all(readers: JavaReaders, paths: dict[str, str]) -> dict[str, list[str]]:
    """Rows each Java release reads of each branch (every release reads the same)."""
    seen: dict[str, list[str]] = {}
    for reader in readers.every():
        for name, path in paths.items():
            rows = sorted(reader.read_rows(path))
            assert seen.setdefault(name, rows) == rows, (reader.release, name)
    return seen


def _branch_tag_rows(readers: JavaReaders, root: Path, branch: str, tag: str) -> list[str]:
    """What every Java release reads of a branch's tag, read as a tag of the main branch (a
    tag file is the snapshot it pins; the manifests and data files are the table's): Java's
    ``scan.tag-name`` on a branch table looks the tag up in the main branch."""
    probe = root / "tag" / "tag-probe"
    probe.write_bytes((root / "branch" / f"branch-{branch}" / "tag" / f"tag-{tag}").read_bytes())
    try:
        found = {r.release: sorted(r.read_rows(root, tag="probe")) for r in readers.every()}
    finally:
        probe.unlink()
    assert len({tuple(rows) for rows in found.values()}) == 1, found
    return next(iter(found.values()))


def test_the_daemon_maintains_every_branch_and_java_reads_each_exactly(
        java_maintainer: JavaMaintainer, java_readers: JavaReaders, tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    root = create_table(warehouse)
    paths = {"db.t": str(root), "db.t$branch_b1": f"{root}$branch_b1",
             "db.t$branch_b2": f"{root}$branch_b2"}
    rng = random.Random(11)
    for _ in range(3):
        java_maintainer.write(root, random_rows(rng, 40))
    java_maintainer.tag(root, "t2", 2)
    assert java_maintainer.create_branch(root, "b1", "t2") == 2
    assert java_maintainer.create_branch(root, "b2") == 0
    for _ in range(4):
        java_maintainer.write(paths["db.t$branch_b1"], random_rows(rng, 40))
    for _ in range(3):
        java_maintainer.write(paths["db.t$branch_b2"], random_rows(rng, 40))
    for _ in range(2):
        java_maintainer.write(root, random_rows(rng, 40))
    tagged = sorted(java_readers.every()[-1].read_rows(root, tag="t2"))
    # Only the branch's copy of the tag keeps snapshot 2's files now: the main branch's
    # expiry must keep them for the branch.
    assert main(["delete-tag", str(warehouse), "--table", "db.t", "--tag", "t2"]) == 0
    before = _read_all(java_readers, paths)
    assert _branch_tag_rows(java_readers, root, "b1", "t2") == tagged
    assert len({tuple(before[n]) for n in paths}) == 3  # three histories

    settings = load_settings(None, env={
        "PAIMOND_WAREHOUSE": str(warehouse), "PAIMOND_JOBS_COMPACT_FULL": "true",
        "PAIMOND_JOBS_EXPIRE_RETAIN_MAX": "2", "PAIMOND_JOBS_EXPIRE_RETAIN_MIN": "1"},
        jobs=ROUTINE)
    runs = Daemon(settings, Metrics(CollectorRegistry())).run_once()

    assert sorted(r.table for r in runs) == sorted(paths)
    for run in runs:
        assert run.error is None, (run.table, run.error)
        assert {"compact", "expire"} <= set(run.reports), (run.table, run.reports)
    for name in paths:
        table = _open(warehouse, name)
        assert _levels(table) == {MAX_LEVEL}, name
        assert len(table.snapshots.list_ids()) == 2, name  # each branch expired its own
    b1 = _open(warehouse, "db.t$branch_b1")
    assert b1.snapshots.list_ids()[0] > 2 and list(b1.tags()) == ["t2"]
    assert _read_all(java_readers, paths) == before
    assert _branch_tag_rows(java_readers, root, "b1", "t2") == tagged

    # every file a branch, a tag or a snapshot names stays through orphan removal
    now = Clock().wall_ms()
    OrphanJob(_open(warehouse, "db.t$branch_b2"), Clock(), older_than_ms=now - 1,
              force=True).run()
    assert _read_all(java_readers, paths) == before
    assert _branch_tag_rows(java_readers, root, "b1", "t2") == tagged

    # Java keeps writing into each branch after paimond's commits, and reads what it wrote
    for name, path in paths.items():
        java_maintainer.write(path, [["+I", 1, 1000, name]])
    reader = java_readers.every()[-1]
    for name, path in paths.items():
        rows = sorted(reader.read_rows(path))
        added = [r for r in rows if name in r]
        assert len(added) == 1 and sorted([*before[name], *added]) == rows, \
            multiset_diff(rows, before[name])


def test_paimond_creates_and_deletes_branches_java_writes_and_reads(
        java_maintainer: JavaMaintainer, java_readers: JavaReaders, tmp_path: Path,
        capsys: Any) -> None:
    warehouse = tmp_path / "wh"
    root = create_table(warehouse)
    rng = random.Random(5)
    for _ in range(3):
        java_maintainer.write(root, random_rows(rng, 30))
    java_maintainer.tag(root, "t1", 1)
    java_maintainer.expire(root, 1)  # snapshot 1 is gone: the branch is made from the tag
    wh = str(warehouse)
    java_copy = tmp_path / "java" / "db.db" / "t"
    shutil.copytree(root, java_copy)
    java_maintainer.create_branch(java_copy, "b", "t1")
    java_maintainer.create_branch(java_copy, "e")

    assert main(["create-branch", wh, "--table", "db.t", "--branch", "b", "--tag", "t1"]) == 0
    assert main(["create-branch", wh, "--table", "db.t", "--branch", "e"]) == 0
    assert "created branch b from tag t1 (snapshot 1)" in capsys.readouterr().out
    assert main(["create-branch", wh, "--table", "db.t", "--branch", "b"]) == 2
    assert main(["create-branch", wh, "--table", "db.t", "--branch", "12"]) == 2
    assert main(["create-branch", wh, "--table", "db.t", "--branch", "x", "--tag", "no"]) == 2
    assert "already has a branch 'b'" in capsys.readouterr().err
    for branch in ("b", "e"):  # the files Java's createBranch writes (copies byte for byte;
        # the snapshot written from the expired snapshot's tag: the same JSON)
        ours, theirs = (_tree(r / "branch" / f"branch-{branch}") for r in (root, java_copy))
        assert ours.keys() == theirs.keys(), branch
        for name, data in ours.items():
            if name.startswith("snapshot/"):
                assert json.loads(data) == json.loads(theirs[name]), name
            else:
                assert data == theirs[name], name

    reader = java_readers.every()[-1]
    assert sorted(reader.read_rows(f"{root}$branch_b")) == sorted(
        reader.read_rows(root, tag="t1"))
    assert reader.read_rows(f"{root}$branch_e") == []
    java_maintainer.write(f"{root}$branch_b", [["+I", 2, 99, "on b"]])
    java_maintainer.write(f"{root}$branch_e", [["+I", 1, 7, "on e"]])
    for release_reader in java_readers.every():
        rows = release_reader.read_rows(f"{root}$branch_e")
        assert len(rows) == 1 and "on e" in rows[0], (release_reader.release, rows)
    assert main(["compact", wh, "--table", "db.t$branch_b", "--full"]) == 0
    assert _levels(_open(warehouse, "db.t$branch_b")) == {MAX_LEVEL}
    assert len(reader.read_rows(f"{root}$branch_b")) == len(reader.read_rows(root, tag="t1")) + 1
    assert main(["status", wh, "--table", "db.t", "--branch", "b", "--json"]) == 0
    assert '"db.t$branch_b"' in capsys.readouterr().out

    assert main(["delete-branch", wh, "--table", "db.t", "--branch", "e", "--dry-run"]) == 0
    assert (root / "branch" / "branch-e").is_dir()
    assert main(["delete-branch", wh, "--table", "db.t", "--branch", "e"]) == 0
    assert not (root / "branch" / "branch-e").exists()
    assert _open(warehouse, "db.t").branches() == ["b"]
    assert main(["compact", wh, "--table", "db.t", "--branch", "e"]) == 2
    assert "has no branch 'e' (its branches: b)" in capsys.readouterr().err


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _metadata(root: Path) -> dict[str, bytes]:
    """The main branch's snapshot, schema and tag files (hints left out), by relative path."""
    return {str(p.relative_to(root)): p.read_bytes() for folder in ("snapshot", "schema", "tag")
            for p in sorted((root / folder).glob("*-*"))}


def test_fast_forward_replaces_the_main_history_as_java_does(
        java_maintainer: JavaMaintainer, java_readers: JavaReaders, tmp_path: Path,
        capsys: Any) -> None:
    ours_wh = tmp_path / "ours"
    root = create_table(ours_wh)
    rng = random.Random(3)
    for _ in range(3):
        java_maintainer.write(root, random_rows(rng, 30))
    java_maintainer.tag(root, "t2", 2)
    java_maintainer.tag(root, "t3", 3)
    java_maintainer.create_branch(root, "b", "t2")
    for _ in range(2):
        java_maintainer.write(f"{root}$branch_b", random_rows(rng, 30))
    java_maintainer.write(root, random_rows(rng, 30))
    java_wh = tmp_path / "java"
    shutil.copytree(ours_wh, java_wh)
    java_root = java_wh / "db.db" / "t"
    reader = java_readers.every()[-1]
    branch_rows = sorted(reader.read_rows(f"{root}$branch_b"))

    assert main(["fast-forward", str(ours_wh), "--table", "db.t", "--branch", "b",
                 "--dry-run"]) == 0
    assert "snapshots 2..4 (3) of the main branch replaced" in capsys.readouterr().out
    assert main(["fast-forward", str(ours_wh), "--table", "db.t", "--branch", "b"]) == 2
    assert "pass --yes" in capsys.readouterr().err
    assert main(["fast-forward", str(ours_wh), "--table", "db.t", "--branch", "b",
                 "--yes"]) == 0
    assert "tags deleted: t2, t3; copied: t2" in capsys.readouterr().out
    java_maintainer.fast_forward(java_root, "b")

    assert _metadata(root) == _metadata(java_root)
    for release_reader in java_readers.every():
        assert sorted(release_reader.read_rows(root)) == branch_rows, release_reader.release
    assert _open(ours_wh, "db.t").snapshots.latest_id() == 4
    # Java keeps writing into the fast-forwarded main branch
    assert java_maintainer.write(root, [["+I", 1, 500, "after"]]) == 5
    assert len(reader.read_rows(root)) == len(branch_rows) + 1
    assert main(["fast-forward", str(ours_wh), "--table", "db.t", "--branch", "nope"]) == 2
