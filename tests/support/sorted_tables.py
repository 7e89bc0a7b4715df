"""The bucket-unaware append table the sort-compaction tests order: two partitions (``dt`` x
and y) of 12 overlapping commits of 400 rows, ``a`` with nulls, files of 6 KB, written by
pypaimon at a fixed noon."""

from __future__ import annotations

import datetime
import random

import pyarrow as pa

from paimond.clock import Clock
from support.pypaimon_tables import TableWriter, catalog_for, not_null

NOON = datetime.datetime(2026, 11, 22, 12, 0)
CLOCK = Clock(fixed_ms=int(NOON.timestamp() * 1000))
NAME = "db.sorted"
SCHEMA = pa.schema([("dt", pa.string()), not_null("id", pa.int64()), ("a", pa.int32()),
                    ("b", pa.int32()), ("s", pa.string())])


def write_sorted_table(warehouse: str, options: dict[str, str] | None = None) -> TableWriter:
    """Write the table's 12 commits; the writer stays open for more."""
    writer = TableWriter(catalog_for(warehouse), NAME, SCHEMA, partition_keys=("dt",),
                         options={"bucket": "-1", "file.format": "parquet",
                                  "target-file-size": "6 kb", **(options or {})})
    rng = random.Random(5)
    for commit in range(12):
        writer.commit([{"dt": "x" if i % 4 else "y", "id": commit * 1000 + i,
                        "a": None if i % 97 == 0 else rng.randrange(10_000),
                        "b": rng.randrange(10_000), "s": f"s{rng.randrange(100):03d}"}
                       for i in range(400)])
    return writer
