"""Expiration on a pypaimon-written primary-key table after several compactions: pypaimon
reads every kept snapshot, tag and branch exactly as before (time travel), expired snapshots
are gone, nothing unreferenced is left; a crash after any single deletion leaves the kept
snapshots readable and a rerun ends where an uninterrupted run ends; dry runs change nothing."""

from __future__ import annotations

import dataclasses
import datetime
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import (
    build_append_deletion_vectors,
    build_pk_deduplicate,
    catalog_for,
    sort_columns_of,
    sort_rows,
)
from support.table_history import (
    CrashAfterDeletes,
    assert_exactly_referenced,
    tree,
    write_consumer,
)

from paimond.cli.main import main
from paimond.clock import SYSTEM_CLOCK, Clock
from paimond.errors import UnsupportedError
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.table.catalog import Table, open_table
from paimond.table.scan.snapshot_scan import read_manifest_list, scan_snapshot, verify_data_files
from paimond.table.storage.interface import open_storage

FAR_FUTURE_MS = 4_102_444_800_000  # 2100-01-01: every snapshot is older than any retention
FAR_FUTURE = Clock(fixed_ms=FAR_FUTURE_MS)
EVERYTHING_OLD = ExpireSettings(retain_min=1, time_retained_ms=0, max_deletes=1000)


def _write(warehouse: str, name: str, ids: range, version: str) -> None:
    table = catalog_for(warehouse).get_table(name)
    schema = pa.schema([pa.field("day", pa.date32(), nullable=False),
                        pa.field("tag", pa.string(), nullable=False),
                        pa.field("id", pa.int32(), nullable=False), ("v", pa.string()),
                        ("score", pa.float64()), ("rk", pa.string())])
    rows = [{"day": datetime.date(2024, 1, 1), "tag": "plain", "id": i, "v": version,
             "score": float(i), "rk": "+I"} for i in ids]
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.Table.from_pylist(rows, schema=schema))
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


@dataclasses.dataclass(frozen=True)
class Pristine:
    warehouse: Path
    name: str
    rows: dict[int, pa.Table]  # pypaimon's read of every snapshot before expiration


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    """Six pypaimon commits, a minor compaction, two commits, a full compaction, a commit and
    a minor compaction: level-0 files, upgrades and rewrites in the history."""
    warehouse = tmp_path_factory.mktemp("expire") / "wh"
    spec = build_pk_deduplicate(str(warehouse))
    storage = open_storage(str(warehouse))
    table = open_table(storage, storage.root, spec.name)

    def compact(full: bool) -> None:
        CompactJob(table, clock=SYSTEM_CLOCK, full=full, use_processes=False).run()

    compact(False)
    _write(str(warehouse), spec.name, range(0, 20), "a")
    _write(str(warehouse), spec.name, range(10, 30), "b")
    compact(True)
    _write(str(warehouse), spec.name, range(5, 15), "c")
    compact(False)
    rows = {i: read_rows(str(warehouse), spec.name, snapshot_id=i)
            for i in table.snapshots.list_ids()}
    assert len(rows) >= 10
    return Pristine(warehouse, spec.name, rows)


@pytest.fixture
def copy(pristine: Pristine, tmp_path: Path) -> tuple[str, Table]:
    warehouse = tmp_path / "wh"
    shutil.copytree(pristine.warehouse, warehouse)
    storage = open_storage(str(warehouse))
    return str(warehouse), open_table(storage, storage.root, pristine.name)


def _read(warehouse: str, name: str, options: dict[str, str]) -> pa.Table:
    table = catalog_for(warehouse).get_table(name).copy(options)
    builder = table.new_read_builder()
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    return sort_rows(rows, sort_columns_of(rows.schema, table.primary_keys))


def _expire(table: Table, settings: ExpireSettings = EVERYTHING_OLD, **kw: Any) -> Any:
    return ExpireJob(table, clock=FAR_FUTURE, settings=settings, **kw).run()


def test_kept_snapshots_read_as_before_and_expired_ones_are_gone(
        pristine: Pristine, copy: tuple[str, Table]) -> None:
    warehouse, table = copy
    ids = table.snapshots.list_ids()
    result = _expire(table, dataclasses.replace(EVERYTHING_OLD, retain_min=4))
    kept = table.snapshots.list_ids()
    assert kept == ids[-4:] and result.work.end_id == kept[0]
    assert table.snapshots.read_hint("EARLIEST") == kept[0]
    assert result.deleted.files["data"] > 0 and result.deleted.files["snapshot"] == len(ids) - 4
    for snapshot_id in kept:
        assert read_rows(warehouse, pristine.name, snapshot_id=snapshot_id).equals(
            pristine.rows[snapshot_id])
    for snapshot_id in ids[:-4]:
        with pytest.raises(ValueError, match="doesn't exist"):
            read_rows(warehouse, pristine.name, snapshot_id=snapshot_id)
    assert_exactly_referenced(table)
    again = _expire(table, dataclasses.replace(EVERYTHING_OLD, retain_min=4))
    assert again.deleted.total_files == 0 and table.snapshots.list_ids() == kept


