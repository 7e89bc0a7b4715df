"""Benchmark: full compaction of a wide primary-key table as a whole process.

pypaimon writes a deduplicate table of ``--columns`` columns (default 500: the key ``id`` and
int32, int64, double, string, decimal(18, 2), timestamp(3), boolean and date columns in turn,
every third one nullable with 10% nulls) holding ``--rows`` live keys (default 1M) after
``--commits`` commits (default 20): each commit brings ``rows / commits`` new keys and upserts
``--updates`` (default 15%) of the keys written before it, so the merge drops about 59% of the
rows it reads. One bucket unless ``--buckets``. Then, interleaved, ``--runs`` times, each in a
fresh process on a fresh copy of the warehouse:
  - paimond: the real command, ``python -m paimond.cli compact WH --table bench.t --full``
    (with one bucket ``--parallelism`` changes nothing: one task runs on a thread of the
    command's process; with ``--buckets`` above 1 also ``paimond-p1``, ``--parallelism 1``;
    with ``--memory-budget SIZE`` also ``paimond-budget``, the command held to that budget,
    as the daemon's ``limits.memory_budget_mb`` holds it);
  - rewrite: pyarrow reads every data file of the table's snapshot (the same Parquet files the
    compaction reads, listed by pypaimon when the table is built) and writes them as one
    Parquet file in the table's compression (zstd, level 1): decoding and encoding the same
    bytes, without the merge.
Per process: wall seconds, CPU seconds (user + system of the child, ``wait4``) and peak RSS
(``ru_maxrss`` of the child; the tables are built and checked in child processes too). Prints
medians and paimond / rewrite, whose target is <= 1.0x CPU. The first paimond run of each
variant is checked: the new snapshot's files (pypaimon's scan, read with pyarrow) hold every
key once and the sampled keys carry the values their last commit wrote.

``--merge-engine partial-update`` or ``aggregation`` merges the same files under that engine
(each run's copy of the table gets the option in its schema file; aggregation's columns keep
their default function, ``last_non_null_value``): every version of a key is combined column
by column instead of the newest one picked. The check then holds the sampled keys' non-null
last-written values (where the last commit wrote NULL an older value stands).

    .venv/bin/python bench/wide_table.py [--rows 1000000] [--columns 500] [--commits 20]
                                         [--updates 0.15] [--buckets 1] [--runs 3]
                                         [--only paimond,rewrite] [--keep DIR]
                                         [--memory-budget '1 gb']
                                         [--merge-engine partial-update]

``--keep DIR`` keeps the built table there and reuses it on the next run with the same shape
(building 1M x 500 with pypaimon takes minutes; its per-row Python fold is skipped, as each
commit holds a key once). ``--pyc`` as in ``bench/compact_process.py``; with ``cached`` the
untimed round that fills the byte-code cache runs on a 1,000-row table of the same columns.
Develop with ``--rows 50000 --columns 100`` (about a minute in all). The default size is big:
building it takes ~8 minutes (4.5 GB of Parquet, 2.4M rows) and each process reads all of it
(the rewrite ~3 CPU minutes); ``--rows 300000`` keeps it near 1.4 GB of Parquet.
"""

from __future__ import annotations

import argparse
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
from startup import environment  # noqa: E402  (bench/startup.py)

TABLE = "bench.t"
TYPES = ("int32", "int64", "float64", "string", "decimal", "timestamp", "bool", "date")
NULL_SHARE = 0.1
SAMPLED_KEYS = 50
WORDS = 5000  # distinct strings of a string column
WARM_UP_ROWS = 1000  # the table of the untimed round that fills the byte-code cache


def column_specs(columns: int) -> list[tuple[str, str, bool]]:
    """(name, type, nullable) of the table's columns: ``id``, then the types in turn."""
    specs = [("id", "int64", False)]
    for index in range(1, columns):
        specs.append((f"c{index:03d}_{TYPES[(index - 1) % len(TYPES)]}",
                      TYPES[(index - 1) % len(TYPES)], index % 3 == 0))
    return specs


def _arrow_type(kind: str):  # noqa: ANN202 - pyarrow is imported in the children only
    import pyarrow as pa

    return {"int32": pa.int32(), "int64": pa.int64(), "float64": pa.float64(),
            "string": pa.string(), "decimal": pa.decimal128(18, 2),
            "timestamp": pa.timestamp("ms"), "bool": pa.bool_(), "date": pa.date32()}[kind]


