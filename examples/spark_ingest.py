"""The recommended production setup for PySpark ingestion into Paimon with paimond: Spark
DataFrames ingest into a primary-key table and an append table in many micro-batches, the
writers with ``write-only=true`` (they never compact or expire), and paimond maintains both
tables right after each batch.

    python examples/spark_ingest.py WAREHOUSE [--batches 8] [--rows 1000] [--master local[2]]
        [--trigger http://paimond:9181]

Each micro-batch is one Paimon commit per table:

1. a DataFrame of events, built by Spark (nothing is collected to the driver);
2. PK table: ``mapInArrow`` adds each row's bucket with pypaimon's bucket function for the
   table, and ``repartition`` on (partition, bucket) makes every bucket land in exactly one
   Spark task, so one writer owns it and its sequence numbers (Paimon's Spark writer shuffles
   the same way); the append table (``bucket = -1``) needs no shuffle;
3. ``mapInArrow``: each task writes its rows with pypaimon's batch write and returns its commit
   messages as Java ``CommitMessageSerializer`` v14 bytes;
4. the driver decodes them and commits once.

Then, after each batch, paimond maintains both tables, in one of two ways:

- ``paimond.spark.maintain(spark, warehouse, table)`` (the default): compaction plans on the
  driver, runs one Spark task per bucket on the session's executors and commits one COMPACT
  snapshot when the table's own triggers say so (``num-sorted-run.compaction-trigger``,
  ``compaction.min.file-num``); then snapshot expiry by the table's retention options.
- ``--trigger URL``: a running daemon (``paimond run``) maintains the table now, as
  ``paimond trigger URL --table T --wait`` does (token in ``PAIMOND_TRIGGER_TOKEN``).

Executors need pypaimon and paimond's dependencies (ship a packed venv with
``spark.archives``, see the README's Spark section); paimond's own code is shipped with the
job. Needs: pip install 'paimond[spark]' pypaimon (pyspark's Arrow paths also need pandas).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

TABLE = "db.events"  # primary key (day, id), 4 buckets
APPEND_TABLE = "db.clicks"  # append, bucket-unaware
BUCKETS = 4
KEY_SPACE = 2003  # prime: (id * 7919 + batch) % KEY_SPACE never repeats an id within a batch
SCHEMA = pa.schema([pa.field("day", pa.string(), nullable=False),
                    pa.field("id", pa.int64(), nullable=False),
                    ("user", pa.string()), ("amount", pa.float64()), ("batch", pa.int64())])
APPEND_SCHEMA = pa.schema([pa.field("day", pa.string(), nullable=False),
                           ("id", pa.int64()), ("url", pa.string()), ("batch", pa.int64())])
WRITER_OPTIONS = {"write-only": "true", "file.format": "parquet",
                  "snapshot.num-retained.min": "3", "snapshot.num-retained.max": "5"}
_BUCKET = "_paimon_bucket"
_MESSAGE = "commit_message"


def _catalog(warehouse: str, catalog_options: dict[str, str] | None) -> Any:
    from pypaimon import CatalogFactory

    return CatalogFactory.create({**(catalog_options or {}), "warehouse": warehouse})


def create_table(warehouse: str, catalog_options: dict[str, str] | None = None) -> None:
    from pypaimon import Schema

    catalog = _catalog(warehouse, catalog_options)
    catalog.create_database("db", True)
    catalog.create_table(TABLE, Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=["day"], primary_keys=["day", "id"],
        options={"bucket": str(BUCKETS), **WRITER_OPTIONS}), True)
    catalog.create_table(APPEND_TABLE, Schema.from_pyarrow_schema(
        APPEND_SCHEMA, partition_keys=["day"], options={"bucket": "-1", **WRITER_OPTIONS}), True)


def events(spark: Any, batch: int, rows: int) -> Any:
    """Batch ``batch`` of ``rows`` events: ids unique within the batch, overlapping across
    batches (so later batches update earlier rows), over two days."""
    from pyspark.sql import functions as F

    key = F.pmod(F.col("id") * 7919 + F.lit(batch), F.lit(KEY_SPACE))
    return spark.range(rows, numPartitions=2).select(
        F.concat(F.lit("2026-11-2"), (key % 2).cast("string")).alias("day"),
        key.alias("id"),
        F.concat(F.lit("user-"), (key % 97).cast("string")).alias("user"),
        (key * 0.5 + F.lit(batch)).alias("amount"),
        F.lit(batch).cast("long").alias("batch"))


# The functions below run in the executors. Each is defined inside another so that Spark
# pickles it by value: it refers to no function of this module, which executors cannot import.


def _with_bucket(warehouse: str, catalog_options: dict[str, str] | None) -> Any:
    options = {**(catalog_options or {}), "warehouse": warehouse}

    def add_bucket(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pypaimon import CatalogFactory

        table = CatalogFactory.create(options).get_table(TABLE)
        extractor = table.create_row_key_extractor()
        for batch in batches:
            batch = pa.Table.from_batches([batch]).cast(SCHEMA).combine_chunks().to_batches()[0]
            _, buckets = extractor.extract_partition_bucket_batch(batch)
            yield batch.append_column(_BUCKET, pa.array(buckets, pa.int32()))
    return add_bucket


def _writer(warehouse: str, catalog_options: dict[str, str] | None, name: str = TABLE,
            schema: pa.Schema = SCHEMA) -> Any:
    options = {**(catalog_options or {}), "warehouse": warehouse}

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pypaimon import CatalogFactory
        from pypaimon.write.commit_message_serializer import serialize_commit_message

        table = CatalogFactory.create(options).get_table(name)
        write = table.new_batch_write_builder().new_write()
        try:
            for batch in batches:
                rows = pa.Table.from_batches([batch])
                if _BUCKET in rows.column_names:
                    rows = rows.drop_columns([_BUCKET])
                rows = rows.cast(schema)
                if rows.num_rows:
                    write.write_arrow(rows)
            messages = write.prepare_commit()
        finally:
            write.close()
        yield pa.RecordBatch.from_pydict({_MESSAGE: [
            serialize_commit_message(m, table.partition_keys_fields) for m in messages]},
            schema=pa.schema([(_MESSAGE, pa.binary())]))
    return write


def clicks(spark: Any, batch: int, rows: int) -> Any:
    """Batch ``batch`` of ``rows`` click events for the append table, over two days."""
    from pyspark.sql import functions as F

    return spark.range(rows, numPartitions=2).select(
        F.concat(F.lit("2026-11-2"), (F.col("id") % 2).cast("string")).alias("day"),
        (F.col("id") + F.lit(batch * rows)).alias("id"),
        F.concat(F.lit("/page/"), (F.col("id") % 13).cast("string")).alias("url"),
        F.lit(batch).cast("long").alias("batch"))


def _commit(warehouse: str, name: str, payloads: list[bytes],
            catalog_options: dict[str, str] | None) -> int:
    from pypaimon.write.commit_message_serializer import deserialize_commit_message

    table = _catalog(warehouse, catalog_options).get_table(name)
    messages = [deserialize_commit_message(bytes(p), table.partition_keys_fields,
                                           table.trimmed_primary_keys_fields) for p in payloads]
    commit = table.new_batch_write_builder().new_commit()
    try:
        commit.commit(messages)
    finally:
        commit.close()
    return len(messages)


def ingest_batch(spark: Any, warehouse: str, batch: int, rows: int,
                 catalog_options: dict[str, str] | None = None) -> int:
    """Write one batch of the PK table in the executors and commit it on the driver; returns
    the number of commit messages (one per bucket written)."""
    bucketed = events(spark, batch, rows).mapInArrow(
        _with_bucket(warehouse, catalog_options),
        f"day string, id long, user string, amount double, batch long, {_BUCKET} int")
    written = bucketed.repartition(BUCKETS * 2, "day", _BUCKET).mapInArrow(
        _writer(warehouse, catalog_options), f"{_MESSAGE} binary")
    return _commit(warehouse, TABLE, [row[_MESSAGE] for row in written.collect()],
                   catalog_options)


def ingest_append_batch(spark: Any, warehouse: str, batch: int, rows: int,
                        catalog_options: dict[str, str] | None = None) -> int:
    """Write one batch of the append table in the executors (each task a writer, no shuffle)
    and commit it on the driver."""
    written = clicks(spark, batch, rows).mapInArrow(
        _writer(warehouse, catalog_options, APPEND_TABLE, APPEND_SCHEMA), f"{_MESSAGE} binary")
    return _commit(warehouse, APPEND_TABLE, [row[_MESSAGE] for row in written.collect()],
                   catalog_options)


def trigger(url: str, table: str) -> None:
    """A running daemon maintains ``table`` now; returns when it is done (the token comes
    from ``PAIMOND_TRIGGER_TOKEN``)."""
    from paimond.cli.main import main

    if main(["trigger", url, "--table", table, "--wait"]) != 0:
        raise RuntimeError(f"the daemon at {url} failed to maintain {table}")


def run(spark: Any, warehouse: str, *, batches: int = 8, rows: int = 1000,
        catalog_options: dict[str, str] | None = None,
        storage_options: dict[str, str] | None = None,
        trigger_url: str | None = None) -> dict[str, list[Any]]:
    """The whole job: create the tables, then per micro-batch ingest both tables and maintain
    both; returns each table's MaintenanceSummary per batch (none with ``trigger_url``)."""
    import paimond.spark

    create_table(warehouse, catalog_options)
    summaries: dict[str, list[Any]] = {TABLE: [], APPEND_TABLE: []}
    for batch in range(batches):
        ingest_batch(spark, warehouse, batch, rows, catalog_options)
        ingest_append_batch(spark, warehouse, batch, rows, catalog_options)
        for name in (TABLE, APPEND_TABLE):
            if trigger_url:
                trigger(trigger_url, name)
            else:
                summaries[name].append(paimond.spark.maintain(
                    spark, warehouse, name, storage_options=storage_options))
    return summaries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("warehouse")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--trigger", metavar="URL",
                        help="maintain through a running daemon's trigger endpoint instead")
    args = parser.parse_args(argv)
    from paimond.spark.executor import spark_session

    # A local master stays on the loopback interface with Python workers on this venv.
    spark = spark_session(args.master, "spark_ingest")
    spark.conf.set("spark.sql.shuffle.partitions", str(BUCKETS * 2))
    try:
        summaries = run(spark, os.path.abspath(args.warehouse), batches=args.batches,
                        rows=args.rows, trigger_url=args.trigger)
    finally:
        spark.stop()
    for per_batch in summaries.values():
        for summary in per_batch[-1:]:
            print(summary.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
