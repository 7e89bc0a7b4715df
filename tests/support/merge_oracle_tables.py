"""Random commits of row kinds written by pypaimon, for merge functions checked against the
oracles."""

from __future__ import annotations

import datetime
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from pypaimon import Schema

from paimond.clock import Clock
from support.pypaimon_tables import catalog_for

CLOCK = Clock(fixed_ms=int(datetime.datetime(2026, 11, 25, 12).timestamp() * 1000))


KINDS = ("+I", "+U", "-U", "-D")


Row = dict[str, Any]


def write_rows(warehouse: str, name: str, schema: pa.Schema, options: dict[str, str],
               commits: list[list[Row]], altered: dict[str, str]) -> None:
    catalog = catalog_for(warehouse)
    catalog.create_database("db", True)
    catalog.create_table(name, Schema.from_pyarrow_schema(schema, primary_keys=["k"],
                                                          options=options), False)
    table = catalog.get_table(name)
    for rows in commits:
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(pa.Table.from_pylist(rows, schema=schema))
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
    if altered:  # Paimon (and pypaimon) refuse to ALTER the merge engine: a new schema file
        schema_dir = Path(warehouse) / "db.db" / name.split(".")[1] / "schema"
        latest = json.loads((schema_dir / "schema-0").read_text())
        latest |= {"id": 1, "options": latest["options"] | altered}
        (schema_dir / "schema-1").write_text(json.dumps(latest))


def random_commits(rng: random.Random, make: Callable[[random.Random, int], Row], count: int = 7,
                   keys: int = 25, kinds: tuple[str, ...] = KINDS) -> list[list[Row]]:
    """Each key's first version is +I: the Java reader's Paimon 1.0 starts a key that opens
    with a retraction from its NOT NULL fields only (apache/paimon a45be9f0d2 changed that to
    every field, which paimond follows; tests/lsm/test_row_merge.py covers it)."""
    seen: set[int] = set()
    commits = []
    for _ in range(count):
        rows = []
        for k in sorted(rng.sample(range(keys), 18)):
            rows.append(make(rng, k) | {"rk": rng.choice(kinds) if k in seen else "+I"})
            seen.add(k)
        commits.append(rows)
    return commits
