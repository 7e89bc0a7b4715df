"""A small partitioned primary-key table for Java Paimon to write into (``db.t``: ``p`` and
``k`` the key, ``v`` a string, 2 buckets), created by pypaimon's catalog, and random rows for
``JavaMaintainer.write`` (``[kind, p, k, v]``)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
from pypaimon import Schema

from support.pypaimon_tables import catalog_for

SCHEMA = pa.schema([pa.field("p", pa.int32(), nullable=False),
                    pa.field("k", pa.int32(), nullable=False), ("v", pa.string())])


def random_rows(rng: random.Random, count: int) -> list[list[Any]]:
    """``count`` rows over 2 partitions and 31 keys, a tenth of them deletions."""
    return [["-D" if rng.random() < 0.1 else "+I", rng.choice([1, 2]), rng.randint(0, 30),
             rng.choice([None, "x", "y"])] for _ in range(count)]


def create_table(warehouse: Path) -> Path:
    """``db.t`` in ``warehouse``; its directory."""
    catalog = catalog_for(str(warehouse))
    catalog.create_database("db", True)
    catalog.create_table("db.t", Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=["p"], primary_keys=["p", "k"], options={"bucket": "2"}), False)
    return warehouse / "db.db" / "t"
