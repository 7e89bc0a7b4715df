"""Append-table compaction with ``--executor spark`` (PySpark local mode): the tasks run as
Spark tasks and lay out the same files as the local pool."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_append_fixed_bucket

from paimond.clock import Clock
from paimond.maintenance.compact.job import CompactJob
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

NOW = datetime.datetime(2026, 11, 22, 12)
CLOCK = Clock(fixed_ms=int(NOW.timestamp() * 1000))


def test_spark_executor_lays_out_the_same_files(tmp_path: Path, spark: Any) -> None:
    """The same tasks run as Spark tasks (``--executor spark``) give the local pool's layout:
    the same inputs per task and the same rows per output."""
    from paimond.spark.executor import SparkExecutor

    layouts = []
    for executor in (None, SparkExecutor(spark)):
        warehouse = str(tmp_path / ("spark" if executor else "local"))
        spec = build_append_fixed_bucket(warehouse)
        table = open_table(open_storage(warehouse), warehouse, spec.name)
        summary = CompactJob(table, clock=CLOCK, full=True, use_processes=False,
                             executor=executor).run()
        assert summary.snapshot is not None and not summary.failures
        assert read_rows(warehouse, spec.name).equals(spec.expected_rows)
        layouts.append(sorted((r.task.partition, r.task.bucket, len(r.task.inputs),
                               tuple(e.file.row_count for e in r.added))
                              for r in summary.results))
    assert layouts[0] == layouts[1]
