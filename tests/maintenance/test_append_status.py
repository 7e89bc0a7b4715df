"""An append table's status: small files per partition and the share of rows deleted by
vectors, in ``paimond status`` (text and JSON) and in the daemon's urgency and gauges; a
compaction brings both down."""

from __future__ import annotations

import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
from support.pypaimon_tables import TableWriter, catalog_for, not_null

from paimond.cli.report import render_text
from paimond.clock import Clock
from paimond.daemon.tables.evaluate import health
from paimond.lsm.lookup.deletion_vectors import vector_of
from paimond.maintenance.compact.job import CompactJob
from paimond.table.catalog import open_table
from paimond.table.commit.committer import CommitChanges, Committer
from paimond.table.indexes.deletion_vectors import write_deletion_vectors
from paimond.table.layout import partition_text
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.status.report import table_status
from paimond.table.storage.interface import open_storage

CLOCK = Clock(fixed_ms=int(datetime.datetime(2026, 11, 22, 12, 0).timestamp() * 1000))


def test_small_files_and_deleted_rows(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    schema = pa.schema([("dt", pa.string()), not_null("id", pa.int64())])
    writer = TableWriter(catalog_for(warehouse), "db.small", schema, partition_keys=("dt",),
                     options={"bucket": "-1", "deletion-vectors.enabled": "true"})
    for commit in range(7):
        writer.commit([{"dt": "a" if commit < 6 else "b", "id": commit * 10 + i}
                       for i in range(10)])
    table = open_table(open_storage(warehouse), warehouse, "db.small")
    entry = next(f.entry for f in scan_snapshot(table, table.snapshots.latest()).files
                 if f.entry.file.row_count == 10)
    index, _ = write_deletion_vectors(
        table, {entry.file.file_name: vector_of(np.arange(4, dtype=np.int64), bitmap64=False)},
        entry.partition, entry.bucket, bitmap64=False)
    Committer(table, commit_kind="APPEND", clock=CLOCK).commit(CommitChanges(index_added=[index]))

    status = table_status(table)
    small = {b.partition: b.small_files for b in status.buckets}
    assert small == {"dt=a": 6, "dt=b": 1}
    deleted = {b.partition: b.deleted_ratio for b in status.buckets}
    victim = partition_text(table.latest_schema(), entry.partition)
    assert deleted[victim] == 4 / (60 if victim == "dt=a" else 10)
    assert all(r == 0 for p, r in deleted.items() if p != victim)
    text = render_text(status)
    assert "small files" in text and "rows deleted" in text
    assert {b["partition"]: b["deleted_ratio"] for b in status.to_json()["buckets"]} == {
        p: round(r, 6) for p, r in deleted.items()}
    before = health(status)
    assert before is not None and before.urgency == 6 / 50 + max(deleted.values()) / 0.5
    assert before.gauges["deleted_row_ratio"] == 4 / 70

    CompactJob(table, clock=CLOCK, use_processes=False).run()
    after = health(table_status(table))
    assert after is not None and after.urgency < before.urgency
    assert after.gauges["deleted_row_ratio"] < before.gauges["deleted_row_ratio"]
