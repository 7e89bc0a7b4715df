"""Benchmark: the daemon's table reading (``daemon/tables/watch.Watcher.read``: status,
regeneration items, lag, small files, health) of a warehouse-scale table,
beside ``bench/planning_scale.py`` (whose primary-key table, baseline and report it reuses).

Each measurement is a fresh process (``os.wait4``: user + system CPU, peak RSS), interleaved,
medians of ``--runs``:

- ``read manifests``: decode every manifest of the snapshot, keeping nothing (the baseline).
- ``watcher``: ``Watcher().read(table, now)``, a window of partitions at a time.
- ``whole scan``: the reading before, in the same tree: ``table_status`` with ``on_files``
  (every live entry at once) and ``table_watch.watch`` of it.

    .venv/bin/python bench/planning_watcher.py [--files 250000] [--sizes N ...] [--runs 3]
        [--scratch DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import planning_scale  # noqa: E402  (bench/ is not a package)

NOW_MS = 1_800_000_000_000


def read(warehouse: str, how: str) -> None:
    """The child: one reading of ``db.t``, ``windowed`` or ``whole``."""
    from paimond.daemon.tables.watch import Watcher, watch
    from paimond.maintenance.regenerate.pending import RegenerationMemory
    from paimond.table.catalog import open_table
    from paimond.table.scan.snapshot_scan import SnapshotFiles
    from paimond.table.status.report import table_status
    from paimond.table.storage.interface import open_storage

    storage = open_storage(warehouse)
    table = open_table(storage, storage.root, "db.t")
    if how == "windowed":
        watcher = Watcher()
        status = watcher.read(table, NOW_MS)
        found = watcher.last
    else:
        files: list[SnapshotFiles] = []
        status = table_status(table, verify_files=False, parallelism=4, on_files=files.append)
        found = watch(table, status, files[0] if files else None, RegenerationMemory(), NOW_MS)
    assert status.error is None, status.error
    print(len(status.buckets), found.gauges, found.oldest_level0_millis)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=250_000, help="smallest size (live files)")
    parser.add_argument("--sizes", type=int, nargs="+", help="these sizes (live files) only "
                        "besides the 1k-file table, instead of --files doubled twice")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scratch", default=None, help="keep the tables here between runs")
    parser.add_argument("--read", nargs=2, metavar=("WAREHOUSE", "HOW"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read:
        read(*args.read)
        return
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="paimond-planning-"))
    sizes = [1000, *(args.sizes or (args.files, 2 * args.files, 4 * args.files))]
    python = sys.executable
    figures: dict[int, dict[str, tuple[float, float, float]]] = {}
    for size in sizes:
        warehouse = scratch / f"files-{size}"
        if not (warehouse / "db.db" / "t" / "snapshot" / "LATEST").exists():
            started = time.monotonic()  # in a child: the parent stays small
            subprocess.run([python, planning_scale.__file__, "--build", str(warehouse),
                            str(size)], check=True)
            print(f"built {size:,} files in {time.monotonic() - started:.0f} s", flush=True)
        commands = {
            "read manifests": [python, planning_scale.__file__, "--read-manifests",
                               str(warehouse)],
            "watcher": [python, __file__, "--read", str(warehouse), "windowed"],
            "whole scan": [python, __file__, "--read", str(warehouse), "whole"]}
        runs: dict[str, list[tuple[float, float, float]]] = {}
        for _ in range(args.runs):
            for name, argv in commands.items():
                runs.setdefault(name, []).append(planning_scale._measure(argv, None))
        figures[size] = {name: planning_scale._median(r) for name, r in runs.items()}
        for name, (wall, cpu, rss) in figures[size].items():
            print(f"{size:>9,} files  {name:<18} wall {wall:6.2f} s  CPU {cpu:6.2f} s  "
                  f"peak RSS {rss:7.1f} MB", flush=True)
        if size > sizes[0]:
            after, before = figures[size]["watcher"], figures[size]["whole scan"]
            print(f"{'':>9}  watcher / whole scan: CPU {after[1] / before[1]:.2f}x, "
                  f"peak RSS {after[2] / before[2]:.2f}x", flush=True)
    planning_scale.report(figures, sizes)


if __name__ == "__main__":
    main()
