"""Benchmark: lookup changelog production against plain lookup compaction, same table state.

A primary-key table, one bucket, holds N rows (default 2M; hash-like BIGINT keys) at the max
level. Each round pypaimon commits K upserts (default 200k: half existing keys, half new) to
level 0, and paimond compacts the very same table state (restored from a copy) once per
mode; only the table's options differ (its schema file is edited in the copy):
  - plain: the lookup compaction a deletion-vector table gets anyway (level-0 keys looked
    up above, superseded rows marked), no changelog;
  - changelog: the same with ``changelog-producer=lookup``: superseded rows read as "before"
    values, changelog rows built and written to changelog files;
  - changelog-dedupe: also ``changelog-producer.row-deduplicate=true``.
Prints seconds per mode and round, the changelog rows written, and the ratios against plain
measured in the same run.

    .venv/bin/python bench/changelog_compact.py [--rows 2000000] [--keys 200000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

NAME = "bench.cl"
MODES: dict[str, dict[str, str]] = {
    "plain": {},
    "changelog": {"changelog-producer": "lookup"},
    "changelog-dedupe": {"changelog-producer": "lookup",
                         "changelog-producer.row-deduplicate": "true"},
}
CLOCK_MS = int(datetime.datetime(2026, 11, 22, 12).timestamp() * 1000)


def key_of(numbers: Any) -> Any:
    """Distinct, hash-like keys (as ids or hashed keys are)."""
    import numpy as np

    mixed = numbers.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)  # wraps: a bijection
    return (mixed >> np.uint64(1)).astype(np.int64)


def _write(table: Any, ids: Any, round_no: int) -> None:
    import numpy as np
    import pyarrow as pa

    data = pa.table({"id": pa.array(ids, pa.int64()),
                     "v": pa.array(np.char.add(f"r{round_no}-", (ids % 1000).astype(str))),
                     "n": pa.array(ids % 7, pa.int64())})
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(data)
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def build(warehouse: Path, rows: int) -> Any:
    import numpy as np
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("bench", True)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()),
                        ("n", pa.int64())])
    catalog.create_table(NAME, Schema.from_pyarrow_schema(
        schema, primary_keys=["id"],
        options={"bucket": "1", "deletion-vectors.enabled": "true",
                 "target-file-size": "1 gb"}), True)
    table = catalog.get_table(NAME)
    step = 1_000_000
    for start in range(0, rows, step):
        _write(table, key_of(np.arange(start, min(rows, start + step), dtype=np.int64)), -1)
    compact(warehouse)
    return table


def write_round(table: Any, rows: int, keys: int, round_no: int) -> None:
    import numpy as np

    rng = np.random.default_rng(round_no)
    existing = rng.integers(0, rows, keys // 2)
    new = rows + round_no * keys + np.arange(keys - keys // 2)
    _write(table, key_of(np.unique(np.concatenate([existing, new]))), round_no)


def set_options(warehouse: Path, options: dict[str, str]) -> None:
    """Edit the options of every schema file of the copy (the table is otherwise the same)."""
    for path in (warehouse / "bench.db" / "cl" / "schema").glob("schema-*"):
        schema = json.loads(path.read_text())
        schema["options"] = {k: v for k, v in schema["options"].items()
                             if not k.startswith("changelog-producer")} | options
        path.write_text(json.dumps(schema))


def compact(warehouse: Path) -> dict[str, Any]:
    from paimond.clock import Clock
    from paimond.maintenance.compact.job import CompactJob
    from paimond.table.catalog import open_table
    from paimond.table.storage.interface import open_storage

    table = open_table(open_storage(str(warehouse)), str(warehouse), NAME)
    started = time.perf_counter()
    summary = CompactJob(table, use_processes=False, parallelism=1,
                         clock=Clock(fixed_ms=CLOCK_MS)).run()
    seconds = time.perf_counter() - started
    assert summary.snapshot is not None and not summary.failures, summary.describe()
    return {"seconds": seconds,
            "changelog_rows": summary.snapshot.changelog_record_count or 0,
            "superseded": sum(r.rows_superseded for r in summary.results)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="paimond-changelog-bench-"))
    try:
        warehouse, saved = root / "wh", root / "saved"
        print(f"building {args.rows:,} rows at the max level ...", flush=True)
        started = time.perf_counter()
        table = build(warehouse, args.rows)
        print(f"  built in {time.perf_counter() - started:.1f} s", flush=True)
        results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
        for round_no in range(1, args.rounds + 1):
            write_round(table, args.rows, args.keys, round_no)
            shutil.rmtree(saved, ignore_errors=True)
            shutil.copytree(warehouse, saved)
            if round_no == 1:  # warm-up, not timed (imports, first file reads)
                shutil.rmtree(warehouse)
                shutil.copytree(saved, warehouse)
                compact(warehouse)
            for mode, options in MODES.items():  # each mode compacts the same table state
                shutil.rmtree(warehouse)
                shutil.copytree(saved, warehouse)
                set_options(warehouse, options)
                result = compact(warehouse)
                results[mode].append(result)
                print(f"round {round_no} {mode:17s} {result['seconds']:7.3f} s  changelog rows "
                      f"{result['changelog_rows']:,}  superseded {result['superseded']:,}",
                      flush=True)
            # the next round starts from the last mode's result
        plain = statistics.median(r["seconds"] for r in results["plain"])
        print(f"\nmedian over {args.rounds} rounds ({args.keys:,} level-0 keys on "
              f"{args.rows:,} rows):")
        for mode in MODES:
            seconds = statistics.median(r["seconds"] for r in results[mode])
            print(f"  {mode:17s} {seconds:7.3f} s  x{seconds / plain:.2f} of plain")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