def _values(kind: str, count: int, nullable: bool, rng, words):  # noqa: ANN001, ANN202
    """One column of ``count`` random values (10% null when ``nullable``)."""
    import numpy as np
    import pyarrow as pa

    nulls = rng.random(count) < NULL_SHARE if nullable else None
    if kind == "string":
        indices = rng.integers(0, WORDS, count)
        return words.take(pa.array(indices, mask=nulls))
    if kind == "int32":
        values = rng.integers(0, 1000, count, dtype=np.int32)
    elif kind == "int64":
        values = rng.integers(0, 1 << 40, count)
    elif kind == "float64":
        values = np.round(rng.normal(100.0, 30.0, count), 2)
    elif kind == "bool":
        values = rng.random(count) < 0.5
    elif kind == "date":
        return pa.array(rng.integers(18000, 20000, count, dtype=np.int32), mask=nulls
                        ).cast(pa.date32())
    elif kind == "timestamp":
        return pa.array(rng.integers(1_600_000_000_000, 1_700_000_000_000, count),
                        mask=nulls).cast(pa.timestamp("ms"))
    else:  # decimal(18, 2): the unscaled values as 128-bit little-endian integers
        unscaled = rng.integers(-10**11, 10**11, count)
        buffer = np.empty((count, 2), np.int64)
        buffer[:, 0], buffer[:, 1] = unscaled, np.where(unscaled < 0, -1, 0)
        validity = None if nulls is None else pa.array(~nulls).buffers()[1]
        return pa.Array.from_buffers(pa.decimal128(18, 2), count,
                                     [validity, pa.py_buffer(buffer)],
                                     null_count=-1 if nulls is not None else 0)
    return pa.array(values, mask=nulls)


