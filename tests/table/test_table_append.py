"""The test-side append helper produces snapshots pypaimon reads (re-adding existing files)."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
from support.pypaimon_oracle import live_files, read_rows
from support.pypaimon_tables import build_append_unaware
from support.table_append import append_files

from paimond.table.catalog import open_table
from paimond.table.scan.snapshot_scan import data_file_path, scan_snapshot
from paimond.table.storage.interface import open_storage


def test_appending_copies_of_files_adds_their_rows_for_pypaimon(tmp_path) -> None:  # type: ignore[no-untyped-def]
    warehouse = str(tmp_path / "wh")
    spec = build_append_unaware(warehouse)
    table = open_table(open_storage(warehouse), warehouse, spec.name)
    latest = table.snapshots.latest()
    assert latest is not None
    before = read_rows(warehouse, spec.name)
    schema = table.latest_schema()
    copies = []
    for live in scan_snapshot(table, table.snapshots.load(1)).files:
        source = data_file_path(table, schema, live)
        copy = dataclasses.replace(live.meta, file_name="copy-" + live.meta.file_name)
        table.storage.write_bytes(source.replace(live.meta.file_name, copy.file_name),
                                  table.storage.read_bytes(source))
        copies.append((live.entry.partition, live.entry.bucket, live.entry.total_buckets, copy))
    new_id = append_files(table, copies)
    assert new_id == latest.id + 1
    after = read_rows(warehouse, spec.name)
    first_rows = read_rows(warehouse, spec.name, snapshot_id=1)
    assert after.num_rows == before.num_rows + first_rows.num_rows
    expected = pa.concat_tables([before, first_rows]).sort_by(
        [(c, "ascending") for c in spec.sort_columns])
    assert after.sort_by([(c, "ascending") for c in spec.sort_columns]).equals(expected)
    latest = scan_snapshot(table, table.snapshots.latest())
    assert len(live_files(warehouse, spec.name, new_id)) == len(latest.files)
