"""Benchmark: do orphan removal and merge-manifests cost grow with the work, or faster?

Each case runs at sizes n, 2n, 4n and prints the CPU seconds (the child's user + system, medians
of 3 interleaved with their baselines) and the growth factor per doubling (2.0 is linear; 4.0
quadratic). Baselines are the same command on the same table without the work.

- ``remove-orphans``: ``paimond remove-orphans --older-than '1 s' --force`` of a one-bucket
  table (pypaimon-written) whose 16 bucket directories hold F synthetic orphan files (empty,
  made just before each run), minus the same command on the table without them. Its baseline,
  printed below it: a bare ``os.scandir`` / ``stat`` / ``os.remove`` of the same files (the file
  system's own growth), less the same on no orphans.
- ``merge-manifests``: ``paimond merge-manifests`` (forced, as Java's compact_manifest) of a
  primary-key table with M writer commits, never merged (M manifests: ``bench/growth.py``'s
  ``write_history`` when it has one, else pypaimon, slower), minus the same command on a
  one-commit table.

    .venv/bin/python bench/growth_jobs.py [--files 50000] [--manifests 1000]
        [--cases orphans,manifests]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

from growth_report import report_growth  # noqa: E402  (bench/growth_report.py)
from pk_table_writes import write_pk_table  # noqa: E402

ORPHAN_BUCKETS = 16


def _process_cpu_s(argv: list[str]) -> float:
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed")
    return usage.ru_utime + usage.ru_stime


def _paimond(*args: str) -> list[str]:
    return [sys.executable, "-m", "paimond.cli", *args]


# The least any orphan removal does, as a baseline: list each bucket directory, stat every
# entry, remove the orphans. How this grows with F is the file system's share of the growth.
BARE_REMOVAL = """
import os, sys
for bucket in sys.argv[1:]:
    with os.scandir(bucket) as entries:
        for entry in entries:
            entry.stat(follow_symlinks=False)
            if "-orphan-" in entry.name:
                os.remove(entry.path)
"""


def _orphans_once_cpu_s(scratch: Path, files: int, attempt: int, *, bare: bool = False
                        ) -> float:
    source = scratch / "source"
    if not source.exists():
        write_pk_table(str(source), 1, "db.t0")
    copy = scratch / f"orphans-{files}-{attempt}"
    shutil.copytree(source, copy)
    table = copy / "db.db" / "t0"
    for i in range(files):
        bucket = table / f"bucket-{i % ORPHAN_BUCKETS}"
        if i < ORPHAN_BUCKETS:
            bucket.mkdir(exist_ok=True)
        (bucket / f"data-orphan-{i}-0.parquet").touch()
    time.sleep(1.1)  # every file older than the 1 s window
    if bare:
        argv = [sys.executable, "-c", BARE_REMOVAL, *map(str, sorted(table.glob("bucket-*")))]
    else:
        argv = _paimond("remove-orphans", str(copy), "--table", "db.t0", "--older-than", "1 s",
                        "--force")
    cpu = _process_cpu_s(argv)
    left = sum(1 for bucket in table.glob("bucket-*") for _ in bucket.iterdir())
    if left != 1:  # the table's own data file stays
        raise SystemExit(f"{argv[:4]} left {left} files in the bucket directories")
    shutil.rmtree(copy)
    return cpu


def _orphans_cpu_s(scratch: Path, files: int, *, bare: bool = False) -> float:
    """Less the same command on the table without orphans (start-up, the table's reading)."""
    runs = [_orphans_once_cpu_s(scratch, files, attempt, bare=bare)
            - _orphans_once_cpu_s(scratch, 0, attempt, bare=bare) for attempt in range(3)]
    return sorted(runs)[1]


def _write_history(path: Path, commits: int) -> None:
    try:
        from growth import write_history  # type: ignore[attr-defined]
    except ImportError:
        write_pk_table(str(path), commits)
    else:
        write_history(str(path), commits)


def _manifests_once_cpu_s(scratch: Path, commits: int, attempt: int | str) -> float:
    source = scratch / f"history-{commits}"
    if not source.exists():
        _write_history(source, commits)
    copy = scratch / f"manifests-{commits}-{attempt}"
    shutil.copytree(source, copy)
    cpu = _process_cpu_s(_paimond("merge-manifests", str(copy), "--table", "db.t"))
    shutil.rmtree(copy)
    return cpu


def _manifests_cpu_s(scratch: Path, commits: int) -> float:
    """Less the same command on a one-commit table (nothing to merge: start-up)."""
    runs = [_manifests_once_cpu_s(scratch, commits, attempt)
            - _manifests_once_cpu_s(scratch, 1, f"{commits}-{attempt}") for attempt in range(3)]
    return sorted(runs)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=50_000, help="the smallest orphan count")
    parser.add_argument("--manifests", type=int, default=1000,
                        help="the smallest manifest (writer commit) count")
    parser.add_argument("--cases", default="orphans,manifests",
                        help="comma-separated cases to run")
    args = parser.parse_args()
    cases = set(args.cases.split(","))
    print(f"CPU seconds; {os.cpu_count()} CPUs; python {sys.version.split()[0]}", flush=True)
    with tempfile.TemporaryDirectory(prefix="paimond-growth-jobs-") as scratch:
        root = Path(scratch)
        if "orphans" in cases:
            sizes = [args.files, 2 * args.files, 4 * args.files]
            paimond = report_growth("remove-orphans, F files", sizes,
                                    lambda n: _orphans_cpu_s(root, n), width=30)
            bare = report_growth("  baseline: bare os.remove", sizes,
                                 lambda n: _orphans_cpu_s(root, n, bare=True), width=30)
            print(f"{'  remove-orphans / baseline':<30} " + "  ".join(
                f"{n}: {p / max(b, 1e-9):.2f}x" for n, p, b in zip(sizes, paimond, bare,
                                                                   strict=True)), flush=True)
        if "manifests" in cases:
            report_growth("merge-manifests, M manifests",
                          [args.manifests, 2 * args.manifests, 4 * args.manifests],
                          lambda n: _manifests_cpu_s(root, n), width=30)


if __name__ == "__main__":
    main()
