"""Writes the demo warehouse that ``make run`` shows: tables as an ingestion job leaves them.

pypaimon plays the ingestion job here (as PySpark or Flink would in production): every commit
lands in level 0, so the primary-key table accumulates sorted runs that need compaction.
paimond itself never imports pypaimon; this script is not part of the ``paimond`` package.

Usage: python examples/demo_warehouse.py WAREHOUSE_DIR   (idempotent: skips existing tables)
"""

from __future__ import annotations

import random
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
from pypaimon import CatalogFactory, Schema

ORDERS = pa.schema([
    pa.field("order_id", pa.int64(), nullable=False),
    pa.field("dt", pa.string(), nullable=False),
    pa.field("customer", pa.string()),
    pa.field("amount", pa.decimal128(12, 2)),
    pa.field("status", pa.string()),
    pa.field("row_kind", pa.string()),
])
SESSIONS = pa.schema([
    pa.field("session_id", pa.int64(), nullable=False),
    pa.field("user", pa.string()),
    pa.field("pages", pa.int32()),
])
# Readers of a deletion-vector table skip level 0 and read the rest unmerged: it reads empty
# until paimond compacts it. The bloom filter is written for every file compaction produces.
# The recommended setup: writers are write-only, paimond does every maintenance job.
WRITE_ONLY = {"write-only": "true"}
SESSIONS_OPTIONS = {"bucket": "1", "deletion-vectors.enabled": "true",
                    "file-index.bloom-filter.columns": "user", **WRITE_ONLY}
EVENTS = pa.schema([
    pa.field("dt", pa.string(), nullable=False),
    pa.field("event", pa.string()),
    pa.field("value", pa.float64()),
])


def _commit(table, data: pa.Table) -> None:
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    try:
        write.write_arrow(data)
        commit.commit(write.prepare_commit())
    finally:
        write.close()
        commit.close()


def _orders_batch(rng: random.Random, commit_no: int) -> pa.Table:
    ids = rng.sample(range(1, 200), 40)
    kinds = ["-D" if commit_no > 2 and i % 11 == 0 else "+U" if commit_no else "+I" for i in ids]
    return pa.table({
        "order_id": ids,
        "dt": [f"2026-11-{20 + i % 3:02d}" for i in ids],
        "customer": [f"customer-{i % 17}" for i in ids],
        "amount": [Decimal(rng.randint(100, 99999)) / 100 for _ in ids],
        "status": [rng.choice(["new", "paid", "shipped"]) for _ in ids],
        "row_kind": kinds,
    }, schema=ORDERS)


def sessions_batch(rng: random.Random, count: int) -> pa.Table:
    ids = rng.sample(range(1, 500), count)
    return pa.table({"session_id": ids, "user": [f"user-{i % 41}" for i in ids],
                     "pages": [rng.randint(1, 30) for _ in ids]}, schema=SESSIONS)


def build(warehouse: Path) -> None:
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("demo", True)
    rng = random.Random(7)
    existing = set(catalog.list_tables("demo"))
    if "orders" not in existing:
        catalog.create_table("demo.orders", Schema.from_pyarrow_schema(
            ORDERS, partition_keys=["dt"], primary_keys=["order_id", "dt"],
            options={"bucket": "2", "rowkind.field": "row_kind", **WRITE_ONLY}), True)
        orders = catalog.get_table("demo.orders")
        for commit_no in range(8):
            _commit(orders, _orders_batch(rng, commit_no))
    if "sessions" not in existing:
        catalog.create_table("demo.sessions", Schema.from_pyarrow_schema(
            SESSIONS, primary_keys=["session_id"], options=SESSIONS_OPTIONS), True)
        sessions = catalog.get_table("demo.sessions")
        for _ in range(4):
            _commit(sessions, sessions_batch(rng, 60))
    if "events" not in existing:
        catalog.create_table("demo.events", Schema.from_pyarrow_schema(
            EVENTS, partition_keys=["dt"], options=WRITE_ONLY), True)
        events = catalog.get_table("demo.events")
        for day in range(3):
            _commit(events, pa.table({
                "dt": [f"2026-11-2{day}"] * 50,
                "event": [rng.choice(["view", "click", "buy"]) for _ in range(50)],
                "value": [rng.random() for _ in range(50)],
            }, schema=EVENTS))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    target = Path(sys.argv[1]).resolve()
    build(target)
    print(f"demo warehouse ready at {target}")
