"""``compaction.skip-expired-partitions`` (Java ``CompactProcedure.nonExpiredPartitionPredicate``):
a pypaimon-written partitioned primary-key table with an expired partition, one exactly at the
threshold, a recent one and one whose value holds no date. With the option, ``partition.
expiration-time`` and the values-time strategy, compaction leaves the expired partition's files
alone and compacts the others; without the option, or with update-time, every partition is
compacted. pypaimon reads the same rows before and after."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from pypaimon import Schema
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import catalog_for

from paimond.clock import Clock
from paimond.maintenance.compact.job import CompactJob
from paimond.table.catalog import Table, open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

NAME = "db.t"
NOW_LOCAL = dt.datetime(2026, 1, 1)  # local wall time, as Java's LocalDateTime.now()
NOW = Clock(fixed_ms=int(NOW_LOCAL.timestamp() * 1000))
PARTITIONS = ("2020-01-01", "2025-12-25", "2025-12-31", "not-a-date")
SCHEMA = pa.schema([pa.field("dt", pa.string(), nullable=False),
                    pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def _model_skipped(options: dict[str, str]) -> set[str]:
    """Partitions whose date is strictly before now - 7 days, when the rule applies."""
    if (options.get("compaction.skip-expired-partitions") != "true"
            or options.get("partition.expiration-strategy", "values-time") != "values-time"):
        return set()
    threshold = NOW_LOCAL - dt.timedelta(days=7)
    skipped = set()
    for value in PARTITIONS:
        try:
            day = dt.datetime.strptime(value, "%Y-%m-%d")
        except ValueError:
            continue
        if day < threshold:
            skipped.add(f"dt={value}")
    return skipped


def _table(warehouse: Path, options: dict[str, str]) -> Table:
    catalog = catalog_for(str(warehouse))
    catalog.create_database("db", True)
    catalog.create_table(NAME, Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"],
        options={"bucket": "1", "partition.expiration-time": "7 d", **options}), False)
    table = catalog.get_table(NAME)
    for version in ("a", "b"):
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        rows = [{"dt": p, "id": i, "v": f"{version}{i}"} for p in PARTITIONS for i in range(3)]
        write.write_arrow(pa.Table.from_pylist(rows, schema=SCHEMA))
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
    return open_table(open_storage(str(warehouse)), str(warehouse), NAME)


def _levels(table: Table) -> dict[str, set[int]]:
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    out: dict[str, set[int]] = {}
    for files in scan_snapshot(table, snapshot).buckets().values():
        for f in files.files:
            out.setdefault(f.entry.partition.hex(), set()).add(f.entry.file.level)
    return out


@pytest.mark.parametrize("options", [
    {"compaction.skip-expired-partitions": "true"},
    {},
    {"compaction.skip-expired-partitions": "true", "partition.expiration-strategy": "update-time"},
], ids=["skip", "option-off", "update-time"])
def test_expired_partitions_are_left_alone(tmp_path: Path, options: dict[str, str]) -> None:
    table = _table(tmp_path / "wh", options)
    before = read_rows(str(tmp_path / "wh"), NAME)
    plan = CompactJob(table, clock=NOW, full=True).plan()
    planned = {t.partition_text for t in plan.tasks}
    expected_skips = _model_skipped(options)
    assert planned == {f"dt={p}" for p in PARTITIONS} - expected_skips
    assert {s.split(" ")[0] for s in plan.skipped} == expected_skips
    if options.get("compaction.skip-expired-partitions") and "partition.expiration-strategy" \
            not in options:
        assert expected_skips == {"dt=2020-01-01"}  # the model, pinned: 2025-12-25 is kept
    CompactJob(table, clock=NOW, full=True, use_processes=False).run()
    levels = _levels(table)
    assert sum(1 for lv in levels.values() if lv == {0}) == len(expected_skips)
    assert read_rows(str(tmp_path / "wh"), NAME).equals(before)
