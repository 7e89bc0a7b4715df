"""examples/spark_ingest.py end to end on local-cluster: pypaimon writes a PK table and an append
table (write-only) in the executors, one commit per table and micro-batch on the driver, and
``paimond.spark.maintain`` maintains both after each batch (compacting when due, expiring);
the tables read back exactly the rows models of the batches predict."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest
from support.pypaimon_oracle import read_rows

import paimond.spark
from paimond.errors import ConfigError
from paimond.table.catalog import open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

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


def _append_model(example: ModuleType, batches: int, rows: int) -> pa.Table:
    ordered = sorted(({"day": f"2026-11-2{i % 2}", "id": i + batch * rows,
                       "url": f"/page/{i % 13}", "batch": batch}
                      for batch in range(batches) for i in range(rows)),
                     key=lambda r: (r["day"], r["id"]))
    return pa.Table.from_pylist(ordered, schema=example.APPEND_SCHEMA)


def test_the_example_ingests_micro_batches_and_maintains_after_each(spark: Any,
                                                                    tmp_path: Path) -> None:
    example = _example()
    warehouse, batches, rows = str(tmp_path / "wh"), 5, 200

    summaries = example.run(spark, warehouse, batches=batches, rows=rows)

    storage = open_storage(warehouse)
    for name in (example.TABLE, example.APPEND_TABLE):
        per_batch = summaries[name]
        assert len(per_batch) == batches
        assert not any(s.failed or s.refused for s in per_batch), per_batch[-1].describe()
        compactions = [s.compaction.snapshot for s in per_batch
                       if s.compaction is not None and s.compaction.snapshot is not None]
        # write-only writers never compact: paimond did, when the table's trigger was reached
        assert compactions and all(c.commit_kind == "COMPACT" for c in compactions), name
        assert len(compactions) < batches, name  # not after every batch: only when due
        table = open_table(storage, warehouse, name)
        assert len(table.snapshots.list_ids()) <= 5  # snapshot.num-retained.max, by paimond
        assert table.snapshots.list_ids()[-1] == batches + len(compactions)
    pk = open_table(storage, warehouse, example.TABLE)
    latest = pk.snapshots.latest()
    assert latest is not None
    for bucket in scan_snapshot(pk, latest).buckets().values():
        assert bucket.sorted_run_count() < 5, bucket.levels.keys()  # below the trigger
    expected = _model(example, batches, rows)
    assert read_rows(warehouse, example.TABLE).cast(expected.schema).equals(expected)
    appended = open_table(storage, warehouse, example.APPEND_TABLE)
    latest = appended.snapshots.latest()
    assert latest is not None
    files = scan_snapshot(appended, latest).files
    assert len(files) < batches * 2 * 2  # two writer tasks x two days per batch, compacted
    expected = _append_model(example, batches, rows)
    got = read_rows(warehouse, example.APPEND_TABLE).sort_by([("day", "ascending"),
                                                              ("id", "ascending")])
    assert got.cast(expected.schema).equals(expected)


def test_maintain_refuses_an_unknown_job(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown job 'vacuum'"):
        paimond.spark.maintain(spark, str(tmp_path), "db.t", jobs=("compact", "vacuum"))


def test_maintain_from_a_session_whose_workers_run_another_python(
        spark: Any, tmp_path: Path) -> None:
    """A plain SparkSession (no PYSPARK_PYTHON, the venv not on PATH) started its Python
    workers with the system's python3, and every bucket failed with "No module named
    'fastavro'". On a local master paimond's tasks run the driver's interpreter (a session
    that names one keeps it: test_spark_cluster's packed environment)."""
    from support.write_only_writer import Writer

    writer = Writer(str(tmp_path), "db.t", compaction_trigger=2)
    for _ in range(3):
        writer.commit()
    context = spark.sparkContext
    before = context.pythonExec
    context.pythonExec = "python3"  # a plain session's: PYSPARK_PYTHON unset, PATH decides
    try:
        summary = paimond.spark.maintain(spark, str(tmp_path), "db.t", jobs=("compact",),
                                         full=True)
        assert not summary.failed, summary.describe()
        assert context.pythonExec == sys.executable
    finally:
        context.pythonExec = before
    table = open_table(open_storage(str(tmp_path)), str(tmp_path), "db.t")
    latest = table.snapshots.latest()
    assert latest is not None and latest.commit_kind == "COMPACT"


def test_maintain_commits_under_the_warehouses_catalog_lock(spark: Any, tmp_path: Path) -> None:
    """A warehouse registered in a JDBC catalog with lock.enabled: the compaction's commit
    takes the catalog's lock (its lock table made on first use, empty once released)."""
    import sqlite3

    from support.write_only_writer import Writer

    catalog = tmp_path / "catalog.db"
    with sqlite3.connect(catalog) as connection:
        connection.execute("CREATE TABLE paimon_tables(catalog_key VARCHAR(255) NOT NULL,"
                           "database_name VARCHAR(255) NOT NULL,table_name VARCHAR(255) NOT "
                           "NULL,PRIMARY KEY (catalog_key, database_name, table_name))")
        connection.execute("INSERT INTO paimon_tables VALUES ('jdbc', 'db', 't')")
    warehouse = tmp_path / "wh"
    writer = Writer(str(warehouse), "db.t", compaction_trigger=2)
    for _ in range(3):
        writer.commit()
    summary = paimond.spark.maintain(
        spark, str(warehouse), "db.t", jobs=("compact",), full=True,
        catalog_options={"metastore": "jdbc", "uri": f"jdbc:sqlite:{catalog}",
                         "lock.enabled": "true"})
    assert not summary.failed, summary.describe()
    with sqlite3.connect(catalog) as connection:
        assert connection.execute("SELECT count(*) FROM paimon_distributed_locks"
                                  ).fetchone() == (0,)
    table = open_table(open_storage(str(warehouse)), str(warehouse), "db.t")
    latest = table.snapshots.latest()
    assert latest is not None and latest.commit_kind == "COMPACT"
