"""Benchmark: what the daemon's regeneration and health figures add to a table's check.
At each new snapshot (or options change) the daemon reads a table's status;
``daemon/tables/watch.py`` reads, from the same scan, which files' indexes are stale, which
buckets miss vectors, the level-0 lag, small files and health. Baseline: ``table_status`` as
the daemon called it before, measured in the same run, interleaved with the figures' own
time; the median of ``--runs``.

Cases on one pypaimon-written append table of ``--commits`` x 4 buckets files:
no index options; a bloom filter configured (every file stale, no head to read); every file
re-indexed with embedded indexes (each head decoded); with ``.index`` files (each head read
once, then from the memory: the second reading is the daemon's steady state). Also one bounded
``rewrite_index`` pass of 100 files.

    .venv/bin/python bench/regeneration.py [--commits 250] [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from paimond.clock import SYSTEM_CLOCK
from paimond.daemon.tables.watch import watch
from paimond.maintenance.regenerate.pending import RegenerationMemory
from paimond.maintenance.regenerate.rewrite_index import IndexRewriteJob
from paimond.table.catalog import Table, open_table
from paimond.table.scan.snapshot_scan import SnapshotFiles, scan_snapshot
from paimond.table.status.report import table_status
from paimond.table.storage.interface import open_storage


def _build(warehouse: Path, commits: int) -> str:
    from pypaimon import CatalogFactory, Schema

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("db", True)
    catalog.create_table("db.t", Schema.from_pyarrow_schema(
        schema, options={"bucket": "4", "bucket-key": "id"}), True)
    table = catalog.get_table("db.t")
    for commit in range(commits):
        builder = table.new_batch_write_builder()
        write, done = builder.new_write(), builder.new_commit()
        ids = list(range(commit * 40, commit * 40 + 40))
        write.write_arrow(pa.table({"id": ids, "v": [f"v{i % 97}" for i in ids]}, schema=schema))
        done.commit(write.prepare_commit())
        write.close()
        done.close()
    return "db.t"


def _alter(warehouse: Path, options: dict[str, str]) -> None:
    from pypaimon import CatalogFactory
    from pypaimon.schema.schema_change import SchemaChange

    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.alter_table("db.t", [SchemaChange.set_option(k, v) for k, v in options.items()])


def _median(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _case(table: Table, label: str, runs: int, memory: RegenerationMemory | None = None) -> None:
    """The status read, and the figures read from its scan, timed apart (interleaved)."""
    kept = memory if memory is not None else RegenerationMemory()
    scans, figures = [], []
    for _ in range(runs):
        files: list[SnapshotFiles] = []
        start = time.perf_counter()
        status = table_status(table, verify_files=False, parallelism=4, on_files=files.append)
        scans.append(time.perf_counter() - start)
        start = time.perf_counter()
        seen = watch(table, status, files[0], kept, SYSTEM_CLOCK.wall_ms())
        figures.append(time.perf_counter() - start)
    scan, extra = statistics.median(scans), statistics.median(figures)
    print(f"{label:<40} status {scan * 1000:6.1f} ms  figures +{extra * 1000:6.1f} ms "
          f"({extra / scan:4.2f}x of the status)  stale {len(seen.needs['rewrite_index'])}"
          f"  health {seen.gauges.get('health', 0):.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=250)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        warehouse = Path(root) / "wh"
        started = time.perf_counter()
        name = _build(warehouse, args.commits)
        table = open_table(open_storage(str(warehouse)), str(warehouse), name)
        latest = table.snapshots.latest()
        assert latest is not None
        files = len(scan_snapshot(table, latest).files)
        print(f"{files} data files, {args.commits} snapshots (built in "
              f"{time.perf_counter() - started:.0f} s); median of {args.runs}")
        _case(table, "no index options", args.runs)
        _alter(warehouse, {"file-index.bloom-filter.columns": "id",
                           "file-index.bloom-filter.id.items": "100"})
        _case(table, "bloom configured, every file stale", args.runs)
        memory = RegenerationMemory()
        started = time.perf_counter()
        one = IndexRewriteJob(table, clock=SYSTEM_CLOCK, max_files=100, memory=memory).run()
        print(f"one bounded rewrite_index pass: {len(one.changes)} files in "
              f"{time.perf_counter() - started:.2f} s ({one.stale_left} left)")
        IndexRewriteJob(table, clock=SYSTEM_CLOCK).run()
        _case(table, "every file indexed, embedded", args.runs)
        _alter(warehouse, {"file-index.in-manifest-threshold": "1b"})
        IndexRewriteJob(table, clock=SYSTEM_CLOCK).run()
        kept = RegenerationMemory()
        _case(table, ".index files, first reading (heads read)", 1, kept)
        _case(table, ".index files, heads from the memory", args.runs, kept)


if __name__ == "__main__":
    main()
