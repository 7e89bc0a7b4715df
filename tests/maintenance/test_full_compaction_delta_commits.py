"""``full-compaction.delta-commits``: Java's writers compact fully every N of their commits;
with write-only writers paimond does it, counting writer (APPEND) snapshots since its last full
compaction, which it marks in that snapshot's properties. Checked against a model of the count
on a pypaimon-written table: a full compaction exactly when due (every file then at the top
level), none in between, and the rows always as written."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from pypaimon import Schema
from support.java_reader import JavaReader, canonical_rows
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import catalog_for

from paimond.clock import Clock
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.compact.plan import FULL_COMPACTION_PROPERTY
from paimond.table.catalog import open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

NAME = "db.t"
SCHEMA = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("v", pa.string())])
CLOCK = Clock(fixed_ms=1_700_000_000_000)
EVERY = 3
MAX_LEVEL = 5  # num-levels 6


def _commit(py_table: object, rows: list[dict[str, object]]) -> None:
    builder = py_table.new_batch_write_builder()  # type: ignore[attr-defined]
    write, commit = builder.new_write(), builder.new_commit()
    try:
        write.write_arrow(pa.Table.from_pylist(rows, schema=SCHEMA))
        commit.commit(write.prepare_commit())
    finally:
        write.close()
        commit.close()


def test_a_full_compaction_every_n_writer_commits(tmp_path: Path, java_reader: JavaReader
                                                 ) -> None:
    warehouse = str(tmp_path / "wh")
    catalog = catalog_for(warehouse)
    catalog.create_database("db", True)
    catalog.create_table(NAME, Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
        "bucket": "1", "write-only": "true",
        "full-compaction.delta-commits": str(EVERY)}), False)
    py_table = catalog.get_table(NAME)
    table = open_table(open_storage(warehouse), warehouse, NAME)
    model: dict[int, str] = {}
    since_full = 0  # the model: writer commits since the last full compaction
    fulls = 0
    for commit in range(10):
        rows = [{"id": k, "v": f"c{commit}"} for k in range(commit, commit + 4)]
        _commit(py_table, rows)
        model.update((r["id"], r["v"]) for r in rows)  # type: ignore[misc]
        since_full += 1
        summary = CompactJob(table, clock=CLOCK, use_processes=False).run()
        assert summary.plan is not None
        due = since_full >= EVERY
        assert summary.plan.full == due, f"commit {commit}: {summary.plan.describe()}"
        latest = table.snapshots.latest()
        assert latest is not None
        if due:
            fulls += 1
            since_full = 0
            assert summary.snapshot is not None and latest.id == summary.snapshot.id
            assert (latest.properties or {}).get(FULL_COMPACTION_PROPERTY) == "true"
            assert {f.entry.file.level for f in scan_snapshot(table, latest).files} == {MAX_LEVEL}
            assert "full-compaction.delta-commits" in summary.plan.describe()
            raw = json.loads(Path(table.snapshots.path(latest.id)).read_text())
            assert raw["properties"] == {FULL_COMPACTION_PROPERTY: "true"}  # paimond's marker
            java = java_reader.read_rows(Path(table.path))  # Java parses the marked snapshot
            assert sorted(java) == sorted(canonical_rows(read_rows(warehouse, NAME)))
        else:
            assert summary.snapshot is None, f"commit {commit}: compacted below the trigger"
        expected = pa.Table.from_pylist([{"id": k, "v": v} for k, v in sorted(model.items())],
                                        schema=SCHEMA)
        assert read_rows(warehouse, NAME).equals(expected), f"commit {commit}"
    assert fulls == 10 // EVERY


def test_without_the_option_no_full_compaction_is_due(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    catalog = catalog_for(warehouse)
    catalog.create_database("db", True)
    catalog.create_table(NAME, Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
        "bucket": "1"}), False)
    py_table = catalog.get_table(NAME)
    table = open_table(open_storage(warehouse), warehouse, NAME)
    for commit in range(4):
        _commit(py_table, [{"id": 1, "v": f"c{commit}"}])
        plan = CompactJob(table, clock=CLOCK, use_processes=False).plan()
        assert not plan.full and plan.full_reason is None
