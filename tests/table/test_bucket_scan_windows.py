"""What the planners rely on across windows of partitions (table.bucket_scan): where each live
file was added orders the live files as ``scan_snapshot`` lists them, entries kept whole are
the whole scan's, and row counts come through the statistics-free records."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.append_windows import window_count, write_append
from support.streaming_tables import write_synthetic

from paimond.table.catalog import Table
from paimond.table.scan.bucket_scan import scan_live_windows
from paimond.table.scan.snapshot_scan import scan_snapshot


def _check(table: Table, budget: int, cap: int) -> None:
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    whole = scan_snapshot(table, snapshot).files
    by_id = {f.entry.identifier: f.entry for f in whole}
    listed, kept = [], 0
    for live in scan_live_windows(table, snapshot, table.latest_schema(), budget=budget,
                                  whole=lambda e: e.file_size % 3 == 0, whole_cap=cap):
        for files in live.buckets():
            for f in files.files:
                origin = live.origin(f.entry)
                listed.append((origin, f.entry.identifier))
                assert f.meta.row_count == by_id[f.entry.identifier].file.row_count
                if origin in live.whole:
                    kept += 1
                    assert live.whole[origin] == by_id[f.entry.identifier]
        assert len(live.whole) <= cap
    assert [i for _, i in sorted(listed)] == [f.entry.identifier for f in whole]
    assert kept > 0


@pytest.mark.parametrize("budget", [1, 300, 200_000])
def test_primary_key_table(tmp_path: Path, budget: int) -> None:
    table = write_synthetic(tmp_path, {}, 7, partitions=40, delta_chunk=2)
    assert window_count(table, 300) > 1
    _check(table, budget, 50)


@pytest.mark.parametrize("budget", [1, 300])
def test_append_table(tmp_path: Path, budget: int) -> None:
    table = write_append(tmp_path, {"bucket": "2"}, 7, partitions=60, delta_chunk=2)
    _check(table, budget, 10_000)
