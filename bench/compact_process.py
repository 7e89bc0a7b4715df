"""Benchmark: full compaction of one bucket as a whole process.

For each size (default 2M rows), pypaimon writes one bucket of a deduplicate table in 20
commits of random, overlapping keys (the generator of ``bench/compact.py``); with
``--deletes 0.1`` a second table of the same size has 10% of each commit's rows as ``-D``
(``rowkind.field``). Then, interleaved, ``--runs`` times, each in a fresh process on a fresh
copy of the warehouse:
  - paimond: the real command, ``python -m paimond.cli compact WH --table bench.t --full``;
  - rewrite: a plain pyarrow read of the same data files and one zstd parquet (no merge);
  - polars (if installed): read, sort by key and sequence, keep the newest row per key,
    drop retractions, write one zstd parquet.
Per process: wall seconds, CPU seconds (user + system of the child, ``wait4``) and peak RSS
(``ru_maxrss`` of the child; the parent stays small because the tables are generated in a
child process too). Prints medians and the issue's ratios with their targets.

    .venv/bin/python bench/compact_process.py [--rows 2000000 [10000000]] [--runs 3]
                                              [--deletes 0.1] [--only paimond,rewrite]
                                              [--keep DIR] [--before DIR]

``--before DIR`` also runs the command of an older tree (``DIR/paimond``, e.g. ``git archive
<commit>`` unpacked there) as the contender ``before``, interleaved, and prints after / before.
``--keep DIR`` keeps the generated warehouses there and reuses them on the next run.
``--pyc cached`` (the default) gives every contender a byte-code cache (``PYTHONPYCACHEPREFIX``
in the scratch directory, filled by one untimed round), as an installed package has; ``--pyc
none`` compiles every imported module in every process (this checkout's
``PYTHONDONTWRITEBYTECODE=1``: how session 7 and earlier rows were measured).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compact import SCHEMA_FIELDS, run_rewrite  # noqa: E402  (bench/compact.py)
from startup import environment  # noqa: E402  (bench/startup.py)

TABLE = "bench.t"


def generate(warehouse: Path, rows: int, commits: int, deletes: float) -> None:
    """``bench/compact.py``'s table; ``deletes``: that fraction of each commit's rows is -D."""
    import numpy as np
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    schema = pa.schema([pa.field(n, getattr(pa, t)(), nullable=null) for n, t, null in SCHEMA_FIELDS])
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("bench", True)
    catalog.create_table(TABLE, Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": "1", "rowkind.field": "rk",
                                              "target-file-size": "512 mb"}), True)
    table = catalog.get_table(TABLE)
    rng = np.random.default_rng(7)
    per_commit = rows // commits
    for _ in range(commits):
        ids = np.unique(rng.integers(0, rows, per_commit))
        kinds = np.where(rng.random(len(ids)) < deletes, "-D", "+I") if deletes else \
            np.full(len(ids), "+I")
        data = pa.table({
            "id": ids, "name": pa.array([f"name-{i % 9973}" for i in ids.tolist()]),
            "score": rng.random(len(ids)), "rk": pa.array(kinds.tolist()),
        }, schema=schema)
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(data)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()


def _data_files(warehouse: Path) -> list[Path]:
    return sorted((warehouse / "bench.db" / "t" / "bucket-0").glob("data-*.parquet"))


def run_polars(warehouse: Path) -> dict[str, float]:
    import polars as pl

    started = time.perf_counter()
    merged = (pl.scan_parquet([str(p) for p in _data_files(warehouse)])
              .sort(["_KEY_id", "_SEQUENCE_NUMBER"])
              .unique(subset=["_KEY_id"], keep="last", maintain_order=True)
              .filter(~pl.col("_VALUE_KIND").is_in([1, 3])))
    merged.sink_parquet(str(warehouse / "polars.parquet"), compression="zstd")
    return {"seconds": time.perf_counter() - started}


CHILDREN = {"rewrite": run_rewrite, "polars": run_polars}


def _argv(name: str, warehouse: Path) -> list[str]:
    if name in ("paimond", "before"):
        return [sys.executable, "-m", "paimond.cli", "compact", str(warehouse), "--table", TABLE,
                "--full"]
    return [sys.executable, __file__, "--child", name, str(warehouse)]


def _measure(argv: list[str], env: dict[str, str] | None = None) -> dict[str, float]:
    """Wall, CPU (user + system) and peak RSS of one process (and the children it reaped)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as output:
        process = subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT, text=True,
                                   env=env)
        _, status, usage = os.wait4(process.pid, 0)  # reaps it, with its rusage
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            output.seek(0)
            raise SystemExit(f"{argv} failed: {output.read()}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024}


def _run_once(name: str, source: Path, scratch: Path, before: Path | None, pyc: str
              ) -> dict[str, float]:
    copy = scratch / f"run-{name}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source, copy)
    env = environment(pyc, scratch, before if name == "before" else None)
    try:
        return _measure(_argv(name, copy), env)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def _generate_in_child(warehouse: Path, rows: int, commits: int, deletes: float) -> None:
    subprocess.run([sys.executable, __file__, "--generate", str(warehouse), str(rows),
                    str(commits), str(deletes)], check=True)


def _median(results: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in results)


def _line(label: str, figure: float, target: float | None, unit: str = "x") -> str:
    verdict = "" if target is None else (" ok" if figure <= target else " MISSED")
    goal = "" if target is None else f" (target <= {target}{unit}){verdict}"
    return f"  {label}: {figure:.2f}{unit}{goal}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[2_000_000])
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--deletes", type=float, default=0.0,
                        help="also a table with this fraction of -D rows (goal 3)")
    parser.add_argument("--only", default="", help="comma-separated contenders")
    parser.add_argument("--keep", help="keep the generated warehouses in this directory")
    parser.add_argument("--before", type=Path,
                        help="also run an older tree's command (DIR/paimond), interleaved")
    parser.add_argument("--pyc", choices=("cached", "none"), default="cached",
                        help="byte code: cached (as installed) or none (compile every module)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--generate", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = CHILDREN[args.child[0]](Path(args.child[1]))
        print(json.dumps(result))
        return
    if args.generate:
        path, rows, commits, deletes = args.generate
        generate(Path(path), int(rows), int(commits), float(deletes))
        return
    contenders = ["paimond", "rewrite"] + (["before"] if args.before else [])
    if importlib.util.find_spec("polars") is not None:
        contenders.append("polars")
    else:
        print("polars is not installed: its column is skipped")
    if args.only:
        contenders = [c for c in contenders if c in args.only.split(",")]
    variants = [0.0] + ([args.deletes] if args.deletes else [])
    paimond_rss: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="paimond-bench-") as scratch_dir:
        scratch = Path(args.keep) if args.keep else Path(scratch_dir)
        for rows in args.rows:
            sources = {}
            for deletes in variants:
                source = scratch / f"source-{rows}-{deletes}"
                if not (source / "bench.db").exists():
                    started = time.perf_counter()
                    _generate_in_child(source, rows, args.commits, deletes)
                    print(f"generated {rows:,} rows, -D {deletes:.0%}, {len(_data_files(source))} "
                          f"files in {time.perf_counter() - started:.1f} s")
                sources[deletes] = source
            if args.pyc == "cached" and rows == args.rows[0]:
                for name in contenders:  # untimed: fills the byte-code cache
                    _run_once(name, sources[0.0], scratch, args.before, args.pyc)
            results: dict[tuple[str, float], list[dict[str, float]]] = {}
            for _ in range(args.runs):
                for deletes, source in sources.items():
                    for name in contenders:
                        results.setdefault((name, deletes), []).append(
                            _run_once(name, source, scratch, args.before, args.pyc))
            print(f"\n== {rows:,} rows in {args.commits} commits, medians of {args.runs} "
                  f"interleaved runs, each a whole process; byte code {args.pyc}; load average "
                  f"{os.getloadavg()[0]:.1f}")
            for (name, deletes), runs in results.items():
                print(f"  {name:<8} -D {deletes:>4.0%}  wall {_median(runs, 'wall'):7.2f} s  "
                      f"CPU {_median(runs, 'cpu'):7.2f} s  peak RSS {_median(runs, 'rss'):7.1f} MB")
            if ("paimond", 0.0) not in results:
                continue
            p = results[("paimond", 0.0)]
            paimond_rss[rows] = _median(p, "rss")
            if ("before", 0.0) in results:
                b = results[("before", 0.0)]
                for key, unit in (("wall", "wall"), ("cpu", "CPU"), ("rss", "peak RSS")):
                    print(_line(f"paimond after / before {unit}",
                                _median(p, key) / _median(b, key), None))
            if ("rewrite", 0.0) in results:
                r = results[("rewrite", 0.0)]
                wall_target = 0.5 if rows >= 10_000_000 else 0.7 if rows >= 2_000_000 else None
                cpu_target = 0.8 if rows >= 10_000_000 else None
                print(_line("paimond / rewrite wall", _median(p, "wall") / _median(r, "wall"),
                            wall_target))
                print(_line("paimond / rewrite CPU", _median(p, "cpu") / _median(r, "cpu"),
                            cpu_target))
            if ("polars", 0.0) in results:
                pl_ = results[("polars", 0.0)]
                print(_line("paimond / polars wall", _median(p, "wall") / _median(pl_, "wall"),
                            1.0))
                print(_line("paimond / polars peak RSS", _median(p, "rss") / _median(pl_, "rss"),
                            0.33))
            print(_line("paimond peak RSS", _median(p, "rss"),
                        500.0 if rows >= 10_000_000 else None, " MB"))
            if args.deletes and ("paimond", args.deletes) in results:
                d = results[("paimond", args.deletes)]
                print(_line(f"paimond CPU with {args.deletes:.0%} -D / without",
                            _median(d, "cpu") / _median(p, "cpu"), 1.0))
                if ("rewrite", args.deletes) in results:
                    print(_line("paimond / rewrite CPU, with -D", _median(d, "cpu") / _median(
                        results[("rewrite", args.deletes)], "cpu"), None))
                if ("polars", args.deletes) in results:
                    print(_line("paimond / polars CPU, with -D", _median(d, "cpu") / _median(
                        results[("polars", args.deletes)], "cpu"), None))
    if len(paimond_rss) > 1:
        (small, rss_small), (large, rss_large) = (sorted(paimond_rss.items())[0],
                                                  sorted(paimond_rss.items())[-1])
        slope = (rss_large - rss_small) / ((large - small) / 1e6)
        print(_line("\npaimond peak RSS slope", slope, 20.0, " MB per million rows"))


if __name__ == "__main__":
    main()