def generate(source: Path, rows: int, columns: int, commits: int, updates: float,
             buckets: int) -> None:
    """The table in ``source/warehouse``; ``source/files.json`` the data files of its snapshot
    (paths relative to the warehouse), ``source/expected.parquet`` the last-written rows of
    ``SAMPLED_KEYS`` keys, ``source/shape.json`` what the table holds."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pypaimon import CatalogFactory, Schema
    from pypaimon.write.writer.key_value_data_writer import KeyValueDataWriter

    # pypaimon 2.1 folds every buffered row of a primary-key write in Python (``to_pydict``):
    # hours and tens of GB at 1M x 500. Each commit here holds a key once, which the loop
    # below asserts, so that fold returns its input: skipped, the files are the same.
    KeyValueDataWriter._merge_pending_by_pk = lambda self, data: data
    warehouse = source / "warehouse"
    specs = column_specs(columns)
    schema = pa.schema([pa.field(n, _arrow_type(t), nullable=null) for n, t, null in specs])
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("bench", True)
    catalog.create_table(TABLE, Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": str(buckets),
                                              "target-file-size": "512 mb"}), True)
    table = catalog.get_table(TABLE)
    rng = np.random.default_rng(7)
    words = pa.array([f"word-{i:05d}-{'xyz'[i % 3] * (i % 11)}" for i in range(WORDS)])
    keys = rng.permutation(rows).astype(np.int64)
    per_commit = -(-rows // commits)
    # keys updated late are the interesting ones: sample among the first commit's keys
    sampled = np.sort(rng.choice(keys[:per_commit], min(SAMPLED_KEYS, per_commit),
                                 replace=False))
    expected: dict[int, pa.Table] = {}
    written = 0
    for number in range(commits):
        new = keys[number * per_commit:(number + 1) * per_commit]
        old = rng.choice(keys[:written], int(written * updates), replace=False) if written \
            else new[:0]
        ids = np.sort(np.concatenate([new, old]))
        assert len(ids) < 2 or bool(np.all(ids[1:] != ids[:-1])), "a key twice in a commit"
        data = pa.table([pa.array(ids)] + [_values(t, len(ids), null, rng, words)
                                           for _, t, null in specs[1:]], schema=schema)
        for key, position in zip(*np.intersect1d(ids, sampled, return_indices=True)[:2],
                                 strict=True):
            expected[int(key)] = data.slice(int(position), 1)
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(data)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
        written += len(new)
        del data
    files = _snapshot_files(warehouse)
    (source / "files.json").write_text(json.dumps(
        [str(Path(f).relative_to(warehouse.resolve())) for f in files]))
    pq.write_table(pa.concat_tables([expected[k] for k in sorted(expected)]),
                           str(source / "expected.parquet"))
    input_rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    (source / "shape.json").write_text(json.dumps({
        "rows": rows, "input_rows": input_rows, "files": len(files),
        "bytes": sum(os.path.getsize(f) for f in files)}))


def _snapshot_files(warehouse: Path) -> list[str]:
    """The data files of the table's latest snapshot, as pypaimon's scan plans them."""
    from pypaimon import CatalogFactory

    table = CatalogFactory.create({"warehouse": str(warehouse)}).get_table(TABLE)
    splits = table.new_read_builder().new_scan().plan().splits()
    paths = {str(Path(f.file_path.removeprefix("file://")).resolve())
             for split in splits for f in split.files}
    return sorted(paths)


def run_rewrite(warehouse: Path, files_json: Path) -> None:
    """The baseline: every data file of the snapshot decoded and written as one zstd file."""
    import pyarrow.parquet as pq

    files = [warehouse / f for f in json.loads(files_json.read_text())]
    with pq.ParquetWriter(str(warehouse / "rewrite.parquet"), pq.read_schema(str(files[0])),
                          compression="zstd", compression_level=1) as writer:
        for path in files:
            for batch in pq.ParquetFile(str(path)).iter_batches(batch_size=65536):
                writer.write_batch(batch)


def recast(warehouse: Path, engine: str) -> None:
    """Give the table of ``warehouse`` the merge engine ``engine`` (its one schema file)."""
    (schema_file,) = warehouse.glob("bench.db/t/schema/schema-*")
    schema = json.loads(schema_file.read_text())
    schema["options"]["merge-engine"] = engine
    schema_file.write_text(json.dumps(schema))


def check(warehouse: Path, source: Path, engine: str) -> str:
    """Raise unless the compacted snapshot holds every key once and the sampled keys'
    last-written values (an engine that combines versions: the non-null ones); returns what
    it found."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from pypaimon import CatalogFactory

    shape = json.loads((source / "shape.json").read_text())
    table = CatalogFactory.create({"warehouse": str(warehouse)}).get_table(TABLE)
    kind = table.snapshot_manager().get_latest_snapshot().commit_kind
    files = _snapshot_files(warehouse)
    keys = pa.concat_arrays([pq.read_table(f, columns=["_KEY_id"]).column(0).combine_chunks()
                             for f in files])
    distinct = len(pc.unique(keys))
    if not (len(keys) == distinct == shape["rows"]):
        raise SystemExit(f"compacted: {len(keys):,} rows, {distinct:,} distinct keys, "
                         f"expected {shape['rows']:,} of each")
    expected = pq.read_table(source / "expected.parquet")
    wanted = pa.array(expected.column("id"))
    found = pa.concat_tables([
        pq.read_table(f, filters=pc.field("_KEY_id").isin(wanted)).select(expected.column_names)
        for f in files]).sort_by("id")
    found = found.cast(expected.schema)
    if engine != "deduplicate":  # where the last commit wrote NULL, an older value stands
        if found.num_rows != expected.num_rows:
            raise SystemExit(f"{found.num_rows} of {expected.num_rows} sampled keys found")
        found = pa.table([pc.if_else(pc.is_null(want), want, got) for want, got in
                          zip(expected.columns, found.columns, strict=True)],
                         schema=expected.schema)
    if not found.equals(expected):
        raise SystemExit(f"the sampled keys' values differ from the last written "
                         f"({found.num_rows} of {expected.num_rows} keys found)")
    carry = "last-written" if engine == "deduplicate" else "non-null last-written"
    return (f"{kind} snapshot: {len(files)} files, {len(keys):,} rows = distinct keys; "
            f"{expected.num_rows} sampled keys carry their {carry} values")


def _argv(name: str, warehouse: Path, source: Path, budget: str | None = None) -> list[str]:
    if name.startswith("paimond"):
        return [sys.executable, "-m", "paimond.cli", "compact", str(warehouse), "--table", TABLE,
                "--full", *(["--parallelism", "1"] if name == "paimond-p1" else []),
                *(["--memory-budget", budget] if name == "paimond-budget" and budget else [])]
    return [sys.executable, __file__, "--child", name, str(warehouse), str(source / "files.json")]


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


def _run_once(name: str, source: Path, scratch: Path, pyc: str, checked: set[str],
              budget: str | None = None, engine: str = "deduplicate") -> dict[str, float]:
    copy = scratch / f"run-{name}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source / "warehouse", copy)
    if engine != "deduplicate":
        recast(copy, engine)
    try:
        result = _measure(_argv(name, copy, source, budget), environment(pyc, scratch))
        if name.startswith("paimond") and name not in checked:
            found = subprocess.run([sys.executable, __file__, "--check", str(copy), str(source),
                                    f"--merge-engine={engine}"],
                                   check=True, capture_output=True, text=True)
            print(f"  {name} checked: {found.stdout.strip()}", flush=True)
            checked.add(name)
        return result
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def _built(scratch: Path, args: argparse.Namespace, rows: int) -> Path:
    """The table of this shape with ``rows`` live keys under ``scratch``, built if missing."""
    source = scratch / (f"wide-{rows}x{args.columns}-c{args.commits}-u{args.updates}"
                        f"-b{args.buckets}")
    if not (source / "shape.json").exists():
        shutil.rmtree(source, ignore_errors=True)
        started = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--generate", str(source), f"--rows={rows}",
                        *(f"--{o}={getattr(args, o)}" for o in
                          ("columns", "commits", "updates", "buckets"))], check=True)
        print(f"built {rows:,} x {args.columns} in {time.perf_counter() - started:.1f} s",
              flush=True)
    return source


