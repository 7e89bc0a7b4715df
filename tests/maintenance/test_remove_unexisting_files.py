"""``paimond remove-unexisting-files`` (Java's remove_unexisting_files): after data files are
deleted by hand, readers fail; one OVERWRITE snapshot of DELETE entries drops exactly the missing
files, as Java's own procedure does on a copy, and then pypaimon and every Java release read
the remaining rows. Nothing is deleted from storage; --partition, --dry-run, the confirmation,
a branch and an append table's deletion vectors."""

from __future__ import annotations

import collections
import io
import json
import shutil
from pathlib import Path

import pytest
from pypaimon.schema.schema_change import SchemaChange
from support.dv_scenarios import SCENARIOS, Live
from support.java_maintainer import JavaMaintainer
from support.java_reader import JavaReadError, JavaReaders, canonical_rows
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import (
    build_append_deletion_vectors,
    build_pk_deduplicate,
    catalog_for,
)
from support.table_garbage import unreferenced_files

from paimond.cli.main import main
from paimond.clock import Clock
from paimond.errors import CommitConflictError, RefusedError
from paimond.format.meta.manifest import FILE_KIND_DELETE
from paimond.maintenance.repair.unexisting_files import (
    StaleVector,
    plan_unexisting_files,
    remove_unexisting_files,
)
from paimond.table.branches import create_branch
from paimond.table.catalog import Table, open_table
from paimond.table.layout import partition_text
from paimond.table.scan.snapshot_scan import (
    LiveFile,
    data_file_path,
    read_manifest,
    read_manifest_list,
    scan_snapshot,
)
from paimond.table.storage.interface import open_storage
from paimond.table.tags import create_tag_file

NAME = "db.pk_deduplicate"


def _open(warehouse: Path, name: str = NAME) -> Table:
    return open_table(open_storage(str(warehouse)), str(warehouse), name)


def _live(table: Table) -> list[LiveFile]:
    latest = table.snapshots.latest()
    assert latest is not None
    return scan_snapshot(table, latest).files


def _identity(live: LiveFile) -> tuple[bytes, int, int, str]:
    return (live.entry.partition, live.entry.bucket, live.meta.level, live.meta.file_name)


def _delete_files(table: Table, count: int) -> list[LiveFile]:
    """Delete ``count`` live data files still there by hand, from distinct partitions: a
    storage accident."""
    schema = table.latest_schema()
    chosen: list[LiveFile] = []
    for live in sorted(_live(table), key=_identity):
        if not Path(data_file_path(table, schema, live)).exists():
            continue  # gone already
        if live.entry.partition in {c.entry.partition for c in chosen}:
            continue
        chosen.append(live)
        if len(chosen) == count:
            break
    for live in chosen:
        Path(data_file_path(table, schema, live)).unlink()
    return chosen


def _files_on_disk(warehouse: Path) -> set[str]:
    return {str(p.relative_to(warehouse)) for p in warehouse.rglob("*") if p.is_file()
            and ".paimond" not in p.parts}


def test_the_missing_files_dropped_as_java_drops_them(
        tmp_path: Path, java_maintainer: JavaMaintainer, java_readers: JavaReaders) -> None:
    ours, javas = tmp_path / "ours", tmp_path / "java"
    build_pk_deduplicate(str(ours))
    table = _open(ours)
    before = _live(table)
    gone = _delete_files(table, 2)
    shutil.copytree(ours, javas)
    with pytest.raises(FileNotFoundError):
        read_rows(str(ours), NAME)
    for reader in java_readers.every():
        with pytest.raises(JavaReadError):
            reader.read_rows(table.path)
    on_disk = _files_on_disk(ours)

    assert main(["remove-unexisting-files", str(ours), "--table", NAME, "--yes"]) == 0
    java_latest = java_maintainer.remove_unexisting_files(_open(javas).path)

    # exactly the missing files' entries are gone, as in Java's commit
    latest = table.snapshots.latest()
    assert latest is not None and latest.id == java_latest == 7
    java_snapshot = _open(javas).snapshots.latest()
    assert java_snapshot is not None
    assert latest.commit_kind == java_snapshot.commit_kind == "OVERWRITE"
    assert sorted(map(_identity, _live(table))) == sorted(
        set(map(_identity, before)) - set(map(_identity, gone)))
    assert sorted(map(_identity, _live(table))) == sorted(map(_identity, _live(_open(javas))))
    delta = [e for m in read_manifest_list(table, latest.delta_manifest_list, "test")
             for e in read_manifest(table, m, "test")]
    assert sorted((e.kind, e.file.file_name) for e in delta) == sorted(
        (FILE_KIND_DELETE, g.meta.file_name) for g in gone)
    assert latest.delta_record_count == -sum(g.meta.row_count for g in gone)
    # nothing deleted; only the new snapshot's metadata written
    assert on_disk <= _files_on_disk(ours)
    # the remaining rows read, by every reader alike
    rows = read_rows(str(ours), NAME)
    assert rows.equals(read_rows(str(javas), NAME))
    expected = collections.Counter(canonical_rows(rows, list(rows.schema.names)))
    for reader in java_readers.every():
        assert collections.Counter(reader.read_rows(table.path)) == expected, reader.release
    # a rerun finds nothing missing and commits nothing
    assert main(["remove-unexisting-files", str(ours), "--table", NAME, "--yes"]) == 0
    assert table.snapshots.latest_id() == 7


