"""`compact` on pypaimon-written tables: pypaimon reads the same rows before and after,
every earlier snapshot is unchanged, and a full compaction leaves one sorted run per bucket
at the max level with no deletes."""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path
from typing import Any

import pytest
from pypaimon_oracle import read_rows, read_rows_rust
from pypaimon_tables import (
    build_all_types_pk,
    build_pk_aggregation,
    build_pk_deduplicate,
    build_pk_deduplicate_orc,
    build_pk_first_row,
    build_pk_partial_update,
)

from paimond.maintenance.compact import CompactJob
from paimond.table.catalog import Table, open_table
from paimond.table.scan import scan_snapshot
from paimond.table.storage import open_storage

BUILDERS = {
    "deduplicate-parquet": build_pk_deduplicate,
    "deduplicate-orc": build_pk_deduplicate_orc,
    "partial-update-avro": build_pk_partial_update,
    "aggregation-avro": build_pk_aggregation,
    "first-row-orc": build_pk_first_row,
    "all-types": build_all_types_pk,
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Any]]:
    root = tmp_path_factory.mktemp("compact")
    out = {}
    for name, build in BUILDERS.items():
        warehouse = root / name
        out[name] = (warehouse, build(str(warehouse)))
    return out


def _job(table: Table, warehouse: str, full: bool) -> CompactJob:
    return CompactJob(table, warehouse, full=full, parallelism=2, use_processes=False,
                      now=lambda: datetime.datetime(2026, 11, 22, 12))


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_compaction_keeps_what_pypaimon_reads(name: str, pristine: dict[str, tuple[Path, Any]],
                                              tmp_path: Path) -> None:
    source, spec = pristine[name]
    warehouse = str(tmp_path / "wh")
    shutil.copytree(source, warehouse)
    table = open_table(open_storage(warehouse), warehouse, spec.name)
    content = read_rows(warehouse, spec.name, include_level0=True)
    old_ids = table.snapshots.list_ids()
    old_reads = {i: read_rows(warehouse, spec.name, snapshot_id=i, include_level0=True)
                 for i in old_ids}

    for full in (False, True, False, True):
        summary = _job(table, warehouse, full).run()
        assert not summary.failures, summary.describe()
        assert read_rows(warehouse, spec.name, include_level0=True).equals(content), (
            f"{name} after {'full' if full else 'normal'} compaction\n{summary.describe()}")

    # A full compaction leaves one sorted run per bucket at the max level, without deletes.
    latest = table.snapshots.latest()
    assert latest is not None and latest.commit_kind == "COMPACT"
    for bucket in scan_snapshot(table, latest).buckets().values():
        assert list(bucket.levels) == [5], f"{name}: levels {sorted(bucket.levels)}"
        assert all(f.meta.delete_row_count == 0 for f in bucket.files)
    # Batch readers that skip level 0 now see everything; pypaimon-rust agrees.
    assert read_rows(warehouse, spec.name).equals(content)
    rust = read_rows_rust(warehouse, spec.name)
    if rust is not None:
        assert rust.equals(content)
    # Every earlier snapshot reads exactly as before.
    for snapshot_id, rows in old_reads.items():
        assert read_rows(warehouse, spec.name, snapshot_id=snapshot_id,
                         include_level0=True).equals(rows)


def test_process_pool_and_dry_run_plan(pristine: dict[str, tuple[Path, Any]],
                                       tmp_path: Path) -> None:
    source, spec = pristine["deduplicate-parquet"]
    warehouse = str(tmp_path / "wh")
    shutil.copytree(source, warehouse)
    table = open_table(open_storage(warehouse), warehouse, spec.name)
    before = table.snapshots.latest_id()
    job = CompactJob(table, warehouse, full=True, parallelism=2, use_processes=True)
    plan = job.plan()
    assert plan.tasks and table.snapshots.latest_id() == before, "planning changes nothing"
    summary = job.run()
    assert summary.snapshot is not None and summary.snapshot.id == before + 1
    assert summary.files_out < summary.files_in
    assert summary.rows_written <= summary.rows_read
    # The independent Python model of the merge (tests/pypaimon_tables.py) agrees.
    assert read_rows(warehouse, spec.name).equals(spec.compacted_rows)