def _median(results: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in results)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="live keys")
    parser.add_argument("--columns", type=int, default=500, help="columns, the key included")
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--updates", type=float, default=0.15,
                        help="share of the keys written before that each commit upserts")
    parser.add_argument("--buckets", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated contenders")
    parser.add_argument("--keep", help="keep the built table in this directory, reuse it")
    parser.add_argument("--memory-budget", metavar="SIZE",
                        help="also run paimond held to this memory budget (paimond-budget)")
    parser.add_argument("--merge-engine", default="deduplicate",
                        choices=("deduplicate", "partial-update", "aggregation"),
                        help="the engine the table is compacted under")
    parser.add_argument("--pyc", choices=("cached", "none"), default="cached",
                        help="byte code: cached (as installed) or none (compile every module)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--generate", help=argparse.SUPPRESS)
    parser.add_argument("--check", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_rewrite(Path(args.child[1]), Path(args.child[2]))
        return
    if args.check:
        print(check(Path(args.check[0]), Path(args.check[1]), args.merge_engine))
        return
    if args.generate:
        generate(Path(args.generate), args.rows, args.columns, args.commits, args.updates,
                 args.buckets)
        return
    contenders = ["paimond", "rewrite"] + (["paimond-p1"] if args.buckets > 1 else []) \
        + (["paimond-budget"] if args.memory_budget else [])
    if args.only:
        contenders = [c for c in contenders if c in args.only.split(",")]
    with tempfile.TemporaryDirectory(prefix="paimond-bench-") as scratch_dir:
        scratch = Path(args.keep) if args.keep else Path(scratch_dir)
        source = _built(scratch, args, args.rows)
        shape = json.loads((source / "shape.json").read_text())
        print(f"table: {shape['rows']:,} live keys x {args.columns} columns, {args.buckets} "
              f"bucket(s); {shape['files']} data files, {shape['input_rows']:,} rows "
              f"({1 - shape['rows'] / shape['input_rows']:.0%} dropped by the merge), "
              f"{shape['bytes'] / 2**20:,.0f} MB", flush=True)
        checked: set[str] = set()
        if args.pyc == "cached":  # untimed: fills the byte-code cache (on a small table)
            small = _built(scratch, args, WARM_UP_ROWS)
            for name in contenders:
                _run_once(name, small, scratch, args.pyc, {name}, args.memory_budget,
                          args.merge_engine)
        results: dict[str, list[dict[str, float]]] = {}
        for number in range(args.runs):
            for name in contenders:
                result = _run_once(name, source, scratch, args.pyc, checked, args.memory_budget,
                                   args.merge_engine)
                results.setdefault(name, []).append(result)
                print(f"  run {number + 1} {name:<10}  wall {result['wall']:7.2f} s  CPU "
                      f"{result['cpu']:7.2f} s  peak RSS {result['rss']:8.1f} MB", flush=True)
        print(f"\n== {args.merge_engine}, {args.commits} commits, medians of {args.runs} "
              f"interleaved runs, each a whole process; byte code {args.pyc}; "
              f"load average {os.getloadavg()[0]:.1f}")
        for name, runs in results.items():
            print(f"  {name:<10}  wall {_median(runs, 'wall'):7.2f} s  CPU "
                  f"{_median(runs, 'cpu'):7.2f} s  peak RSS {_median(runs, 'rss'):8.1f} MB")
        if "rewrite" in results:
            r = results["rewrite"]
            for name in (n for n in results if n.startswith("paimond")):
                p = results[name]
                for key, unit, target in (("wall", "wall", None), ("cpu", "CPU", 1.0),
                                          ("rss", "peak RSS", None)):
                    ratio = _median(p, key) / _median(r, key)
                    goal = "" if target is None else \
                        f" (target <= {target}x){' ok' if ratio <= target else ' MISSED'}"
                    print(f"  {name} / rewrite {unit}: {ratio:.2f}x{goal}")


if __name__ == "__main__":
    main()