def test_partition_dry_run_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    warehouse = tmp_path / "wh"
    build_pk_deduplicate(str(warehouse))
    table = _open(warehouse)
    schema = table.latest_schema()
    gone = _delete_files(table, 2)
    first = partition_text(schema, gone[0].entry.partition)
    key_values = [f"--partition={pair}" for pair in first.split("/")]

    assert main(["remove-unexisting-files", str(warehouse), "--table", NAME, "--dry-run",
                 "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["dry_run"] and shown["snapshot_id"] is None and shown["base_snapshot_id"] == 6
    assert sorted(f["file_name"] for f in shown["missing"]) == sorted(
        g.meta.file_name for g in gone)
    assert table.snapshots.latest_id() == 6

    assert main(["remove-unexisting-files", str(warehouse), "--table", NAME, *key_values,
                 "--yes", "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert [(f["partition"], f["file_name"]) for f in done["missing"]] == [
        (first, gone[0].meta.file_name)]
    assert done["snapshot_id"] == 7
    names = {live.meta.file_name for live in _live(table)}
    assert gone[0].meta.file_name not in names and gone[1].meta.file_name in names
    with pytest.raises(FileNotFoundError):
        read_rows(str(warehouse), NAME)  # the other partition's file is still missing

    assert main(["remove-unexisting-files", str(warehouse), "--table", NAME,
                 "--partition", "nope=1", "--yes"]) == 2


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_asks_before_dropping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    warehouse = tmp_path / "wh"
    build_pk_deduplicate(str(warehouse))
    table = _open(warehouse)
    gone = _delete_files(table, 1)
    argv = ["remove-unexisting-files", str(warehouse), "--table", NAME]

    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # not a terminal, no --yes
    assert main(argv) == 2
    assert "--yes" in capsys.readouterr().err

    monkeypatch.setattr("sys.stdin", _Terminal("n\n"))
    assert main(argv) == 1  # declined: nothing changed
    err = capsys.readouterr().err
    assert gone[0].meta.file_name in err and "declined: nothing changed" in err
    assert table.snapshots.latest_id() == 6

    monkeypatch.setattr("sys.stdin", _Terminal("y\n"))
    assert main(argv) == 0
    assert "dropped by snapshot 7" in capsys.readouterr().out
    assert gone[0].meta.file_name not in {live.meta.file_name for live in _live(table)}


def test_on_a_branch(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    build_pk_deduplicate(str(warehouse))
    main_table = _open(warehouse)
    latest = main_table.snapshots.latest()
    assert latest is not None
    assert create_tag_file(main_table, "t6", latest, create_time=None, time_retained_ns=None)
    create_branch(main_table, "b", "t6")
    branch = main_table.on_branch("b")
    gone = _delete_files(main_table, 1)

    assert main(["remove-unexisting-files", str(warehouse), "--table", NAME, "--branch", "b",
                 "--yes"]) == 0
    assert branch.snapshots.latest_id() == 7 and main_table.snapshots.latest_id() == 6
    assert gone[0].meta.file_name not in {live.meta.file_name for live in _live(branch)}
    assert gone[0].meta.file_name in {live.meta.file_name for live in _live(main_table)}
    read_rows(str(warehouse), f"{NAME}$branch_b")


def test_a_deletion_vector_of_a_dropped_file(tmp_path: Path) -> None:
    """A primary-key table keeps the vector in its index file, as Java does."""
    live = Live(SCENARIOS[0], str(tmp_path / "wh"))
    live.write(60)
    live.compact(full=True)
    live.write(30)
    live.compact(full=False)
    table = _open(tmp_path / "wh", live.name)
    latest = table.snapshots.latest()
    assert latest is not None
    files = scan_snapshot(table, latest)
    vectors = {dv.data_file_name: e.index_file.file_name for e in files.index_entries
               for dv in e.index_file.dv_ranges or ()}
    assert vectors, "the scenario writes deletion vectors"
    victim = next(f for f in files.files if f.meta.file_name in vectors)
    Path(data_file_path(table, table.latest_schema(), victim)).unlink()

    plan = plan_unexisting_files(table)
    assert plan.stale_vectors == (StaleVector(vectors[victim.meta.file_name],
                                              victim.meta.file_name),)
    result = remove_unexisting_files(table, plan, Clock(fixed_ms=1_700_000_000_000))
    assert result.snapshot_id == latest.id + 1
    after = table.snapshots.latest()
    assert after is not None and after.index_manifest == latest.index_manifest
    read_rows(str(tmp_path / "wh"), live.name)  # reads again


def test_an_append_table_refuses_a_vector_of_a_dropped_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    warehouse = tmp_path / "wh"
    name = build_append_deletion_vectors(str(warehouse)).name
    table = _open(warehouse, name)
    latest = table.snapshots.latest()
    assert latest is not None
    files = scan_snapshot(table, latest)
    with_vector = {dv.data_file_name for e in files.index_entries
                   for dv in e.index_file.dv_ranges or ()}
    victim = next(f for f in files.files if f.meta.file_name in with_vector)
    Path(data_file_path(table, table.latest_schema(), victim)).unlink()

    with pytest.raises(RefusedError, match="deletion vector of missing data file"):
        plan_unexisting_files(table)
    assert main(["remove-unexisting-files", str(warehouse), "--table", name, "--yes"]) == 1
    assert victim.meta.file_name in capsys.readouterr().err
    assert table.snapshots.latest_id() == latest.id


def test_a_commit_since_the_plan(tmp_path: Path) -> None:
    """A commit between the plan and the drop: the table is planned again and the same files
    dropped; a new plan that would drop another file fails, and commits nothing."""
    warehouse = tmp_path / "wh"
    build_pk_deduplicate(str(warehouse))
    table = _open(warehouse)
    clock = Clock(fixed_ms=1_700_000_000_000)
    gone = _delete_files(table, 1)
    plan = plan_unexisting_files(table)
    assert main(["merge-manifests", str(warehouse), "--table", NAME]) == 0  # snapshot 7
    result = remove_unexisting_files(table, plan, clock)
    assert (result.base_snapshot_id, result.snapshot_id) == (7, 8)
    assert [m.file_name for m in result.missing] == [gone[0].meta.file_name]

    more = _delete_files(table, 1)
    plan = plan_unexisting_files(table)
    also = _delete_files(table, 1)
    assert also[0].meta.file_name != more[0].meta.file_name
    assert main(["merge-manifests", str(warehouse), "--table", NAME]) == 0  # snapshot 9
    with pytest.raises(CommitConflictError, match=also[0].meta.file_name):
        remove_unexisting_files(table, plan, clock)
    assert table.snapshots.latest_id() == 9
    assert unreferenced_files(str(warehouse), NAME) == []


def test_a_chain_table_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    build_pk_deduplicate(str(warehouse))
    catalog_for(str(warehouse)).alter_table(
        NAME, [SchemaChange.set_option("chain-table.enabled", "true")], False)
    table = _open(warehouse)
    _delete_files(table, 1)
    latest = table.snapshots.latest_id()

    with pytest.raises(RefusedError, match="chain tables"):
        plan_unexisting_files(table)
    assert main(["remove-unexisting-files", str(warehouse), "--table", NAME, "--yes"]) == 1
    assert table.snapshots.latest_id() == latest
