"""A PySpark ingestion job that writes a Paimon primary-key table from DataFrames in many
commits, then maintains it with paimond right after the last commit.

    python examples/spark_ingest.py WAREHOUSE [--batches 8] [--rows 1000] [--master local[2]]

Each batch is one Paimon commit:

1. a DataFrame of events, built by Spark (nothing is collected to the driver);
2. ``mapInArrow``: pypaimon's bucket function for the table (its row key extractor) adds
   each row's bucket;
3. ``repartition`` on (partition, bucket): every bucket lands in exactly one Spark task, so
   one writer owns it and its sequence numbers (Paimon's Spark writer shuffles the same way);
4. ``mapInArrow``: each task writes its rows with pypaimon's batch write and returns its commit
   messages as Java ``CommitMessageSerializer`` v14 bytes;
5. the driver decodes them and commits once.

Then ``paimond.spark.maintain`` compacts the table (one Spark task per bucket, one COMPACT
snapshot from the driver) and expires old snapshots. Executors need pypaimon and paimond's
dependencies installed; paimond's own code is shipped with the job.

Needs: pip install 'paimond[spark]' pypaimon (pyspark's Arrow paths also need pandas).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

TABLE = "db.events"
BUCKETS = 4
KEY_SPACE = 2003  # prime: (id * 7919 + batch) % KEY_SPACE never repeats an id within a batch
SCHEMA = pa.schema([pa.field("day", pa.string(), nullable=False),
                    pa.field("id", pa.int64(), nullable=False),
                    ("user", pa.string()), ("amount", pa.float64()), ("batch", pa.int64())])
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
        options={"bucket": str(BUCKETS), "file.format": "parquet",
                 "snapshot.num-retained.min": "3", "snapshot.num-retained.max": "5"}), True)


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


def _writer(warehouse: str, catalog_options: dict[str, str] | None) -> Any:
    options = {**(catalog_options or {}), "warehouse": warehouse}

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pypaimon import CatalogFactory
        from pypaimon.write.commit_message_serializer import serialize_commit_message

        table = CatalogFactory.create(options).get_table(TABLE)
        write = table.new_batch_write_builder().new_write()
        try:
            for batch in batches:
                rows = pa.Table.from_batches([batch]).drop_columns([_BUCKET]).cast(SCHEMA)
                if rows.num_rows:
                    write.write_arrow(rows)
            messages = write.prepare_commit()
        finally:
            write.close()
        yield pa.RecordBatch.from_pydict({_MESSAGE: [
            serialize_commit_message(m, table.partition_keys_fields) for m in messages]},
            schema=pa.schema([(_MESSAGE, pa.binary())]))
    return write


def ingest_batch(spark: Any, warehouse: str, batch: int, rows: int,
                 catalog_options: dict[str, str] | None = None) -> int:
    """Write one batch in the executors and commit it on the driver; returns the number of
    commit messages (one per bucket written)."""
    from pypaimon.write.commit_message_serializer import deserialize_commit_message

    bucketed = events(spark, batch, rows).mapInArrow(
        _with_bucket(warehouse, catalog_options),
        f"day string, id long, user string, amount double, batch long, {_BUCKET} int")
    written = bucketed.repartition(BUCKETS * 2, "day", _BUCKET).mapInArrow(
        _writer(warehouse, catalog_options), f"{_MESSAGE} binary")
    payloads = [row[_MESSAGE] for row in written.collect()]

    table = _catalog(warehouse, catalog_options).get_table(TABLE)
    messages = [deserialize_commit_message(bytes(p), table.partition_keys_fields,
                                           table.trimmed_primary_keys_fields) for p in payloads]
    commit = table.new_batch_write_builder().new_commit()
    try:
        commit.commit(messages)
    finally:
        commit.close()
    return len(messages)


def run(spark: Any, warehouse: str, *, batches: int = 8, rows: int = 1000,
        catalog_options: dict[str, str] | None = None,
        storage_options: dict[str, str] | None = None) -> Any:
    """The whole job: create the table, ingest ``batches`` commits, maintain; returns
    paimond's MaintenanceSummary."""
    import paimond.spark

    create_table(warehouse, catalog_options)
    for batch in range(batches):
        ingest_batch(spark, warehouse, batch, rows, catalog_options)
    return paimond.spark.maintain(spark, warehouse, TABLE, storage_options=storage_options)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("warehouse")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    from paimond.spark.executor import spark_session

    # A local master stays on the loopback interface with Python workers on this venv.
    spark = spark_session(args.master, "spark_ingest")
    spark.conf.set("spark.sql.shuffle.partitions", str(BUCKETS * 2))
    try:
        summary = run(spark, os.path.abspath(args.warehouse), batches=args.batches,
                      rows=args.rows)
    finally:
        spark.stop()
    print(summary.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
