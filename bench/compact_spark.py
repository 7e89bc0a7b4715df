"""Benchmark: full compaction of one multi-bucket table by a single process, the local pool and
Spark on local-cluster (separate executor JVMs); then orphan removal of many files by the
single-process job and by Spark tasks.

pypaimon writes two deduplicate tables: "work" (--rows rows over --buckets buckets in
--commits commits of overlapping keys) and "tiny" (the same buckets, a few rows each, so a
task does almost nothing and what is left is overhead). Each is fully compacted from a fresh
copy by:
  - single: one process (CompactJob with parallelism 1, in threads);
  - local: CompactJob's process pool, --cores workers;
  - spark: the Spark executor on one --master session (default local-cluster[2,1,1024]: two
    executor JVMs of one core, Python workers on this venv; started once, timed apart),
    first run (cold: Python workers start, the package zip is shipped) then warm runs.
Prints wall seconds, the sum of the tasks' own durations, and the overhead per task: the extra
core-seconds a Spark task costs over the local pool, (spark - local) * cores / tasks; and, to
tell Spark's share from paimond's, what a job of as many no-op Python tasks takes.

Orphans (--orphan-files N, 0 to skip): a small table whose bucket directories also hold N
unreferenced empty files (made with os.open, aged past the window), made twice; orphan removal
by one process, then with the Spark executor (listing and deleting in Spark tasks).

    .venv/bin/python bench/compact_spark.py [--rows 1000000] [--buckets 32] [--cores 2]
        [--master local-cluster[2,1,1024]] [--orphan-files 200000]
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


def compact(source: Path, scratch: Path, cores: int, executor: Any, *, processes: bool = True
            ) -> dict[str, float]:
    from paimond.clock import Clock
    from paimond.maintenance.compact.job import CompactJob
    from paimond.table.catalog import open_table
    from paimond.table.storage.interface import open_storage

    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(source, scratch)
    warehouse = str(scratch)
    table = open_table(open_storage(warehouse), warehouse, "bench.t")
    job = CompactJob(table, full=True, parallelism=cores, use_processes=processes,
                     clock=Clock(fixed_ms=int(NOW.timestamp() * 1000)), executor=executor)
    started = time.perf_counter()
    summary = job.run()
    wall = time.perf_counter() - started
    assert not summary.failures and summary.snapshot is not None, summary.describe()
    return {"wall_s": wall, "tasks": len(summary.results), "rows": summary.rows_read,
            "task_s": sum(r.duration_s for r in summary.results)}


def plant_orphans(warehouse: Path, files: int) -> int:
    """``files`` empty unreferenced data files spread over the table's bucket directories,
    everything aged two days; returns how many."""
    table_root = warehouse / "bench.db" / "t"
    buckets = sorted(p for p in table_root.glob("bucket-*") if p.is_dir())
    for i in range(files):
        os.close(os.open(buckets[i % len(buckets)] / f"data-orphan-{i}.parquet",
                         os.O_CREAT | os.O_WRONLY, 0o644))
    old = NOW.timestamp() - 2 * 86_400
    for path in table_root.rglob("*"):
        os.utime(path, (old, old))
    return files


def remove_orphans(warehouse: Path, executor: Any) -> dict[str, float]:
    from paimond.clock import Clock
    from paimond.maintenance.expire.orphans import OrphanJob
    from paimond.table.catalog import open_table
    from paimond.table.storage.interface import open_storage

    table = open_table(open_storage(str(warehouse)), str(warehouse), "bench.t")
    started = time.perf_counter()
    result = OrphanJob(table, clock=Clock(fixed_ms=int(NOW.timestamp() * 1000)),
                       executor=executor).run()
    return {"wall_s": time.perf_counter() - started, "removed": result.removed.total_files,
            "examined": result.examined_files}


def cluster_session(master: str, cores: int) -> Any:
    """A Spark session on ``master`` (local-cluster: executors are separate JVMs, their Python
    this venv's; its workers' directories are temporary, removed at stop)."""
    if not master.startswith("local-cluster"):
        from paimond.spark.executor import spark_session

        return spark_session(master, "paimond-bench")
    from pyspark.find_spark_home import _find_spark_home
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return (SparkSession.builder.master(master).appName("paimond-bench")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
            .config("spark.testing", "true").config("spark.test.home", str(_find_spark_home()))
            .getOrCreate())


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
    parser.add_argument("--buckets", type=int, default=32)
    parser.add_argument("--commits", type=int, default=8)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--warm-runs", type=int, default=3)
    parser.add_argument("--master", default="local-cluster[2,1,1024]")
    parser.add_argument("--orphan-files", type=int, default=200_000)
    args = parser.parse_args()

    from paimond.spark.executor import SparkExecutor

    root = Path(tempfile.mkdtemp(prefix="paimond-bench-spark-"))
    try:
        tables = {"tiny": (args.buckets * 50, 4), "work": (args.rows, args.commits)}
        for name, (rows, commits) in tables.items():
            started = time.perf_counter()
            generate(root / name, rows, args.buckets, commits)
            print(f"{name}: {rows:,} rows in {args.buckets} buckets, {commits} commits "
                  f"(written by pypaimon in {time.perf_counter() - started:.1f} s)")
        started = time.perf_counter()
        spark = cluster_session(args.master, args.cores)
        spark.sparkContext.setLogLevel("ERROR")
        print(f"Spark {spark.version} session {args.master} started in "
              f"{time.perf_counter() - started:.1f} s; {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.1f}\n")
        executor = SparkExecutor(spark)
        for name in tables:
            single = compact(root / name, root / "scratch", 1, None, processes=False)
            local = compact(root / name, root / "scratch", args.cores, None)
            cold = compact(root / name, root / "scratch", args.cores, executor)
            warm = [compact(root / name, root / "scratch", args.cores, executor)
                    for _ in range(args.warm_runs)]
            median = {k: statistics.median(w[k] for w in warm) for k in warm[0]}
            print(f"{name}:")
            print(_row("single", single))
            print(_row("local pool", local))
            print(_row("spark cold", cold))
            print(_row("spark warm", median) + f"   (median of {args.warm_runs})")
            for label, m in (("cold", cold), ("warm", median)):
                extra = (m["wall_s"] - local["wall_s"]) * args.cores / m["tasks"]
                print(f"  overhead per task, {label}: {extra * 1000:8.0f} ms of a core")
            noop = _noop_job_s(spark, int(median["tasks"]))
            print(f"  (a no-op Python job of {median['tasks']:.0f} Spark tasks: {noop:.2f} s, "
                  f"{noop * args.cores / median['tasks'] * 1000:.0f} ms of a core per task)")
            print(f"  spark warm vs single process: {single['wall_s'] / median['wall_s']:.2f}x, "
                  f"vs local pool: {local['wall_s'] / median['wall_s']:.2f}x")
            print()
        if args.orphan_files:
            runs = {}
            for label, with_executor in (("single", None), ("spark", executor)):
                warehouse = root / f"orphans-{label}"
                generate(warehouse, args.buckets * 100, args.buckets, 2)
                started = time.perf_counter()
                plant_orphans(warehouse, args.orphan_files)
                made = time.perf_counter() - started
                runs[label] = remove_orphans(warehouse, with_executor)
                print(f"orphans, {label}: {runs[label]['removed']:,.0f} of "
                      f"{runs[label]['examined']:,.0f} files removed in "
                      f"{runs[label]['wall_s']:.2f} s (files made in {made:.1f} s)")
            print(f"orphan removal, spark vs single process: "
                  f"{runs['single']['wall_s'] / runs['spark']['wall_s']:.2f}x")
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
