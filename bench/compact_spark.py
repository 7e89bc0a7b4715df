"""Benchmark: full compaction of one multi-bucket table by the local pool and by Spark.

pypaimon writes two deduplicate tables: "work" (--rows rows over --buckets buckets in
--commits commits of overlapping keys) and "tiny" (the same buckets, a few rows each, so a
task does almost nothing and what is left is overhead). Each is fully compacted from a fresh
copy by:
  - local: CompactJob's process pool, --cores workers;
  - spark: the Spark executor on one local[--cores] session (started once, timed apart),
    first run (cold: Python workers start, the package zip is shipped) then warm runs.
Prints wall seconds, the sum of the tasks' own durations, and the overhead per task: the extra
core-seconds a Spark task costs over the local pool, (spark - local) * cores / tasks; and, to
tell Spark's share from paimond's, what a job of as many no-op Python tasks takes.

    .venv/bin/python bench/compact_spark.py [--rows 1000000] [--buckets 16] [--cores 2]
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NOW = datetime.datetime(2026, 11, 22, 12)


def generate(warehouse: Path, rows: int, buckets: int, commits: int) -> None:
    import numpy as np
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()),
                        ("score", pa.float64())])
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("bench", True)
    catalog.create_table("bench.t", Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": str(buckets)}), True)
    table = catalog.get_table("bench.t")
    rng = np.random.default_rng(7)
    for _ in range(commits):
        ids = np.unique(rng.integers(0, rows, max(rows // commits, buckets * 4)))
        data = pa.table({"id": ids, "name": pa.array([f"name-{i % 9973}" for i in ids.tolist()]),
                         "score": rng.random(len(ids))}, schema=schema)
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(data)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()


def compact(source: Path, scratch: Path, cores: int, executor: Any) -> dict[str, float]:
    from paimond.clock import Clock
    from paimond.maintenance.compact import CompactJob
    from paimond.table.catalog import open_table
    from paimond.table.storage import open_storage

    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(source, scratch)
    warehouse = str(scratch)
    table = open_table(open_storage(warehouse), warehouse, "bench.t")
    job = CompactJob(table, full=True, parallelism=cores, use_processes=True,
                     clock=Clock(fixed_ms=int(NOW.timestamp() * 1000)), executor=executor)
    started = time.perf_counter()
    summary = job.run()
    wall = time.perf_counter() - started
    assert not summary.failures and summary.snapshot is not None, summary.describe()
    return {"wall_s": wall, "tasks": len(summary.results), "rows": summary.rows_read,
            "task_s": sum(r.duration_s for r in summary.results)}


def _noop_job_s(spark: Any, tasks: int) -> float:
    """Spark's own cost of a Python task here: the median of 3 jobs that do nothing."""
    context = spark.sparkContext
    walls = []
    for _ in range(3):
        started = time.perf_counter()
        context.parallelize(range(tasks), tasks).map(lambda x: x).collect()
        walls.append(time.perf_counter() - started)
    return statistics.median(walls)


def _row(name: str, m: dict[str, float]) -> str:
    return (f"  {name:<12} {m['wall_s']:8.2f} s wall   {m['task_s']:7.2f} s in tasks   "
            f"{m['tasks']:.0f} tasks   {m['rows'] / m['wall_s']:12,.0f} rows/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--buckets", type=int, default=16)
    parser.add_argument("--commits", type=int, default=8)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--warm-runs", type=int, default=3)
    args = parser.parse_args()

    from paimond.spark.executor import SparkExecutor, spark_session

    root = Path(tempfile.mkdtemp(prefix="paimond-bench-spark-"))
    try:
        tables = {"tiny": (args.buckets * 50, 4), "work": (args.rows, args.commits)}
        for name, (rows, commits) in tables.items():
            started = time.perf_counter()
            generate(root / name, rows, args.buckets, commits)
            print(f"{name}: {rows:,} rows in {args.buckets} buckets, {commits} commits "
                  f"(written by pypaimon in {time.perf_counter() - started:.1f} s)")
        started = time.perf_counter()
        spark = spark_session(f"local[{args.cores}]", "paimond-bench")
        spark.sparkContext.setLogLevel("ERROR")
        print(f"Spark {spark.version} session local[{args.cores}] started in "
              f"{time.perf_counter() - started:.1f} s; {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.1f}\n")
        executor = SparkExecutor(spark)
        for name in tables:
            local = compact(root / name, root / "scratch", args.cores, None)
            cold = compact(root / name, root / "scratch", args.cores, executor)
            warm = [compact(root / name, root / "scratch", args.cores, executor)
                    for _ in range(args.warm_runs)]
            median = {k: statistics.median(w[k] for w in warm) for k in warm[0]}
            print(f"{name}:")
            print(_row("local pool", local))
            print(_row("spark cold", cold))
            print(_row("spark warm", median) + f"   (median of {args.warm_runs})")
            for label, m in (("cold", cold), ("warm", median)):
                extra = (m["wall_s"] - local["wall_s"]) * args.cores / m["tasks"]
                print(f"  overhead per task, {label}: {extra * 1000:8.0f} ms of a core")
            noop = _noop_job_s(spark, int(median["tasks"]))
            print(f"  (a no-op Python job of {median['tasks']:.0f} Spark tasks: {noop:.2f} s, "
                  f"{noop * args.cores / median['tasks'] * 1000:.0f} ms of a core per task)")
            print()
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
