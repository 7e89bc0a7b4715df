"""Benchmark: full compaction of an 8-bucket table with ``--parallelism 2`` against one worker
(the parallel wall <= 0.55x the single worker's).

pypaimon writes a deduplicate table with 8 buckets, ``--rows`` rows (default 4M) in
``--commits`` overlapping commits (a child process, so this process stays small). Then the
command ``python -m paimond.cli compact WH --table bench.t --full --parallelism N`` runs as a
fresh process on a fresh copy of the table, for N=1 and N=2 interleaved, ``--runs`` times
each. Prints the medians of wall time, CPU (user + system of the process and its workers, from
``wait4``) and peak RSS (the largest process), and the wall ratio N=2 / N=1 against 0.55x.
Also the same command with ``--dry-run`` (start-up, imports, planning: the part no pool can
share) and two bounds: the ratio if two workers halved the rest of the single worker's wall
exactly (Amdahl), and the ratio if the rest's CPU (``--parallelism 1`` less the dry run, which
already keeps more than one core busy: decode, merge and encode threads) filled both cores
(the best two cores allow).

Python byte code: an installed paimond (pip, uv, the container image) has its modules and its
dependencies' compiled to ``.pyc`` at install time; a development checkout run with
``PYTHONDONTWRITEBYTECODE=1`` and no ``.pyc`` compiles every module's source in every process
(about half of the dry run's CPU here). ``--pyc cached`` (the default) runs every command with
a byte-code cache in the scratch directory (``PYTHONPYCACHEPREFIX``), filled by a first
untimed dry run; ``--pyc none`` compiles as such a checkout does.

    .venv/bin/python bench/parallel_buckets.py [--rows 4000000] [--commits 10] [--runs 3]
    [--keep DIR]   # build the table once into DIR and reuse it on later runs
    [--before DIR] # also run an older tree, interleaved: DIR holds its package as paimond/
                   # (mkdir -p DIR/paimond && git archive REV | tar -x -C DIR/paimond)
    [--after DIR]  # the same for the newer tree (default: the installed paimond)
    [--pyc cached|none]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from startup import environment  # noqa: E402  (bench/ is not a package)

GOAL_RATIO = 0.55
BUCKETS = 8
TABLE = "bench.t"


def generate(warehouse: Path, rows: int, commits: int) -> None:
    import numpy as np
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()),
                        ("score", pa.float64()), ("qty", pa.int32())])
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("bench", True)
    catalog.create_table(TABLE, Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": str(BUCKETS),
                                              "target-file-size": "512 mb"}), True)
    table = catalog.get_table(TABLE)
    rng = np.random.default_rng(7)
    per_commit = rows // commits
    for _ in range(commits):
        ids = np.unique(rng.integers(0, rows, per_commit))
        data = pa.table({
            "id": ids, "name": pa.array([f"name-{i % 9973}" for i in ids.tolist()]),
            "score": rng.random(len(ids)),
            "qty": pa.array(rng.integers(0, 1000, len(ids)), pa.int32()),
        }, schema=schema)
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(data)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()


def _data_files(warehouse: Path) -> list[Path]:
    return sorted((warehouse / "bench.db" / "t").glob("bucket-*/data-*.parquet"))


def _run(argv: list[str], env: dict[str, str] | None) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds (process + reaped workers) and peak RSS MB of one process."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    assert process.stdout is not None
    output = process.stdout.read().decode(errors="replace")
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{argv} failed ({process.returncode}):\n{output}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, output


def compact(source: Path, scratch: Path, parallelism: int, env: dict[str, str]
            ) -> tuple[float, float, float]:
    """``parallelism`` 0: the dry run."""
    copy = scratch / f"run-{parallelism}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source, copy)
    try:
        wall, cpu, rss, output = _run(
            [sys.executable, "-m", "paimond.cli", "compact", str(copy), "--table", TABLE,
             "--full", *(["--parallelism", str(parallelism)] if parallelism else ["--dry-run"])],
            env)
        if parallelism and f"buckets compacted {BUCKETS}, failed 0" not in output:
            raise SystemExit(f"unexpected compaction:\n{output}")
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    return wall, cpu, rss


def _label(parallelism: int) -> str:
    return f"parallelism {parallelism}" if parallelism else "dry run      "


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build the table here once and reuse it")
    parser.add_argument("--before", type=Path, help="an older tree to compare, interleaved")
    parser.add_argument("--after", type=Path, help="the newer tree (default: installed)")
    parser.add_argument("--pyc", choices=("cached", "none"), default="cached",
                        help="byte code: cached as installed (default), or none (compile "
                             "every module in every process, PYTHONDONTWRITEBYTECODE)")
    parser.add_argument("--generate", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        generate(args.generate, args.rows, args.commits)
        return
    with tempfile.TemporaryDirectory(prefix="paimond-bench-") as scratch_dir:
        scratch = Path(scratch_dir)
        source = args.keep or scratch / "source"
        if not (source / "bench.db").exists():
            started = time.perf_counter()
            subprocess.run([sys.executable, __file__, "--generate", str(source), "--rows",
                            str(args.rows), "--commits", str(args.commits)], check=True)
            print(f"generated {args.rows:,} rows in {args.commits} commits, {BUCKETS} buckets "
                  f"in {time.perf_counter() - started:.1f} s")
        print(f"table: {len(_data_files(source))} data files, "
              f"{sum(p.stat().st_size for p in _data_files(source)) / 1e6:.1f} MB; "
              f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, byte code "
              f"{args.pyc}")
        trees = {"": None} if args.before is None else {"before ": args.before, "after ": args.after}
        envs = {tree: environment(args.pyc, scratch, path) for tree, path in trees.items()}
        for tree in trees:  # untimed: fills the byte-code cache
            compact(source, scratch, 0, envs[tree])
        figures: dict[tuple[str, int], list[tuple[float, float, float]]] = {
            (tree, n): [] for tree in trees for n in (0, 1, 2)}
        for run in range(args.runs):
            for tree, n in figures:
                figures[tree, n].append(compact(source, scratch, n, envs[tree]))
                wall, cpu, rss = figures[tree, n][-1]
                print(f"  run {run + 1} {tree}{_label(n)}: wall {wall:6.2f} s  "
                      f"CPU {cpu:6.2f} s  peak RSS {rss:6.0f} MB", flush=True)
        medians = {key: [statistics.median(f[i] for f in runs) for i in range(3)]
                   for key, runs in figures.items()}
        for (tree, n), (wall, cpu, rss) in medians.items():
            print(f"{tree}{_label(n)}: wall {wall:6.2f} s  CPU {cpu:6.2f} s "
                  f"(CPU / wall {cpu / wall:.2f})  peak RSS {rss:.0f} MB")
        for tree in trees:
            one, two = medians[tree, 1], medians[tree, 2]
            serial, serial_cpu = medians[tree, 0][0], medians[tree, 0][1]
            bound = (serial + (one[0] - serial) / 2) / one[0]
            rest_cores = (one[1] - serial_cpu) / (one[0] - serial)
            two_cores = (serial + (one[1] - serial_cpu) / 2) / one[0]
            print(f"{tree}wall, parallelism 2 / 1: {two[0] / one[0]:.2f}x (target <= "
                  f"{GOAL_RATIO}x); CPU 2 / 1: {two[1] / one[1]:.2f}x; with the dry run's "
                  f"{serial:.2f} s serial and the rest halved: {bound:.2f}x; the rest keeps "
                  f"{rest_cores:.2f} cores busy at parallelism 1, so two cores give at best "
                  f"{two_cores:.2f}x")
        load = os.getloadavg()[0]
        if load > (os.cpu_count() or 1):
            print(f"load average {load:.1f} is above the core count: the walls, their ratios "
                  "and the bounds are unreliable (other processes take the cores); CPU holds")
        if args.before is not None:
            for n in (1, 2):
                print(f"parallelism {n}, after / before: wall "
                      f"{medians['after ', n][0] / medians['before ', n][0]:.2f}x, CPU "
                      f"{medians['after ', n][1] / medians['before ', n][1]:.2f}x")

if __name__ == "__main__":
    main()
