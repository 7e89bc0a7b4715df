"""Benchmark: the compaction's writer thread alone: CPU of writing one
primary-key Parquet data file with ``RollingDataFileWriter`` (encode, statistics, key and
sequence tracking), in a child process per run, timed by the thread's CPU clock.

The rows are those of ``bench/compact.py``'s table after a full compaction (unique sorted
``id``, ``name`` of 9,973 distinct strings, ``score`` double, ``rk`` string; ``--deletes``
of them -D), in 32,768-row batches (``lsm.rewrite.BATCH_ROWS``), held in memory before the
clock starts; one untimed write first. ``--before DIR`` runs an older tree (``DIR/paimond``)
interleaved and prints after / before.

    .venv/bin/python bench/data_file_writer.py [--rows 1300000] [--runs 5] [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BATCH_ROWS = 32768


def child(rows: int, deletes: float, directory: str) -> dict[str, float]:
    import numpy as np
    import pyarrow as pa

    from paimond.format.meta.schema import TableSchema
    from paimond.format.types.data_types import BigIntType, DataField, DoubleType, VarCharType
    from paimond.table.data_files.arrow_io import FILE_SOURCE_COMPACT, RollingDataFileWriter
    from paimond.table.data_files.kv_layout import to_key_value_batch
    from paimond.table.options.core import TableOptions
    from paimond.table.storage.interface import open_storage

    string = VarCharType(length=2147483647)
    fields = (DataField(0, "id", BigIntType(nullable=False)), DataField(1, "name", string),
              DataField(2, "score", DoubleType()), DataField(3, "rk", string))
    schema = TableSchema(0, fields, 3, (), ("id",), {"bucket": "1", "rowkind.field": "rk"})
    rng = np.random.default_rng(7)
    ids = np.unique(rng.integers(0, rows * 2, rows * 2))[:rows]
    kinds = (rng.random(len(ids)) < deletes).astype(np.int8) * 3
    values = pa.RecordBatch.from_pydict({
        "id": ids, "name": [f"name-{i % 9973}" for i in ids.tolist()], "score": rng.random(len(ids)),
        "rk": np.where(kinds == 3, "-D", "+I").tolist()})
    sequences = pa.array(rng.permutation(len(ids)).astype(np.int64))
    batch = to_key_value_batch(values, schema, sequences, pa.array(kinds))
    batches = [batch.slice(o, BATCH_ROWS) for o in range(0, batch.num_rows, BATCH_ROWS)]
    storage = open_storage(directory)

    def write() -> None:
        writer = RollingDataFileWriter(storage, "bucket-0", schema, TableOptions.of(schema), level=5,
                                       key_value=True, file_source=FILE_SOURCE_COMPACT,
                                       now_millis=lambda: 0)
        for piece in batches:
            writer.write(piece)
        writer.close()

    write()  # untimed: first use of every kernel
    started = time.thread_time()
    write()
    return {"cpu": time.thread_time() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_300_000)
    parser.add_argument("--deletes", type=float, default=0.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--before", type=Path, help="an older tree (DIR/paimond), interleaved")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(int(args.child[0]), float(args.child[1]), args.child[2])))
        return
    trees: dict[str, Path | None] = {"paimond": None}
    if args.before:
        trees["before"] = args.before
    results: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(args.runs):
        for name, tree in trees.items():
            env = dict(os.environ)
            if tree is not None:
                env["PYTHONPATH"] = str(tree)
            with tempfile.TemporaryDirectory(prefix="paimond-writer-") as directory:
                output = subprocess.run(
                    [sys.executable, __file__, "--child", str(args.rows), str(args.deletes), directory],
                    check=True, capture_output=True, text=True, env=env).stdout
            results[name].append(json.loads(output.splitlines()[-1])["cpu"])
    print(f"== one primary-key data file of {args.rows:,} rows (-D {args.deletes:.0%}), "
          f"writer thread CPU, medians of {args.runs}; load average {os.getloadavg()[0]:.1f}")
    for name, times in results.items():
        print(f"  {name:8} {statistics.median(times):.3f} s  (runs: "
              f"{', '.join(f'{t:.3f}' for t in times)})")
    if args.before:
        ratio = statistics.median(results["paimond"]) / statistics.median(results["before"])
        print(f"  after / before: {ratio:.2f}x")


if __name__ == "__main__":
    main()
