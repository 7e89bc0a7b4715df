"""Postpone-bucket tables (``bucket = -2``) written by pypaimon 2.1.0: rows in each partition's
``bucket-postpone`` directory that no reader sees until compaction moves them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from support.pypaimon_tables import TableWriter, catalog_for, seeded_rng

NAME = "db.postponed"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False),
                    pa.field("dt", pa.string(), nullable=False), pa.field("v", pa.string())])
DAYS = ("2024-01-01", "2024-01-02")


def postpone_table(root: Path, *, commits: int = 3, rows: int = 40,
                   options: dict[str, str] | None = None) -> tuple[Path, str]:
    """``commits`` pypaimon commits of ``rows`` random rows over two daily partitions (keys
    repeat across commits); each partition goes to two buckets when first moved."""
    warehouse = root / "wh"
    writer = TableWriter(catalog_for(str(warehouse)), NAME, SCHEMA, primary_keys=("id", "dt"),
                         partition_keys=("dt",),
                         options={"bucket": "-2", "postpone.default-bucket-num": "2",
                                  **(options or {})})
    for commit in range(commits):
        rng = seeded_rng(f"postponed{commit}")
        writer.commit([{"id": rng.randrange(rows), "dt": rng.choice(DAYS), "v": f"{commit}-{i}"}
                       for i in range(rows)])
    return warehouse, NAME
