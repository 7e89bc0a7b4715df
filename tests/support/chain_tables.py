"""A chain table (``chain-table.enabled``) written by pypaimon into its two branches, with the
model of what Paimon's chain read gives of a partition: for the crash campaign and the model
tests of ``compact-chain-table``; and an empty one for Java to write into
(tests/interop/test_java_chain_table.py).

``db.c``: ``t1`` the key, ``t2`` the sequence field, ``v`` a value, partitioned by ``dt``
(``yyyyMMdd``); the snapshot branch holds ``dt=20250801`` and ``dt=20250810``, the delta
branch changes in ``20250805``, ``20250811`` and ``20250812``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from pypaimon import Schema

from paimond.table.branches import create_branch
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage
from support.pypaimon_tables import catalog_for

NAME = "db.c"
SCHEMA = pa.schema([pa.field("t1", pa.string(), nullable=False), ("t2", pa.string()),
                    ("v", pa.string()), pa.field("dt", pa.string(), nullable=False)])
OPTIONS = {"bucket": "2", "bucket-key": "t1", "sequence.field": "t2",
           "chain-table.enabled": "true", "partition.timestamp-pattern": "$dt",
           "partition.timestamp-formatter": "yyyyMMdd",
           "scan.fallback-snapshot-branch": "snapshot", "scan.fallback-delta-branch": "delta"}
SNAPSHOT = {"20250801": [(k, "1", f"{k}@0801") for k in "abcd"],
            "20250810": [(k, "1", f"{k}@0810") for k in "abcdefgh"]}
DELTA = {"20250805": [[("a", "5", "a@0805")]],
         "20250811": [[("a", "2", "a@0811"), ("m", "2", "m@0811"), ("c", "0", "c stale")],
                      [("a", "3", "a@0811 again"), ("d", "2", "d@0811")]],
         "20250812": [[("a", "4", "a@0812"), ("n", "2", "n@0812")]]}


def write_partition(catalog: Any, name: str, dt: str, rows: list[tuple[str, str, str]]) -> None:
    """One pypaimon commit of ``rows`` (key, sequence, value) into partition ``dt``."""
    table = catalog.get_table(name)
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.Table.from_pylist(
        [{"t1": k, "t2": s, "v": v, "dt": dt} for k, s, v in rows], schema=SCHEMA))
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def build_chain_table(warehouse: str, options: dict[str, str] | None = None) -> str:
    """The table (module docstring), with ``options`` besides; its name."""
    catalog = catalog_for(warehouse)
    catalog.create_database("db", True)
    catalog.create_table(NAME, Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=["dt"], primary_keys=["dt", "t1"],
        options={**OPTIONS, **(options or {})}), False)
    for branch in ("snapshot", "delta"):
        catalog.create_branch(NAME, branch, None)
    for dt, rows in SNAPSHOT.items():
        write_partition(catalog, f"{NAME}$branch_snapshot", dt, rows)
    for dt, commits in DELTA.items():
        for rows in commits:
            write_partition(catalog, f"{NAME}$branch_delta", dt, rows)
    return NAME


def chain_model(anchor: str | None, deltas: list[str], dt: str) -> dict[str, tuple[str, str]]:
    """Key -> (t2, v) of partition ``dt`` merged from ``anchor``'s snapshot rows and the
    ``deltas`` in order: the greatest sequence field wins, the later row on a tie."""
    merged: dict[str, tuple[str, str]] = {}
    sources = [SNAPSHOT[anchor]] if anchor else []
    sources += [rows for d in deltas for rows in DELTA[d]]
    for rows in sources:
        for key, sequence, value in rows:
            if key not in merged or sequence >= merged[key][0]:
                merged[key] = (sequence, value)
    return merged


JAVA_SCHEMA = pa.schema([pa.field("t1", pa.string(), nullable=False), ("t2", pa.string()),
                         ("t3", pa.string()), pa.field("dt", pa.string(), nullable=False)])


def chain_table_for_java(warehouse: Path, *, dv: bool = False, grouped: bool = False,
                         options: dict[str, str] | None = None) -> Path:
    """An empty ``db.c`` with both branches, its directory: ``dt`` the partition
    (``grouped``: ``region`` and ``dt``, chained by ``dt`` within each region), ``t1`` the
    key, ``t2`` the sequence field; rows for Java's writer are ``[kind, t1, t2, t3, dt
    (, region)]``."""
    options = {**OPTIONS, **(options or {})}
    if dv:
        options["deletion-vectors.enabled"] = "true"
    schema, partitions = JAVA_SCHEMA, ["dt"]
    if grouped:
        options["chain-table.chain-partition-keys"] = "dt"
        schema = JAVA_SCHEMA.append(pa.field("region", pa.string(), False))
        partitions = ["region", "dt"]
    catalog = catalog_for(str(warehouse))
    catalog.create_database("db", True)
    catalog.create_table(NAME, Schema.from_pyarrow_schema(
        schema, partition_keys=partitions, primary_keys=[*partitions, "t1"], options=options),
        False)
    # Java opens a chain table only once both branches exist: paimond's create-branch (the
    # same bytes as Java's) makes them, as the options are there from the start
    table = open_table(open_storage(str(warehouse)), str(warehouse), NAME)
    create_branch(table, "snapshot")
    create_branch(table, "delta")
    return warehouse / "db.db" / "c"
