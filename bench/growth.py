"""Benchmark: does the cost grow with the work, or faster (issue #22, goal 5)?

Each case runs at sizes n, 2n, 4n and prints the CPU seconds and the growth factor per
doubling (2.0 is linear; 4.0 quadratic). Baselines are the smaller sizes of the same run.

- ``status``: ``paimond status WAREHOUSE --no-verify`` as a process, over N tables (one
  pypaimon-written table, copied), minus the same command over one table (start-up and
  imports), measured alike.
- ``idle check``: the daemon's per-table check (``Table.watched_latest_id``) over N tables,
  30 rounds, in process.
- ``expire``: ``paimond expire-snapshots --retain-max 1`` of a table with S writer commits
  (pypaimon, one row each; never merged, so its manifest lists grow with S), minus the same
  command on a one-snapshot table.

    .venv/bin/python bench/growth.py [--tables 250] [--snapshots 100]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from s3_requests import write_pk_table  # noqa: E402


def _process_cpu_s(argv: list[str]) -> float:
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{argv} failed")
    return usage.ru_utime + usage.ru_stime


def _paimond(*args: str) -> list[str]:
    return [sys.executable, "-m", "paimond.cli", *args]


def _tables(scratch: Path, count: int) -> Path:
    source = scratch / "source"
    if not source.exists():
        write_pk_table(str(source), 1, "db.t0")
    warehouse = scratch / f"tables-{count}"
    (warehouse / "db.db").mkdir(parents=True)
    for i in range(count):
        shutil.copytree(source / "db.db" / "t0", warehouse / "db.db" / f"t{i}")
    return warehouse


def _status_cpu_s(scratch: Path, count: int) -> float:
    warehouse = _tables(scratch, count)
    one = scratch / "tables-1"
    if not one.exists():
        _tables(scratch, 1)
    runs = [_process_cpu_s(_paimond("status", str(warehouse), "--no-verify"))
            - _process_cpu_s(_paimond("status", str(one), "--no-verify")) for _ in range(3)]
    return sorted(runs)[1]


def _idle_cpu_s(scratch: Path, count: int) -> float:
    from paimond.table.catalog import list_tables
    from paimond.table.storage import open_storage

    warehouse = scratch / f"tables-{count}"
    if not warehouse.exists():
        _tables(scratch, count)
    storage = open_storage(str(warehouse))
    tables = list_tables(storage, storage.root)
    started = time.process_time()
    for _ in range(30):
        for table in tables:
            table.watched_latest_id()
    return time.process_time() - started


def _expire_once_cpu_s(scratch: Path, snapshots: int, attempt: int | str) -> float:
    source = scratch / f"history-{snapshots}"
    if not source.exists():
        write_pk_table(str(source), snapshots)
    copy = scratch / f"history-{snapshots}-{attempt}"
    shutil.copytree(source, copy)
    return _process_cpu_s(_paimond("expire-snapshots", str(copy), "--table", "db.t",
                                   "--retain-max", "1", "--retain-min", "1"))


def _expire_cpu_s(scratch: Path, snapshots: int) -> float:
    """Less the same command on a one-snapshot table (nothing to expire: start-up)."""
    return min(_expire_once_cpu_s(scratch, snapshots, attempt)
               - _expire_once_cpu_s(scratch, 1, f"{snapshots}-{attempt}") for attempt in range(2))


def _report(name: str, sizes: list[int], measure: Callable[[int], float]) -> None:
    figures = [measure(size) for size in sizes]
    growth = [later / max(earlier, 1e-9) for earlier, later in zip(figures, figures[1:],
                                                                    strict=False)]
    cells = "  ".join(f"{size}: {cpu:.3f} s" for size, cpu in zip(sizes, figures, strict=True))
    factors = ", ".join(f"{g:.2f}x" for g in growth)
    verdict = "ok" if all(g <= 2.3 for g in growth) else "FASTER THAN LINEAR"
    print(f"{name:<28} {cells}   per doubling {factors} (goal <= 2.0x) {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=250, help="the smallest table count")
    parser.add_argument("--snapshots", type=int, default=100,
                        help="the smallest snapshot count")
    args = parser.parse_args()
    tables = [args.tables, 2 * args.tables, 4 * args.tables]
    snapshots = [args.snapshots, 2 * args.snapshots, 4 * args.snapshots]
    print(f"CPU seconds; {os.cpu_count()} CPUs; python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="paimond-growth-") as scratch:
        root = Path(scratch)
        _report("status, N tables", tables, lambda n: _status_cpu_s(root, n))
        _report("idle check x30, N tables", tables, lambda n: _idle_cpu_s(root, n))
        _report("expire, S snapshots", snapshots, lambda n: _expire_cpu_s(root, n))


if __name__ == "__main__":
    main()
