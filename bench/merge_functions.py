"""Benchmark: full compaction of the same table under different merge functions, in one run.

pypaimon writes one bucket (default 2M rows in 20 commits; keys drawn from rows/4, so a key
has about four versions) as a deduplicate table; each contender then gets a copy whose newest
schema only changes the merge options (as tests/maintenance/test_merge_functions_oracle.py
does) and paimond compacts it fully, each in a fresh process:
  - deduplicate: the baseline (Arrow kernels);
  - sum: aggregation, ``amount`` summed, the rest last_non_null_value (Arrow kernels);
  - listagg: aggregation, ``tag`` joined with listagg (per key in Python, lsm/merge/row_merge.py);
  - sequence-group: partial-update, ``tag,amount`` guarded by ``seq`` (per key in Python);
  - nested_update: aggregation, ``items`` (ARRAY<ROW>, 0-2 rows) keyed by ``id`` (per key,
    lsm/merge/nested_aggregates.py);
  - rbm64: aggregation, ``bm`` ORed as Java Roaring64Bitmaps (per key, format/roaring/bitmap64.py;
    bitmaps of 1-20 values drawn from a pool of 64).
Prints seconds, input rows/s and peak RSS, and each time over deduplicate's.

    .venv/bin/python bench/merge_functions.py [--rows 2000000] [--commits 20]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CONTENDERS = {
    "deduplicate": {},
    "sum": {"merge-engine": "aggregation", "fields.amount.aggregate-function": "sum"},
    "listagg": {"merge-engine": "aggregation", "fields.tag.aggregate-function": "listagg"},
    "sequence-group": {"merge-engine": "partial-update", "fields.seq.sequence-group": "tag,amount"},
    "nested_update": {"merge-engine": "aggregation",
                      "fields.items.aggregate-function": "nested_update",
                      "fields.items.nested-key": "id"},
    "rbm64": {"merge-engine": "aggregation", "fields.bm.aggregate-function": "rbm64"},
}


def generate(warehouse: Path, rows: int, commits: int) -> None:
    import numpy as np
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    from paimond.format.roaring.bitmap64 import encode_values

    item = pa.struct([("id", pa.int32()), ("v", pa.int32())])
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("tag", pa.string()),
                        ("amount", pa.int64()), ("seq", pa.int64()),
                        ("items", pa.list_(item)), ("bm", pa.binary()), ("rk", pa.string())])
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("bench", True)
    catalog.create_table("bench.t", Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": "1", "rowkind.field": "rk",
                                              "target-file-size": "512 mb"}), True)
    table = catalog.get_table("bench.t")
    rng = np.random.default_rng(7)
    pool = pa.array([encode_values(rng.integers(0, 1 << 40, rng.integers(1, 21)).astype(
        np.uint64)) for _ in range(64)], pa.binary())
    per_commit = rows // commits
    for _ in range(commits):
        ids = np.unique(rng.integers(0, max(1, rows // 4), per_commit))
        data = pa.table({
            "id": ids, "tag": pa.array([f"t{i % 97}" for i in ids.tolist()]),
            "amount": rng.integers(0, 1000, len(ids)), "seq": rng.integers(0, 50, len(ids)),
            "items": _items(rng, len(ids), item), "bm": pool.take(rng.integers(0, 64, len(ids))),
            "rk": pa.array(["+I"] * len(ids)),
        }, schema=schema)
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(data)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()


def _items(rng: Any, count: int, item: Any) -> Any:
    """``count`` nested tables of 0-2 rows, ids 0-3."""
    import numpy as np
    import pyarrow as pa

    sizes = rng.integers(0, 3, count)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int32)
    total = int(offsets[-1])
    rows = pa.StructArray.from_arrays([pa.array(rng.integers(0, 4, total), pa.int32()),
                                       pa.array(rng.integers(0, 100, total), pa.int32())],
                                      fields=list(item))
    return pa.ListArray.from_arrays(pa.array(offsets), rows, type=pa.list_(item))


def _switch(warehouse: Path, options: dict[str, str]) -> None:
    """A second schema version with the contender's merge options."""
    if not options:
        return
    schema_dir = warehouse / "bench.db" / "t" / "schema"
    schema = json.loads((schema_dir / "schema-0").read_text())
    schema |= {"id": 1, "options": schema["options"] | options}
    (schema_dir / "schema-1").write_text(json.dumps(schema))


def child(warehouse: str) -> None:
    from paimond.clock import SYSTEM_CLOCK
    from paimond.maintenance.compact.job import CompactJob
    from paimond.table.catalog import open_table
    from paimond.table.storage.interface import open_storage

    table = open_table(open_storage(warehouse), warehouse, "bench.t")
    started = time.perf_counter()
    summary = CompactJob(table, clock=SYSTEM_CLOCK, full=True, use_processes=False).run()
    elapsed = time.perf_counter() - started
    assert summary.snapshot is not None and not summary.failures, summary.describe()
    with open("/proc/self/status") as status:
        rss = next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmHWM:"))
    print(json.dumps({"seconds": elapsed, "rows_in": summary.rows_read,
                      "rows_out": summary.rows_written, "peak_rss_mb": rss}))


def measure(name: str, source: Path, scratch: Path) -> dict[str, float]:
    copy = scratch / name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source, copy)
    _switch(copy, CONTENDERS[name])
    out = subprocess.run([sys.executable, __file__, "--child", str(copy)], check=True,
                         capture_output=True, text=True)
    shutil.rmtree(copy, ignore_errors=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--only", nargs="+", choices=sorted(CONTENDERS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    with tempfile.TemporaryDirectory(prefix="paimond-bench-") as scratch_dir:
        scratch = Path(scratch_dir)
        source = scratch / "source"
        started = time.perf_counter()
        generate(source, args.rows, args.commits)
        print(f"== {args.rows:,} rows in {args.commits} commits, keys from {args.rows // 4:,} "
              f"(generated in {time.perf_counter() - started:.1f} s)")
        base = None
        for name in args.only or CONTENDERS:
            r = measure(name, source, scratch)
            base = base or (r["seconds"] if name == "deduplicate" else None)
            ratio = f"  {r['seconds'] / base:5.1f}x deduplicate" if base else ""
            print(f"  {name:<15} {r['seconds']:7.2f} s  {r['rows_in'] / r['seconds']:11,.0f} "
                  f"input rows/s  peak RSS {r['peak_rss_mb']:6.0f} MB  rows out "
                  f"{int(r['rows_out']):,}{ratio}", flush=True)


if __name__ == "__main__":
    main()
