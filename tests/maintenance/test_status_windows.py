"""``paimond status`` from live files read a window of partitions at a time without statistics
(maintenance.status_windows) gives what the whole scan gives (``table_status`` with
``on_files``, the daemon's path, scans every live entry as status did before): the same JSON,
the same text, the same first missing file."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from support.append_windows import add_vectors, window_count, write_append
from support.streaming_tables import write_synthetic

from paimond.cli.report import render_text
from paimond.table.catalog import Table, open_table
from paimond.table.scan.snapshot_scan import bucket_path, scan_snapshot
from paimond.table.status.report import TableStatus, table_status
from paimond.table.status.windows import windowed_status
from paimond.table.storage.interface import open_storage


def _whole(table: Table, verify: bool) -> TableStatus:
    """The status from the whole scan (``on_files`` takes it)."""
    return table_status(table, verify_files=verify, on_files=lambda files: None)


def assert_status_as_before(table: Table, budgets: tuple[int, ...] = (1,)) -> TableStatus:
    for verify in (False, True):
        before = _whole(table, verify)
        now = table_status(table, verify_files=verify)
        assert now.to_json() == before.to_json()
        assert render_text(now) == render_text(before)
        schema = table.latest_schema()
        snapshot = table.snapshots.latest()
        if snapshot is None or before.error:
            continue
        for budget in budgets:  # more windows than the default gives on a small table
            manifests, buckets = windowed_status(table, schema, snapshot, verify_files=verify,
                                                 budget=budget)
            assert (manifests, buckets) == (before.manifests, before.buckets)
    return table_status(table, verify_files=False)


@pytest.mark.parametrize("name", ["db.pk_deduplicate", "db.pk_deletion_vectors",
                                  "db.append_unaware", "db.append_fixed_bucket",
                                  "db.append_deletion_vectors", "db.all_types_partitioned"])
def test_pypaimon_tables(oracle_warehouse: tuple[str, list[Any]], name: str) -> None:
    warehouse, _ = oracle_warehouse
    table = open_table(open_storage(warehouse), warehouse, name)
    status = assert_status_as_before(table)
    assert status.error is None and status.buckets


def _with_data_files(table: Table, *, but: int = -1) -> None:
    """Empty files for every live data file (not at an external path) and extra file in its
    bucket's directory, all but the ``but``-th live file's."""
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    schema = table.latest_schema()
    for i, live in enumerate(scan_snapshot(table, snapshot).files):
        if i == but:
            continue
        directory = Path(bucket_path(table, schema, live.entry.partition, live.entry.bucket))
        directory.mkdir(parents=True, exist_ok=True)
        for name in (live.meta.file_name, *live.meta.extra_files):
            if not (live.meta.external_path and name == live.meta.file_name):
                (directory / name).touch()


@pytest.mark.parametrize("seed", [1, 2])
def test_synthetic_tables_in_many_windows(tmp_path: Path, seed: int) -> None:
    """Primary-key tables (level-0 files, several levels); with vectors for seed 2."""
    vectors = seed == 2
    options = {"deletion-vectors.enabled": "true", "manifest.merge-min-count": "1000"}
    table = write_synthetic(tmp_path, options if vectors else {}, seed, partitions=40,
                            delta_chunk=2)
    if vectors:
        add_vectors(table, seed)
    assert window_count(table, 300) > 1
    status = assert_status_as_before(table, budgets=(1, 300))
    assert len(status.buckets) == 80 and any(b.levels[0].level == 0 for b in status.buckets)
    assert any(b.files_with_dv for b in status.buckets) == vectors
    _with_data_files(table)
    assert assert_status_as_before(table, budgets=(1, 300)).error is None
    assert table_status(table).error is None


def test_the_first_missing_file_is_the_whole_scans(tmp_path: Path) -> None:
    pristine = write_synthetic(tmp_path / "pristine", {}, 3, partitions=40, delta_chunk=2)
    live = scan_snapshot(pristine, pristine.snapshots.latest()).files  # type: ignore[arg-type]
    for but in (0, len(live) // 3, len(live) - 1):
        shutil.rmtree(tmp_path / "t", ignore_errors=True)
        shutil.copytree(tmp_path / "pristine", tmp_path / "t")
        table = open_table(open_storage(str(tmp_path / "t")), str(tmp_path / "t"), "db.t")
        _with_data_files(table, but=but)
        before = _whole(table, True)
        assert before.error is not None and "MissingFileError" in before.error
        assert table_status(table).error == before.error
        snapshot = table.snapshots.latest()
        assert snapshot is not None
        for budget in (1, 300):
            with pytest.raises(Exception) as raised:
                windowed_status(table, table.latest_schema(), snapshot, verify_files=True,
                                budget=budget)
            assert f"{type(raised.value).__name__}: {raised.value}" == before.error


@pytest.mark.parametrize("options", [{"bucket": "-1"}, {"bucket": "2"}])
def test_append_tables_with_vectors(tmp_path: Path, options: dict[str, str]) -> None:
    table = write_append(tmp_path, {**options, "deletion-vectors.enabled": "true",
                                    "manifest.merge-min-count": "1000"}, 6, partitions=60,
                         delta_chunk=2)
    add_vectors(table, 6)
    assert window_count(table, 300) > 1
    status = assert_status_as_before(table, budgets=(1, 300))
    assert any(b.dv_deleted_rows for b in status.buckets)
    assert any(b.small_files for b in status.buckets)


def test_one_partition_empty_and_snapshotless_tables(tmp_path: Path) -> None:
    one = write_append(tmp_path / "one", {"bucket": "2"}, 7, partitions=1)
    assert len(assert_status_as_before(one).buckets) == 2
    empty = write_append(tmp_path / "empty", {"bucket": "2"}, 7, partitions=0)
    status = assert_status_as_before(empty)
    assert status.buckets == () and status.manifests is not None
    shutil.rmtree(tmp_path / "empty" / "db.db" / "t" / "snapshot")
    (tmp_path / "empty" / "db.db" / "t" / "snapshot").mkdir()
    none = assert_status_as_before(empty)
    assert none.latest_snapshot is None and none.error is None
