"""examples/spark_ingest.py end to end on PySpark local mode: pypaimon writes in the executors,
one commit per batch on the driver, then ``paimond.spark.maintain`` compacts and expires; the
table reads back exactly the rows a model of the batches predicts."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest
from pypaimon_oracle import read_rows

import paimond.spark
from paimond.errors import ConfigError
from paimond.table.catalog import open_table
from paimond.table.scan import scan_snapshot
from paimond.table.storage import open_storage

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_ingest.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("spark_ingest_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _model(example: ModuleType, batches: int, rows: int) -> pa.Table:
    """The rows the batches leave: the latest batch's row of each (day, id)."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for batch in range(batches):
        for i in range(rows):
            key = (i * 7919 + batch) % example.KEY_SPACE
            row = {"day": f"2026-11-2{key % 2}", "id": key, "user": f"user-{key % 97}",
                   "amount": key * 0.5 + batch, "batch": batch}
            latest[(row["day"], key)] = row
    ordered = [latest[k] for k in sorted(latest)]
    return pa.Table.from_pylist(ordered, schema=example.SCHEMA)


def test_the_example_ingests_then_maintains(spark: Any, tmp_path: Path) -> None:
    example = _example()
    warehouse, batches, rows = str(tmp_path / "wh"), 6, 300

    summary = example.run(spark, warehouse, batches=batches, rows=rows)

    table = open_table(open_storage(warehouse), warehouse, example.TABLE)
    compaction = summary.compaction
    assert compaction is not None and not compaction.failures, summary.describe()
    assert compaction.snapshot is not None and compaction.snapshot.id == batches + 1
    assert compaction.snapshot.commit_kind == "COMPACT"
    assert compaction.rows_read == batches * rows
    # Every bucket held one level-0 file per batch; now one sorted run above level 0.
    buckets = scan_snapshot(table, compaction.snapshot).buckets()
    assert len(buckets) == 2 * example.BUCKETS
    for bucket in buckets.values():
        assert 0 not in bucket.levels and bucket.sorted_run_count() == 1, bucket.levels.keys()
    # snapshot.num-retained.max = 5: expiration ran after the compaction.
    assert summary.expiration is not None
    assert table.snapshots.list_ids() == list(range(batches - 3, batches + 2))
    expected = _model(example, batches, rows)
    got = read_rows(warehouse, example.TABLE)
    assert got.cast(expected.schema).equals(expected)


def test_maintain_refuses_an_unknown_job(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown job 'vacuum'"):
        paimond.spark.maintain(spark, str(tmp_path), "db.t", jobs=("compact", "vacuum"))
