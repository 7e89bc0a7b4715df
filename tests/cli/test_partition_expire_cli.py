"""`paimond expire-partitions`: dry run, a drop, nothing to do, bad flags (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pypaimon import Schema
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import catalog_for
from support.table_history import tree

from paimond.cli.main import main

SCHEMA = pa.schema([pa.field("dt", pa.string()), pa.field("id", pa.int32())])
DAYS = ["20240101", "20240102", "29991231"]  # the last never expires in a test's lifetime


def _table(warehouse: str, name: str, keys: list[str], options: dict[str, str]) -> None:
    catalog = catalog_for(warehouse)
    catalog.create_database("db", True)
    catalog.create_table(name, Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=keys, options={"bucket": "-1", **options}), False)
    builder = catalog.get_table(name).new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.Table.from_pylist([{"dt": d, "id": i} for i, d in enumerate(DAYS)],
                                           schema=SCHEMA))
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    path = str(tmp_path / "wh")
    _table(path, "db.days", ["dt"], {"partition.timestamp-formatter": "yyyyMMdd"})
    _table(path, "db.plain", [], {"partition.expiration-time": "1 d"})
    return path


def test_dry_run_then_drop(warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = tree(warehouse)
    args = ["expire-partitions", warehouse, "--table", "db.days", "--older-than", "1 d"]
    assert main([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "2 partition(s) would be dropped (dry run)" in out and "dt=20240101" in out
    assert tree(warehouse) == before
    assert main([*args, "--max-num", "1"]) == 0
    assert "dt=20240101" in capsys.readouterr().out
    assert sorted(read_rows(warehouse, "db.days").column("dt").to_pylist()) == DAYS[1:]
    assert main(args) == 0
    assert "dropped in OVERWRITE snapshot(s) 3" in capsys.readouterr().out
    assert read_rows(warehouse, "db.days").column("dt").to_pylist() == DAYS[2:]


def test_nothing_to_do_exits_0(warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = tree(warehouse)
    assert main(["expire-partitions", warehouse, "--table", "db.days"]) == 0
    assert "partition.expiration-time is not set" in capsys.readouterr().out
    assert main(["expire-partitions", warehouse, "--table", "db.plain"]) == 0
    assert "not partitioned" in capsys.readouterr().out
    assert tree(warehouse) == before


def test_a_bad_duration_is_a_usage_error(warehouse: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["expire-partitions", warehouse, "--table", "db.days",
                 "--older-than", "soon"]) == 2
    assert "--older-than" in capsys.readouterr().err