def test_tags_and_consumers_keep_their_snapshots_readable(
        pristine: Pristine, copy: tuple[str, Table]) -> None:
    warehouse, table = copy
    ids = table.snapshots.list_ids()
    pypaimon_table = catalog_for(warehouse).get_table(pristine.name)
    pypaimon_table.create_tag("early", 2)
    pypaimon_table.create_tag("middle", 7)
    write_consumer(table, "reader", 8)

    result = _expire(table)
    assert table.snapshots.list_ids() == ids[ids.index(8):] and result.plan.bound == "consumer"
    for snapshot_id in table.snapshots.list_ids():
        assert read_rows(warehouse, pristine.name, snapshot_id=snapshot_id).equals(
            pristine.rows[snapshot_id])

    (Path(table.path) / "consumer" / "consumer-reader").unlink()
    result = _expire(table)
    assert table.snapshots.list_ids() == [ids[-1]]
    assert result.work.protected_data_files > 0, "tags kept retired files"
    for tag, snapshot_id in (("early", 2), ("middle", 7)):
        assert _read(warehouse, pristine.name, {"scan.tag-name": tag}).equals(
            pristine.rows[snapshot_id])
    assert_exactly_referenced(table)


def test_a_branch_keeps_the_files_of_its_snapshots(
        pristine: Pristine, copy: tuple[str, Table]) -> None:
    warehouse, table = copy
    pypaimon_table = catalog_for(warehouse).get_table(pristine.name)
    pypaimon_table.create_tag("base", 3)
    pypaimon_table.branch_manager().create_branch("side", "base")
    assert pypaimon_table.delete_tag("base")  # only the branch holds snapshot 3 now
    _expire(table)
    assert _read(warehouse, pristine.name, {"branch": "side"}).equals(pristine.rows[3])
    assert read_rows(warehouse, pristine.name).equals(pristine.rows[max(pristine.rows)])


def test_dry_run_changes_nothing_and_predicts_the_run(copy: tuple[str, Table]) -> None:
    _, table = copy
    before = tree(table.path)
    predicted = _expire(table, dry_run=True)
    assert tree(table.path) == before
    assert predicted.deleted.total_files > 0 and "would delete" in predicted.describe()
    done = _expire(table)
    assert done.deleted.files == predicted.deleted.files
    assert done.deleted.size_bytes == predicted.deleted.size_bytes


class _Recording:
    def __init__(self, inner: Any) -> None:
        self._inner, self.log = inner, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def delete(self, path: str) -> bool:
        self.log.append(("delete", path))
        return bool(self._inner.delete(path))

    def delete_many(self, paths: Any, on_deleted: Any = None) -> None:
        for path in paths:
            self.log.append(("delete", path))
            self._inner.delete_many([path], on_deleted)

    def write_bytes(self, path: str, data: bytes) -> None:
        self.log.append(("write", path))
        self._inner.write_bytes(path, data)


def _stage(op: str, path: str) -> int:
    """The record, EARLIEST, snapshot files, data files, manifests, the record's removal."""
    if "/.paimond/expirations/" in path:
        return 0 if op == "write" else 5
    if path.endswith("/EARLIEST"):
        return 1
    if path.rsplit("/", 1)[-1].startswith("snapshot-"):
        return 2
    return 3 if "/bucket-" in path else 4


def test_record_earliest_snapshots_then_what_only_they_named(copy: tuple[str, Table]) -> None:
    _, table = copy
    named: dict[str, set[str]] = {}  # manifest list -> the manifests it names
    for snapshot_id in table.snapshots.list_ids():
        snapshot = table.snapshots.load(snapshot_id)
        for name in snapshot.manifest_lists():
            named[name] = {m.file_name for m in read_manifest_list(table, name, "test")}
    recording = _Recording(table.storage)
    _expire(dataclasses.replace(table, storage=recording))
    stages = [_stage(op, path) for op, path in recording.log]
    assert stages == sorted(stages) and set(stages) == {0, 1, 2, 3, 4, 5}
    deleted = [path for op, path in recording.log if _stage(op, path) == 2]
    assert deleted == sorted(deleted, key=lambda p: int(p.rsplit("-", 1)[-1]))  # ascending
    order = {path.rsplit("/", 1)[-1]: i for i, (op, path) in enumerate(recording.log)
             if op == "delete"}
    lists = [name for name in order if name in named]
    assert lists
    for name in lists:  # a list goes after every manifest it names that goes too
        assert all(order[m] < order[name] for m in named[name] if m in order)


