"""Compaction of a ``row-tracking.enabled`` append table: every row keeps its ``_ROW_ID`` and
``_SEQUENCE_NUMBER`` (Java ``rowTypeWithRowTracking`` write type, apache/paimon 5dacde516b).
pypaimon writes the table and reads it back; the row ids of compacted files are checked
against the files themselves (pyarrow), since pypaimon reads ``_ROW_ID`` of a file without
``firstRowId`` as null (Java reads the physical column); Java's reader (1.0, before row
tracking) and pypaimon-rust read the data."""

from __future__ import annotations

import datetime
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.java_reader import JavaReader, canonical_rows
from support.pypaimon_oracle import live_files, read_rows, read_rows_rust
from support.pypaimon_tables import TableWriter, catalog_for, not_null

from paimond.clock import Clock
from paimond.lsm.lookup.deletion_vectors import vector_of
from paimond.maintenance.compact.job import CompactJob
from paimond.table.catalog import open_table
from paimond.table.commit.committer import CommitChanges, Committer
from paimond.table.indexes.deletion_vectors import write_deletion_vectors
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

NOON = datetime.datetime(2026, 11, 22, 12, 0)
CLOCK = Clock(fixed_ms=int(NOON.timestamp() * 1000))
NAME = "db.row_tracking"
SCHEMA = pa.schema([("dt", pa.string()), not_null("id", pa.int64()), ("v", pa.string())])


def _write(writer: TableWriter, start: int, commits: int) -> None:
    for commit in range(start, start + commits):
        writer.commit([{"dt": "a" if i % 3 else "b", "id": commit * 100 + i, "v": f"v{i}"}
                       for i in range(7)])


def _tracked(warehouse: str) -> dict[int, tuple[Any, Any]]:
    """id -> (_ROW_ID, _SEQUENCE_NUMBER) as pypaimon reads them."""
    table = catalog_for(warehouse).get_table(NAME)
    builder = table.new_read_builder().with_projection(["id", "_ROW_ID", "_SEQUENCE_NUMBER"])
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
    return {r["id"]: (r["_ROW_ID"], r["_SEQUENCE_NUMBER"]) for r in rows}


def _from_files(warehouse: str, snapshot_id: int) -> dict[int, tuple[int, int]]:
    """The same from the live files: physical columns where a file has them, else the
    file's firstRowId plus position and its max sequence number."""
    found = {}
    for file in live_files(warehouse, NAME, snapshot_id):
        rows = pq.ParquetFile(file["path"]).read().to_pylist()
        for position, row in enumerate(rows):
            if "_ROW_ID" in row:
                found[row["id"]] = (row["_ROW_ID"], row["_SEQUENCE_NUMBER"])
            else:
                found[row["id"]] = (file["first_row_id"] + position,
                                    file["max_sequence_number"])
    return found


def _two_files(table: Any) -> list[Any]:
    """The first file (by name) of each of the two partitions."""
    files = [f.entry for f in scan_snapshot(table, table.snapshots.latest()).files]
    first = {}
    for entry in sorted(files, key=lambda e: e.file.file_name, reverse=True):
        first[entry.partition] = entry
    assert len(first) == 2
    return list(first.values())


def _delete_rows(table: Any, positions: tuple[int, ...]) -> None:
    added = []
    for entry in _two_files(table):
        vector = vector_of(np.array(positions, dtype=np.int64), bitmap64=False)
        index, _ = write_deletion_vectors(table, {entry.file.file_name: vector},
                                          entry.partition, entry.bucket, bitmap64=False)
        added.append(index)
    Committer(table, commit_kind="APPEND", clock=CLOCK).commit(CommitChanges(index_added=added))


def _ids_deleted(warehouse: str, positions: tuple[int, ...]) -> set[int]:
    table = open_table(open_storage(warehouse), warehouse, NAME)
    return {e.file.first_row_id + p for e in _two_files(table) for p in positions}


