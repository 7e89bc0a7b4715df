"""Tables partitioned by day (``yyyyMMdd``), written by pypaimon, for partition expiry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pypaimon import Schema

from support.pypaimon_tables import catalog_for

DAYS = [f"202401{d:02d}" for d in range(1, 10)] + ["not-a-date"]


SCHEMA = pa.schema([pa.field("dt", pa.string()), pa.field("id", pa.int32()),
                    pa.field("v", pa.string())])


def create_partitioned(warehouse: str, name: str, schema: pa.Schema, keys: Sequence[str],
                       options: dict[str, str]) -> Any:
    catalog = catalog_for(warehouse)
    catalog.create_database(name.split(".")[0], True)
    catalog.create_table(name, Schema.from_pyarrow_schema(
        schema, partition_keys=list(keys), options={"bucket": "-1", **options}), False)
    return catalog.get_table(name)


def commit_day(table: Any, schema: pa.Schema, rows: list[dict[str, Any]]) -> None:
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    try:
        write.write_arrow(pa.Table.from_pylist(rows, schema=schema))
        commit.commit(write.prepare_commit())
    finally:
        write.close()
        commit.close()


def daily_table(warehouse: str, name: str = "db.daily", **options: str) -> list[dict[str, Any]]:
    """Ten partitions (nine days and one value that is no date), two commits each."""
    table = create_partitioned(warehouse, name, SCHEMA, ["dt"], {
        "partition.expiration-time": "3 d", "partition.timestamp-formatter": "yyyyMMdd",
        **options})
    rows: list[dict[str, Any]] = []
    for round_ in range(2):
        batch = [{"dt": dt, "id": round_ * 100 + i, "v": f"{dt}-{round_}"}
                 for i, dt in enumerate(DAYS)]
        commit_day(table, SCHEMA, batch)
        rows += batch
    return rows
