"""CI's check of a plain install: the test environment (with pypaimon) makes a small table
beforehand, a venv holding only the built wheel compacts, expires and reports it, and the test
environment checks the result.

    PYTHONPATH=tests python tests/support/install_check.py make WAREHOUSE    (test environment)
    paimond compact / expire-snapshots / status ...   (the runtime-only venv)
    PYTHONPATH=tests python tests/support/install_check.py verify WAREHOUSE  (test environment)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from paimond.table.catalog import open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_all_types_pk, build_pk_partial_update

EXPECTED = "expected-rows.json"


def make(warehouse: str) -> None:
    """Every type in parquet, and a partial-update table in zstd-compressed avro (the avro
    default of Java and pypaimon; fastavro needs backports.zstd for it below Python 3.14)."""
    expected = {}
    for build in (build_all_types_pk, build_pk_partial_update):
        spec = build(warehouse)
        rows = read_rows(warehouse, spec.name)
        expected[spec.name] = rows.to_pylist()
        print(f"made {spec.name}: {rows.num_rows} rows, files per level {_levels(warehouse, spec.name)}")
    Path(warehouse, EXPECTED).write_text(json.dumps(expected, default=str))


def _levels(warehouse: str, name: str) -> dict[int, int]:
    table = open_table(open_storage(warehouse), warehouse, name)
    latest = table.snapshots.latest()
    assert latest is not None
    levels: dict[int, int] = {}
    for file in scan_snapshot(table, latest).files:
        levels[file.meta.level] = levels.get(file.meta.level, 0) + 1
    return levels


def verify(warehouse: str) -> None:
    for name, content in json.loads(Path(warehouse, EXPECTED).read_text()).items():
        rows = read_rows(warehouse, name)
        assert json.loads(json.dumps(rows.to_pylist(), default=str)) == content, \
            f"pypaimon reads other rows of {name} after the runtime-only paimond maintained it"
        levels = _levels(warehouse, name)
        assert set(levels) == {5}, f"{name} not fully compacted: files per level {levels}"
        table = open_table(open_storage(warehouse), warehouse, name)
        snapshots = table.snapshots.list_ids()
        assert len(snapshots) == 1, f"{name}: snapshots not expired: {snapshots}"
        print(f"verified {name}: {rows.num_rows} rows, files per level {levels}, "
              f"snapshots {snapshots}")


if __name__ == "__main__":
    {"make": make, "verify": verify}[sys.argv[1]](sys.argv[2])