@pytest.mark.parametrize("dv", [False, True])
def test_compaction_keeps_row_ids_and_sequences(tmp_path: Path, dv: bool,
                                                java_reader: JavaReader) -> None:
    warehouse = str(tmp_path / "wh")
    options = {"bucket": "-1", "file.format": "parquet", "row-tracking.enabled": "true",
               "compaction.min.file-num": "3"}
    if dv:
        options["deletion-vectors.enabled"] = "true"
    writer = TableWriter(catalog_for(warehouse), NAME, SCHEMA, partition_keys=("dt",),
                     options=options)
    _write(writer, 0, 6)
    table = open_table(open_storage(warehouse), warehouse, NAME)
    if dv:  # rows 0 and 2 of two files deleted: ids count positions before the vectors
        _delete_rows(table, (0, 2))
    before = _tracked(warehouse)
    assert sorted(r for r, _ in before.values()) == [
        i for i in range(42) if not dv or i not in _ids_deleted(warehouse, (0, 2))]
    assert len(before) == 42 - (4 if dv else 0)
    rows_before = read_rows(warehouse, NAME)
    next_row_id = table.snapshots.latest().next_row_id

    summary = CompactJob(table, clock=CLOCK, use_processes=False).run()
    assert summary.snapshot is not None and summary.files_in == 12
    assert summary.files_out == (4 if dv else 2)  # a DV index file's files: a task alone
    assert summary.snapshot.next_row_id == next_row_id == 42
    for result in summary.results:
        for entry in result.added:
            meta = entry.file
            assert meta.first_row_id is None and meta.file_source == 1
            assert meta.write_cols == ("dt", "id", "v", "_ROW_ID", "_SEQUENCE_NUMBER")
            inputs = result.task.inputs
            assert meta.min_sequence_number == min(e.file.max_sequence_number for e in inputs)
            assert meta.max_sequence_number == max(e.file.max_sequence_number for e in inputs)
    assert read_rows(warehouse, NAME).equals(rows_before)
    try:  # pypaimon-rust 0.1 wants firstRowId on every file of a row-tracking table
        rust = read_rows_rust(warehouse, NAME)
        assert rust is None or rust.to_pylist() == rows_before.to_pylist()
    except ValueError as error:
        assert "missing first_row_id" in str(error)
    java = java_reader.read_rows(tmp_path / "wh" / "db.db" / "row_tracking")
    assert Counter(java) == Counter(canonical_rows(rows_before))
    assert _from_files(warehouse, summary.snapshot.id) == before
    # pypaimon fills only missing sequence numbers from the file: the physical ones show
    assert {i: s for i, (_, s) in _tracked(warehouse).items()} == {
        i: s for i, (_, s) in before.items()}

    # new rows get fresh ids; compacting again reads the physical columns back
    _write(writer, 6, 2)
    latest = table.snapshots.latest()
    added = {i: t for i, t in _from_files(warehouse, latest.id).items() if i >= 600}
    assert sorted(r for r, _ in added.values()) == list(range(42, 56))
    again = CompactJob(table, clock=CLOCK, use_processes=False).run()
    assert again.snapshot is not None and again.files_in == (8 if dv else 6)
    assert _from_files(warehouse, again.snapshot.id) == {**before, **added}


def test_a_file_without_ids_is_refused_by_its_task(tmp_path: Path) -> None:
    """A row-tracking file with neither firstRowId nor _ROW_ID cannot keep its ids: the
    task fails naming the file and nothing is committed."""
    warehouse = str(tmp_path / "wh")
    writer = TableWriter(catalog_for(warehouse), NAME, SCHEMA, partition_keys=("dt",),
                     options={"bucket": "-1", "file.format": "parquet",
                              "compaction.min.file-num": "3"})
    _write(writer, 0, 4)
    schema_dir = Path(warehouse) / "db.db" / "row_tracking" / "schema"
    schema = json.loads((schema_dir / "schema-0").read_text())
    schema["options"]["row-tracking.enabled"] = "true"  # files written without row ids
    (schema_dir / "schema-0").write_text(json.dumps(schema))
    table = open_table(open_storage(warehouse), warehouse, NAME)
    latest = table.snapshots.latest()
    summary = CompactJob(table, clock=CLOCK, use_processes=False).run()
    assert summary.snapshot is None and summary.failures
    assert all("firstRowId" in str(f.error) for f in summary.failures)
    assert table.snapshots.latest().id == latest.id
