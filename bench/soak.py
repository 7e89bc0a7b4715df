"""Benchmark: the daemon keeping up under continuous ingestion (a soak).

Builds N write-only primary-key tables (pypaimon), starts `paimond run` on them as a real
process at its defaults (check interval a parameter), and has one pypaimon writer commit small
batches round-robin at a steady rate for the duration. Every couple of seconds it samples, from
metadata only: each bucket's sorted runs, each table's retained snapshots, and the daemon's RSS
and CPU. Prints the worst sorted-run count against `num-sorted-run.stop-trigger`, retained
snapshots against the bound of retention plus one expire interval, and RSS (first, last, max),
with the writer's baseline (commits per second) measured in the same run.

    .venv/bin/python bench/soak.py [--tables 12] [--duration-s 60] [--commits-per-s 11]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow as pa

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
RETAINED_S = 60  # snapshot.time-retained of the tables
RETAIN_MIN = 10  # snapshot.num-retained.min (Paimon's default)
EXPIRE_INTERVAL_S = 300.0  # the daemon's default [jobs.expire] interval_s


def _proc(pid: int) -> tuple[float, float]:
    """(CPU seconds, RSS MB) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    return cpu, rss


def build(warehouse: Path, tables: int) -> list[object]:
    from pypaimon import CatalogFactory, Schema

    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("soak", True)
    handles = []
    for i in range(tables):
        catalog.create_table(f"soak.t{i}", Schema.from_pyarrow_schema(
            SCHEMA, primary_keys=["id"], options={
                "bucket": "1", "write-only": "true",
                "snapshot.time-retained": f"{RETAINED_S} s"}), True)
        handles.append(catalog.get_table(f"soak.t{i}"))
    return handles


def _commit(table: object, first_id: int) -> None:
    ids = list(range(first_id, first_id + 50))
    builder = table.new_batch_write_builder()  # type: ignore[attr-defined]
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.table({"id": ids, "v": [f"v{i}" for i in ids]}, schema=SCHEMA))
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


class Sampler(threading.Thread):
    """Metadata-only samples of every table, and the daemon's CPU and RSS."""

    def __init__(self, warehouse: Path, tables: int, pid: int, every_s: float) -> None:
        super().__init__(daemon=True)
        from paimond.table.catalog import open_table
        from paimond.table.storage.interface import open_storage

        storage = open_storage(str(warehouse))
        self.tables = [open_table(storage, str(warehouse), f"soak.t{i}") for i in range(tables)]
        self.pid, self.every_s = pid, every_s
        self.stopped = threading.Event()
        self.max_runs = 0
        self.runs: list[tuple[float, int]] = []  # (seconds since start, max runs then)
        self.started = time.monotonic()
        self.stop_trigger = 0
        self.max_snapshots = 0
        self.last_snapshots = 0
        self.rss: list[float] = []
        self.samples = 0

    def run(self) -> None:
        from paimond.table.status.report import table_status

        while not self.stopped.wait(self.every_s):
            worst = 0
            for table in self.tables:
                try:
                    status = table_status(table, verify_files=False)
                except Exception:  # noqa: BLE001 - a sample racing an expiry: the next one
                    continue
                runs = max((b.sorted_runs for b in status.buckets), default=0)
                self.max_runs = max(self.max_runs, runs)
                worst = max(worst, runs)
                self.stop_trigger = status.stop_trigger or self.stop_trigger
                self.max_snapshots = max(self.max_snapshots, status.snapshot_count)
            self.last_snapshots = max((table_status(t, verify_files=False).snapshot_count
                                       for t in self.tables), default=0)
            self.runs.append((time.monotonic() - self.started, worst))
            self.rss.append(_proc(self.pid)[1])
            self.samples += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=12)
    parser.add_argument("--duration-s", type=float, default=60.0)
    parser.add_argument("--commits-per-s", type=float, default=11.0)
    parser.add_argument("--check-interval-s", type=float, default=10.0)
    parser.add_argument("--sample-every-s", type=float, default=2.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="paimond-soak-") as scratch:
        warehouse = Path(scratch) / "wh"
        tables = build(warehouse, args.tables)
        # the writer's baseline, before the daemon starts: commits per second it can do
        started = time.monotonic()
        for i, table in enumerate(tables):
            _commit(table, i)
        baseline = len(tables) / (time.monotonic() - started)
        config = Path(scratch) / "paimond.toml"
        config.write_text(f'[[warehouses]]\nuri = "{warehouse}"\n[http]\nport = 0\n'
                          f"[daemon]\ncheck_interval_s = {args.check_interval_s}\n"
                          '[log]\nlevel = "warning"\n')
        process = subprocess.Popen([sys.executable, "-m", "paimond.cli", "run",
                                    "--config", str(config)], stderr=subprocess.PIPE, text=True)
        assert process.stderr is not None
        match = None
        while match is None:
            match = re.search(r"serving (http://\S+)/metrics", process.stderr.readline())
            if match is None and process.poll() is not None:
                raise SystemExit("the daemon did not start")
        errors = process.stderr
        threading.Thread(target=errors.read, daemon=True).start()  # drained, not kept
        sampler = Sampler(warehouse, args.tables, process.pid, args.sample_every_s)
        sampler.start()
        cpu_before = _proc(process.pid)[0]
        started = time.monotonic()
        commits, next_at = 0, started
        while time.monotonic() - started < args.duration_s:
            _commit(tables[commits % len(tables)], 1000 + 25 * commits)
            commits += 1
            next_at += 1 / args.commits_per_s
            time.sleep(max(0.0, next_at - time.monotonic()))
        wall = time.monotonic() - started
        cpu = _proc(process.pid)[0] - cpu_before
        # snapshots created per table and second: the writer's and the daemon's own
        created = max(t.snapshots.latest_id() or 0 for t in sampler.tables) / (
            time.monotonic() - sampler.started)
        sampler.stopped.set()
        sampler.join()
        process.send_signal(signal.SIGTERM)
        process.wait(120)
    bound = RETAIN_MIN + created * (RETAINED_S + EXPIRE_INTERVAL_S)
    rss = sampler.rss or [0.0]
    print(f"{args.tables} tables, {commits} commits in {wall:.0f} s = {commits / wall:.1f}/s "
          f"(writer alone: {baseline:.1f}/s), check interval {args.check_interval_s} s, "
          f"{sampler.samples} samples")
    settled = [runs for at, runs in sampler.runs if at >= args.check_interval_s] or [0]
    print(f"max sorted runs in any bucket: {sampler.max_runs} (stop trigger "
          f"{sampler.stop_trigger}; ratio {sampler.max_runs / max(1, sampler.stop_trigger):.2f}); "
          f"after the first check interval (the daemon's first compactions load their code): "
          f"{max(settled)}, median {sorted(settled)[len(settled) // 2]}")
    print(f"retained snapshots per table: max {sampler.max_snapshots}, at the end "
          f"{sampler.last_snapshots} (bound: retention {RETAINED_S} s + one expire interval "
          f"{EXPIRE_INTERVAL_S:.0f} s at {created:.2f} snapshots/s per table = {bound:.0f})")
    quarter, half = rss[len(rss) // 4], rss[len(rss) // 2]
    print(f"daemon RSS MB: first {rss[0]:.0f}, at 1/4 {quarter:.0f}, at 1/2 {half:.0f}, last "
          f"{rss[-1]:.0f}, max {max(rss):.0f}; CPU {100 * cpu / wall:.0f}% of one core")


if __name__ == "__main__":
    main()