def _readable(table: Table, snapshot_ids: list[int]) -> None:
    """Every data file of the given snapshots and of every tag is on storage."""
    schema = table.latest_schema()
    snapshots = [table.snapshots.load(i) for i in snapshot_ids] + list(table.tags().values())
    for snapshot in snapshots:
        verify_data_files(table, schema, scan_snapshot(table, snapshot))


def test_a_crash_after_any_deletion_keeps_kept_snapshots_readable_and_a_rerun_converges(
        pristine: Pristine, tmp_path: Path) -> None:
    def fresh(name: str) -> tuple[str, Table]:
        warehouse = tmp_path / name
        shutil.copytree(pristine.warehouse, warehouse)
        storage = open_storage(str(warehouse))
        table = open_table(storage, storage.root, pristine.name)
        catalog_for(str(warehouse)).get_table(pristine.name).create_tag("kept", 4)
        return str(warehouse), table

    settings = dataclasses.replace(EVERYTHING_OLD, retain_min=3)
    _, reference = fresh("reference")
    counting = CrashAfterDeletes(reference.storage, None)
    _expire(dataclasses.replace(reference, storage=counting), settings)
    final, kept = tree(reference.path), reference.snapshots.list_ids()
    assert counting.deleted > 20
    for limit in range(1, counting.deleted + 1):
        warehouse, table = fresh(f"crash-{limit}")
        with pytest.raises(CrashAfterDeletes.Crash):
            _expire(dataclasses.replace(table, storage=CrashAfterDeletes(table.storage, limit)),
                    settings)
        _readable(table, kept)
        if limit % 25 == 1:  # pypaimon too, now and then (it is slower)
            assert read_rows(warehouse, pristine.name).equals(pristine.rows[kept[-1]])
            assert _read(warehouse, pristine.name, {"scan.tag-name": "kept"}).equals(
                pristine.rows[4])
        _expire(table, settings)
        assert tree(table.path) == final, f"rerun after a crash at deletion {limit}"
        shutil.rmtree(warehouse)


def test_cli_prints_the_range_and_the_files(copy: tuple[str, Table],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    warehouse, table = copy
    ids = table.snapshots.list_ids()
    args = ["expire-snapshots", warehouse, "--table", table.name, "--retain-min", "2",
            "--older-than", "2000-01-01 00:00:00"]
    assert main([*args, "--dry-run"]) == 0
    assert "no snapshot to expire" in capsys.readouterr().out  # nothing is that old
    assert main([*args[:-2], "--older-than", "0 s", "--max-deletes", "3"]) == 0
    out = capsys.readouterr().out
    assert f"expired snapshots {ids[0]}..{ids[2]} (3); kept {ids[3]}..{ids[-1]}" in out
    assert "snapshot            3 files" in out and "manifest-list" in out
    with pytest.raises(SystemExit) as refused:  # argparse refuses it, naming the flag
        main([*args[:-2], "--retain-min", "0"])
    assert refused.value.code == 2
    assert "--retain-min: must be an integer >= 1" in capsys.readouterr().err


def test_long_lived_changelogs_without_decoupled_retention_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A decoupled table expires (tests/maintenance/test_changelog_expire.py); changelog files
    on a table whose options no longer decouple them are Paimon's expire_changelogs' work."""
    warehouse = str(tmp_path / "wh")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    catalog = catalog_for(warehouse)
    catalog.create_database("db", True)
    from pypaimon import Schema

    catalog.create_table("db.decoupled", Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": "1", "changelog.num-retained.min": "50"}),
        False)
    assert main(["expire-snapshots", warehouse, "--table", "db.decoupled"]) == 0
    storage = open_storage(warehouse)
    table = open_table(storage, storage.root, "db.decoupled")
    storage.write_bytes(table.file_path("changelog", "changelog-1"), b"{}")
    with pytest.raises(UnsupportedError, match="long-lived changelogs"):
        ExpireJob(table, clock=FAR_FUTURE,
                  settings=ExpireSettings(retain_min=60)).run()


def test_replaced_deletion_vector_index_files_go_with_their_snapshots(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    spec = build_append_deletion_vectors(warehouse)  # two delete_by_row_id commits: DV files
    storage = open_storage(warehouse)
    table = open_table(storage, storage.root, spec.name)
    latest = table.snapshots.latest()
    assert latest is not None and latest.index_manifest
    rows = read_rows(warehouse, spec.name)
    result = _expire(table)
    assert table.snapshots.list_ids() == [latest.id]
    assert result.deleted.files["index"] > 0 and result.deleted.files["index-manifest"] > 0
    assert read_rows(warehouse, spec.name).equals(rows)
    assert_exactly_referenced(table)
