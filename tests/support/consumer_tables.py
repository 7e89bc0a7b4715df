"""A table with consumer files, as Java Paimon writes them, at chosen modification times."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
from pypaimon import Schema
from pypaimon.consumer.consumer import Consumer
from pypaimon.consumer.consumer_manager import ConsumerManager

from paimond.table.catalog import Table, open_table
from paimond.table.storage.interface import open_storage
from support.pypaimon_tables import catalog_for

NAME = "db.t"


def _java_json(next_snapshot: int) -> bytes:
    """Java ``Consumer.toJson``: Jackson's default pretty printer."""
    return f'{{\n  "nextSnapshot" : {next_snapshot}\n}}'.encode()


def make_table(warehouse: Path, options: dict[str, str]) -> Table:
    catalog = catalog_for(str(warehouse))
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    catalog.create_database("db", True)
    catalog.create_table(NAME, Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": "1", **options}), False)
    table = catalog.get_table(NAME)
    for i in range(5):
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(pa.Table.from_pylist([{"id": i, "v": f"v{i}"}], schema=schema))
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
    return open_table(open_storage(str(warehouse)), str(warehouse), NAME)


def set_mtime(path: str, ms: int) -> None:
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


def consumer_path(table: Table, consumer_id: str) -> str:
    return str(table.file_path("consumer", f"consumer-{consumer_id}"))


def write_consumers(table: Table, specs: dict[str, tuple[int | None, int]]) -> None:
    """id -> (next snapshot, mtime ms); None writes an unparsable file. Even ids through
    pypaimon's ConsumerManager, odd ones as Java's bytes."""
    manager = ConsumerManager(catalog_for(str(Path(table.path).parents[1])).get_table(NAME)
                              .file_io, table.path)
    for index, (consumer_id, (next_snapshot, mtime_ms)) in enumerate(sorted(specs.items())):
        path = consumer_path(table, consumer_id)
        if next_snapshot is None:
            Path(path).parent.mkdir(exist_ok=True)
            Path(path).write_bytes(b"{not json")
        elif index % 2 == 0:
            manager.reset_consumer(consumer_id, Consumer(next_snapshot))
        else:
            Path(path).parent.mkdir(exist_ok=True)
            Path(path).write_bytes(_java_json(next_snapshot))
        set_mtime(path, mtime_ms)
