"""Manifest merging on pypaimon-written tables (pypaimon never merges): ``merge-manifests``
commits a COMPACT snapshot with an empty delta that pypaimon reads like the previous latest;
every earlier snapshot reads as before; the manifest count drops as Paimon's rules say, also
when a compaction commit merges (min count 30) or fully compacts (threshold) on the way; a
commit racing the merge survives; a dry run changes nothing."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pypaimon import Schema
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import catalog_for
from support.table_history import tree

from paimond.cli.main import main
from paimond.clock import SYSTEM_CLOCK, Clock
from paimond.format.meta.manifest import FILE_KIND_DELETE
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.manifests import ManifestMergeJob
from paimond.table.catalog import Table, open_table
from paimond.table.scan.snapshot_scan import read_manifest, read_manifest_list
from paimond.table.storage.interface import open_storage

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def _table(warehouse: str, name: str, options: dict[str, str]) -> Any:
    catalog = catalog_for(warehouse)
    catalog.create_database("db", True)
    catalog.create_table(name, Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"],
                                                          options=options), False)
    return catalog.get_table(name)


def _commit(table: Any, ids: range, version: int) -> None:
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.table({"id": list(ids), "v": [f"v{version}"] * len(ids)}, schema=SCHEMA))
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def _build(warehouse: Path, name: str, commits: int, options: dict[str, str] | None = None) -> None:
    table = _table(str(warehouse), name, {"bucket": "2", **(options or {})})
    for i in range(commits):
        _commit(table, range(i * 3, i * 3 + 8), i)  # overlapping keys: updates


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    warehouse = tmp_path_factory.mktemp("manifests") / "wh"
    _build(warehouse, "db.many", 31)
    _build(warehouse, "db.below", 28)
    _build(warehouse, "db.threshold", 6, {"manifest.full-compaction-threshold-size": "1 kb"})
    return warehouse


@pytest.fixture
def warehouse(pristine: Path, tmp_path: Path) -> str:
    copy = tmp_path / "wh"
    shutil.copytree(pristine, copy)
    return str(copy)


def _open(warehouse: str, name: str) -> Table:
    storage = open_storage(warehouse)
    return open_table(storage, storage.root, name)


def _manifests(table: Table, snapshot_id: int) -> tuple[list[Any], list[Any]]:
    snapshot = table.snapshots.load(snapshot_id)
    where = table.snapshots.path(snapshot_id)
    return (read_manifest_list(table, snapshot.base_manifest_list, where),
            read_manifest_list(table, snapshot.delta_manifest_list, where))


def _all_rows(warehouse: str, name: str, table: Table) -> dict[int, pa.Table]:
    return {i: read_rows(warehouse, name, snapshot_id=i) for i in table.snapshots.list_ids()}


def test_merge_manifests_commits_one_compact_snapshot_that_reads_the_same(
        warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    table = _open(warehouse, "db.many")
    before_rows = _all_rows(warehouse, "db.many", table)
    latest = table.snapshots.latest()
    assert latest is not None
    base, delta = _manifests(table, latest.id)
    assert len(base) + len(delta) == 31  # pypaimon: one manifest per commit, never merged

    assert main(["merge-manifests", warehouse, "--table", "db.many"]) == 0
    out = capsys.readouterr().out
    assert f"manifests of snapshot {latest.id} merged into snapshot {latest.id + 1}" in out
    assert "manifest files 31 -> 1" in out

    merged = table.snapshots.latest()
    assert merged is not None and merged.id == latest.id + 1
    assert merged.commit_kind == "COMPACT" and merged.delta_record_count == 0
    assert merged.total_record_count == latest.total_record_count
    assert merged.schema_id == latest.schema_id and merged.index_manifest == latest.index_manifest
    base, delta = _manifests(table, merged.id)
    assert len(base) == 1 and delta == []
    entries = read_manifest(table, base[0], "test")
    assert all(e.kind != FILE_KIND_DELETE for e in entries)  # full compaction: no DELETEs left
    for snapshot_id, rows in before_rows.items():
        assert read_rows(warehouse, "db.many", snapshot_id=snapshot_id).equals(rows)
    assert read_rows(warehouse, "db.many").equals(before_rows[latest.id])

    assert main(["merge-manifests", warehouse, "--table", "db.many"]) == 0
    assert "need no merging" in capsys.readouterr().out
    assert table.snapshots.latest_id() == merged.id


def test_dry_run_changes_nothing(warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    table = _open(warehouse, "db.many")
    before = tree(table.path)
    assert main(["merge-manifests", warehouse, "--table", "db.many", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would be merged" in out and "manifest files 31 -> 1" in out
    assert tree(table.path) == before


def test_a_compaction_commit_merges_from_thirty_manifests_on(warehouse: str) -> None:
    for name, expected_base in (("db.many", 1), ("db.below", 28)):
        table = _open(warehouse, name)
        latest_id = table.snapshots.latest_id()
        assert latest_id is not None
        rows = read_rows(warehouse, name)
        summary = CompactJob(table, clock=SYSTEM_CLOCK, full=True, use_processes=False).run()
        assert summary.snapshot is not None and summary.snapshot.id == latest_id + 1
        base, delta = _manifests(table, summary.snapshot.id)
        # Minor merge: the trailing run of small manifests merges once it has 30 files.
        assert len(base) == expected_base and len(delta) == 1, name
        assert read_rows(warehouse, name).equals(rows)
        assert read_rows(warehouse, name, snapshot_id=latest_id).equals(rows)


def test_a_commit_fully_compacts_manifests_past_the_threshold(warehouse: str) -> None:
    table = _open(warehouse, "db.threshold")
    rows = read_rows(warehouse, "db.threshold")
    first = CompactJob(table, clock=SYSTEM_CLOCK, full=True, use_processes=False).run().snapshot
    assert first is not None
    base, _ = _manifests(table, first.id)
    assert len(base) == 1  # six small manifests > 1 KiB: full compaction into one
    second = CompactJob(table, clock=SYSTEM_CLOCK, full=True, use_processes=False)
    _commit(catalog_for(warehouse).get_table("db.threshold"), range(0, 5), 99)
    snapshot = second.run().snapshot
    assert snapshot is not None
    base, _ = _manifests(table, snapshot.id)
    entries = [e for m in base for e in read_manifest(table, m, "test")]
    assert all(e.kind != FILE_KIND_DELETE for e in entries)  # the compaction's DELETEs cancelled
    assert read_rows(warehouse, "db.threshold", snapshot_id=first.id).equals(rows)


class _Racing:
    """Lets pypaimon commit right before our snapshot create, once."""

    def __init__(self, inner: Any, race: Any) -> None:
        self._inner, self._race = inner, race

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create_exclusive(self, path: str, data: bytes) -> bool:
        if self._race is not None and "/snapshot/snapshot-" in path:
            race, self._race = self._race, None
            race()
        return bool(self._inner.create_exclusive(path, data))


def test_a_commit_racing_the_merge_is_kept(warehouse: str) -> None:
    table = _open(warehouse, "db.many")
    latest_id = table.snapshots.latest_id()
    assert latest_id is not None
    writer = catalog_for(warehouse).get_table("db.many")
    racing = dataclasses.replace(table, storage=_Racing(table.storage,
                                                        lambda: _commit(writer, range(500, 505), 7)))
    result = ManifestMergeJob(racing, clock=Clock(fixed_ms=1_700_000_000_000)).run()
    assert result.base_snapshot_id == latest_id + 1 and result.snapshot_id == latest_id + 2
    assert read_rows(warehouse, "db.many").equals(read_rows(warehouse, "db.many",
                                                            snapshot_id=latest_id + 1))
    assert 500 in read_rows(warehouse, "db.many").column("id").to_pylist()
    referenced = set()
    for snapshot_id in table.snapshots.list_ids():
        snapshot = table.snapshots.load(snapshot_id)
        referenced |= set(snapshot.manifest_lists())
        for name in snapshot.manifest_lists():
            referenced |= {m.file_name for m in read_manifest_list(table, name, "test")}
    on_disk = {p.name for p in (Path(table.path) / "manifest").iterdir()}
    assert on_disk == referenced, "the lost attempt's manifests were removed"
