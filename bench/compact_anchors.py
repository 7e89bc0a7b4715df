"""Benchmark: paimond's full compaction against what a user would run instead, on the same
table, the same machine, in the same run.

For each size (``--sizes``, default ``2M``; ``10M``; ``8x4M`` is 8 buckets, 4M rows in all),
pypaimon writes a deduplicate table in ``--commits`` commits of random, overlapping keys (the
generator of ``bench/compact_process.py``, in a child process) and the expected content (the
newest row of each key) is kept beside it. Then, interleaved, ``--runs`` times, each a fresh
process on a fresh copy of the warehouse (copied outside the measurement):
  - paimond: ``python -m paimond.cli compact WH --table bench.t --full`` (local pool, default
    parallelism); with ``--parallelism-1`` also ``paimond-p1`` (``--parallelism 1``); with
    ``--paimond-spark MASTER`` also ``paimond-spark`` (``--executor spark --spark-master
    MASTER``, the project's PySpark: the bucket tasks, or the sort's sampling and range tasks,
    as Spark tasks);
  - java-2.0, java-1.4 (``--java``): Java Paimon's batch full compaction in a JVM of its own
    (``bench/anchors/JavaFullCompaction.java``: ``BatchTableWrite.compact(partition, bucket,
    true)`` of every bucket, one commit), on the jars ``tests/support/java_paimon.py`` fetches
    (Maven Central has no Java Paimon 2.1);
  - spark-local, spark-cluster (``--spark``): Paimon 0.9's Spark procedure ``CALL
    paimon.sys.compact(table => 'bench.t')`` (0.9 has no ``compact_strategy``: its procedure
    always compacts a bucket fully) in a ``spark-submit``-style Python driver on Spark 3.5
    (``bench/anchors/spark35_env.sh`` builds ``.bench-spark35/`` once; Maven Central serves
    Paimon's Spark connector only as ``paimon-spark-3.5:0.9.0``), on ``local[2]`` and on
    ``local-cluster[2,1,1024]`` (two executor JVMs).
With ``--sort zorder:a,b``, also sort compaction of a bucket-unaware append table
(``--sort-rows`` rows of random ``a``, ``b`` in ``--commits`` commits): ``paimond compact
--zorder-by a,b`` against Paimon 0.9's ``CALL paimon.sys.compact(table => ..., order_strategy
=> 'zorder', order_by => 'a,b')`` on the same Spark masters (Java has no sort compaction
outside its engines).
Every result is checked (a separate process, outside the measurement): a new COMPACT snapshot
(an append table's may be Java's OVERWRITE); in each bucket of a primary-key table every live
file at the table's max level and no key twice; the rows (read with pyarrow from the live files
the manifests list, read with fastavro: neither paimond nor pypaimon checks) equal the expected
ones, count and checksum (an append table's order is not checked). A contender whose command
fails or whose result is wrong is reported FAILED and never timed.

Per process: wall s, CPU s (user + system of the process and the children it reaped, from
``os.wait4``), peak RSS (``ru_maxrss``: the largest single process, children included), the
sum of the RSS of the process tree, sampled every 0.2 s (a pool's workers, Spark's JVMs), and
the live data files it left. Each command is also run as a start-up only process, interleaved
the same way: paimond ``--dry-run`` (imports, planning), the JVM with ``--open-only`` (start-up,
class loading, opening and planning the table), the Spark driver that starts its session, loads
the table and stops; the Spark driver also reports its session start-up and its CALL from
inside. JVMs run with their default flags. Prints medians, the compaction less start-up, and
the ratios paimond / each anchor. One untimed round of the start-up commands fills the
byte-code and page caches first.

    .venv/bin/python bench/compact_anchors.py [--sizes 2M [10M 8x4M]] [--runs 3]
        [--commits 20] [--only paimond,java-2.0,spark-local] [--java 2.0,1.4]
        [--spark 'local[2];local-cluster[2,1,1024]'] [--parallelism-1] [--paimond-spark MASTER]
        [--sort zorder:a,b [--sort-rows 2M]] [--keep DIR]

At 2M rows with the defaults, about 20 minutes here (most of it the Spark contenders; the
table's generation takes 1 to 3 minutes, ``--keep DIR`` reuses it); ``--sort`` 5 more.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
from startup import environment  # noqa: E402  (bench/startup.py, standard library only)

TABLE = "bench.t"
JAVA_SOURCE = BENCH / "anchors" / "JavaFullCompaction.java"
SPARK_ENV_SCRIPT = BENCH / "anchors" / "spark35_env.sh"
SPARK_CONNECTOR = "org.apache.paimon:paimon-spark-3.5:0.9.0"
QUIET_SLF4J = ("org.slf4j:slf4j-nop:1.7.32",)  # the bundle's slf4j-api, else it warns
SPARK_MASTERS = {"local[2]": "spark-local", "local-cluster[2,1,1024]": "spark-cluster"}
SCHEMA_FIELDS = (("id", "int64", False), ("name", "string", True), ("score", "float64", True),
                 ("rk", "string", True))
EXPECTED = "expected.json"


# -- the table and its expected content ---------------------------------------------------

def parse_size(text: str) -> tuple[int, int]:
    """``2M`` -> (1 bucket, 2,000,000 rows); ``8x4M`` -> (8 buckets, 4,000,000 rows)."""
    buckets, _, rows = text.lower().rpartition("x")
    scale = {"k": 1_000, "m": 1_000_000}.get(rows[-1:], 1)
    return int(buckets or 1), int(float(rows.rstrip("km")) * scale)


def checksum(rows: Any) -> str:
    """Of a pyarrow table sorted by id: each column's values (numbers as bytes, strings as
    their UTF-8 data and offsets)."""
    import numpy as np
    import pyarrow as pa

    digest = hashlib.sha256()
    for column in rows.combine_chunks().columns:
        values = column.chunk(0) if column.num_chunks else pa.array([], column.type)
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            values = values.cast(pa.large_string())
            values = values.take(pa.array(np.arange(len(values))))  # offsets from 0, no slice
            for buffer in values.buffers()[1:]:
                digest.update(memoryview(buffer))
        else:
            digest.update(np.ascontiguousarray(values.to_numpy(zero_copy_only=False)).tobytes())
    return digest.hexdigest()


def _write(table: Any, data: Any) -> None:
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(data)
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def generate(warehouse: Path, buckets: int, rows: int, commits: int) -> None:
    """``bench/compact_process.py``'s table (``buckets`` buckets) and ``EXPECTED`` beside it:
    row count and checksum of the newest row of each key."""
    import numpy as np
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    schema = pa.schema([pa.field(n, getattr(pa, t)(), nullable=null)
                        for n, t, null in SCHEMA_FIELDS])
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("bench", True)
    catalog.create_table(TABLE, Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": str(buckets), "rowkind.field": "rk",
                                              "target-file-size": "512 mb"}), True)
    table = catalog.get_table(TABLE)
    rng = np.random.default_rng(7)
    per_commit = rows // commits
    written = []
    for _ in range(commits):
        ids = np.unique(rng.integers(0, rows, per_commit))
        data = pa.table({
            "id": ids, "name": pa.array([f"name-{i % 9973}" for i in ids.tolist()]),
            "score": rng.random(len(ids)), "rk": pa.array(["+I"] * len(ids)),
        }, schema=schema)
        _write(table, data)
        written.append(data.select(["id", "name", "score"]))
    every = pa.concat_tables(written).combine_chunks()
    ids = every.column("id").to_numpy()
    order = np.lexsort((np.arange(len(ids)), ids))  # by key, then by commit
    newest = order[np.append(ids[order][1:] != ids[order][:-1], True)]
    kept = every.take(pa.array(newest))
    (warehouse / EXPECTED).write_text(json.dumps({
        "kind": "primary-key", "rows": kept.num_rows, "buckets": buckets,
        "columns": kept.column_names, "checksum": checksum(kept)}))


def generate_append(warehouse: Path, rows: int, commits: int) -> None:
    """A bucket-unaware append table of ``rows`` rows in ``commits`` commits, each of random
    ``a`` and ``b`` (the sort columns), and ``EXPECTED``: all its rows."""
    import numpy as np
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("a", pa.int32()),
                        ("b", pa.int32()), ("name", pa.string()), ("score", pa.float64())])
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("bench", True)
    catalog.create_table(TABLE, Schema.from_pyarrow_schema(
        schema, options={"bucket": "-1", "target-file-size": "512 mb"}), True)
    table = catalog.get_table(TABLE)
    rng = np.random.default_rng(7)
    per_commit = rows // commits
    written = []
    for commit in range(commits):
        ids = np.arange(commit * per_commit, (commit + 1) * per_commit, dtype=np.int64)
        data = pa.table({
            "id": ids, "a": pa.array(rng.integers(0, 1_000_000, len(ids)), pa.int32()),
            "b": pa.array(rng.integers(0, 1_000_000, len(ids)), pa.int32()),
            "name": pa.array([f"name-{i % 9973}" for i in ids.tolist()]),
            "score": rng.random(len(ids))}, schema=schema)
        _write(table, data)
        written.append(data)
    every = pa.concat_tables(written)
    (warehouse / EXPECTED).write_text(json.dumps({
        "kind": "append", "rows": every.num_rows, "buckets": 1, "columns": every.column_names,
        "checksum": checksum(every)}))


# -- the check of a result ----------------------------------------------------------------

def _avro_records(path: Path) -> list[dict[str, Any]]:
    import fastavro

    with open(path, "rb") as handle:
        return list(fastavro.reader(handle))


def check(warehouse: Path, source_snapshot: int) -> dict[str, Any]:
    """What the compaction must have left; an ``error`` names what is wrong. A primary-key
    table: a new COMPACT snapshot, each bucket's live files all at the max level, no key
    twice, the newest row of each key. An append table: a new COMPACT (paimond) or OVERWRITE
    (Java's sort compaction) snapshot and the same rows (their order is not checked).
    Reads the snapshot, manifests (fastavro) and data files (pyarrow) itself: neither paimond
    nor pypaimon (whose reader does not take Paimon 0.9's manifests) checks the contenders."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    expected = json.loads((warehouse / EXPECTED).read_text())
    keyed = expected["kind"] == "primary-key"
    table = warehouse / "bench.db" / "t"
    latest = int((table / "snapshot" / "LATEST").read_text())
    snapshot = json.loads((table / "snapshot" / f"snapshot-{latest}").read_text())
    kinds = ("COMPACT",) if keyed else ("COMPACT", "OVERWRITE")
    if latest <= source_snapshot or snapshot["commitKind"] not in kinds:
        return {"error": f"latest snapshot {latest} ({snapshot['commitKind']}), not a "
                         f"{' or '.join(kinds)} after {source_snapshot}"}
    schema_id = snapshot["schemaId"]
    options = json.loads((table / "schema" / f"schema-{schema_id}").read_text())["options"]
    max_level = int(options.get("num-levels",
                                int(options.get("num-sorted-run.compaction-trigger", 5)) + 1)) - 1
    live: dict[tuple[bytes, int, str], int] = {}
    for manifest_list in (snapshot["baseManifestList"], snapshot["deltaManifestList"]):
        for meta in _avro_records(table / "manifest" / manifest_list):
            for entry in _avro_records(table / "manifest" / meta["_FILE_NAME"]):
                key = (entry["_PARTITION"], entry["_BUCKET"], entry["_FILE"]["_FILE_NAME"])
                if entry["_KIND"] == 0:
                    live[key] = entry["_FILE"]["_LEVEL"]
                else:
                    live.pop(key, None)
    if keyed:
        levels: dict[int, set[int]] = {}
        for (_, bucket, _), level in live.items():
            levels.setdefault(bucket, set()).add(level)
        wrong = {b: sorted(ls) for b, ls in levels.items() if ls != {max_level}}
        if wrong or len(levels) != expected["buckets"]:
            return {"error": f"buckets {sorted(levels)} with levels {wrong or 'fine'}, "
                             f"expected {expected['buckets']} buckets all at level {max_level}"}
    parts = []
    for (_, bucket, name) in live:
        data = pq.read_table(table / f"bucket-{max(bucket, 0)}" / name,
                             columns=[*(["_VALUE_KIND"] if keyed else []), *expected["columns"]])
        if keyed:  # +I and +U
            data = data.filter(pc.is_in(data.column("_VALUE_KIND"),
                                        pa.array([0, 2], data.schema.field(0).type)))
        parts.append(data.select(expected["columns"]))
    rows = pa.concat_tables(parts)
    rows = rows.take(pc.sort_indices(rows.column("id")))
    ids = rows.column("id").to_numpy()
    if len(ids) > 1 and not (ids[1:] > ids[:-1]).all():
        return {"error": "an id is live twice"}
    digest = checksum(rows)
    if rows.num_rows != expected["rows"] or digest != expected["checksum"]:
        return {"error": f"{rows.num_rows:,} rows (expected {expected['rows']:,}), checksum "
                         f"{'equal' if digest == expected['checksum'] else 'differs'}"}
    return {"rows": rows.num_rows, "files": len(live),
            **({"level": max_level} if keyed else {})}


# -- the Spark driver (run by the Spark 3.5 environment's Python) -------------------------

def spark_driver(master: str, warehouse: str, jar: str, noop: bool, order: str = ""
                 ) -> dict[str, float]:
    """Paimon 0.9's compact procedure on ``master``, as a user's driver script runs it (with
    ``order`` "STRATEGY:COLUMNS", a sort compaction); with ``noop`` only the session, the
    table's loading and the stop. Stops the gateway JVM and waits for it, so that its usage
    counts among this process's children's."""
    started = time.perf_counter()
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName("paimon-compact")
               .config("spark.jars", jar)
               .config("spark.sql.extensions",
                       "org.apache.paimon.spark.extensions.PaimonSparkSessionExtensions")
               .config("spark.sql.catalog.paimon", "org.apache.paimon.spark.SparkCatalog")
               .config("spark.sql.catalog.paimon.warehouse", f"file:{warehouse}")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false"))
    if master.startswith("local-cluster"):
        from pyspark.find_spark_home import _find_spark_home

        # as the tests start it (tests/support/spark_session.py): the workers' directories
        # are temporary, removed at stop, instead of piling up under SPARK_HOME/work
        builder = (builder.config("spark.testing", "true")
                   .config("spark.test.home", str(_find_spark_home())))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    session_s = time.perf_counter() - started
    called = time.perf_counter()
    if noop:
        spark.table(f"paimon.{TABLE}").schema  # noqa: B018  (loads the table)
    else:
        strategy, _, columns = order.partition(":")
        sort = f", order_strategy => '{strategy}', order_by => '{columns}'" if order else ""
        result = spark.sql(f"CALL paimon.sys.compact(table => '{TABLE}'{sort})").collect()
        if not result or not result[0][0]:
            raise SystemExit(f"the procedure answered {result}")
    call_s = time.perf_counter() - called
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    if gateway is not None:
        gateway.shutdown()
        process = getattr(gateway, "proc", None)
        if process is not None:  # the JVM exits when its standard input closes
            process.stdin.close()
            process.wait()
    return {"session_s": session_s, "call_s": call_s}


# -- contenders ---------------------------------------------------------------------------

def _java_setup(release: str, scratch: Path) -> list[str]:
    """``java -cp ... JavaFullCompaction`` compiled against ``release``'s jars (outside the
    measurement)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support.java_paimon import classpath, classpath_text, fetch_jars

    jars = [*classpath(release), *fetch_jars(QUIET_SLF4J)]
    classes = scratch / f"java-{release}-classes"
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", classpath_text(jars),
                    str(JAVA_SOURCE)], check=True)
    return ["java", f"-Djava.io.tmpdir={scratch}", "-cp", classpath_text(jars, classes),
            "JavaFullCompaction"]


def _spark_setup() -> tuple[str, str]:
    """The Spark 3.5 environment's Python (built once) and the connector jar."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support.java_paimon import fetch_jars

    python = subprocess.run([str(SPARK_ENV_SCRIPT)], check=True, capture_output=True,
                            text=True).stdout.strip().splitlines()[-1]
    return python, str(fetch_jars((SPARK_CONNECTOR,))[0])


def contenders(args: argparse.Namespace, scratch: Path, order: str = ""
               ) -> dict[str, tuple[list[str], list[str], dict[str, str]]]:
    """name -> (compaction argv, start-up argv, environment); ``WH`` stands for the copy.
    With ``order`` ("STRATEGY:COLUMNS"): the sort compaction's contenders (paimond, Spark)."""
    env = environment(args.pyc, scratch)
    found = {}
    strategy, _, columns = order.partition(":")
    paimond = [sys.executable, "-m", "paimond.cli", "compact", "WH", "--table", TABLE,
               *((f"--{strategy}-by", columns) if order else ("--full",))]
    suffix = f"-{strategy}" if order else ""
    found[f"paimond{suffix}"] = (paimond, [*paimond, "--dry-run"], env)
    if args.parallelism_1 and not order:
        one = [*paimond, "--parallelism", "1"]
        found["paimond-p1"] = (one, [*one, "--dry-run"], env)
    if args.paimond_spark:
        on_spark = [*paimond, "--executor", "spark", "--spark-master", args.paimond_spark]
        found[f"paimond-spark{suffix}"] = (on_spark, [*on_spark, "--dry-run"],
                                           {**env, "SPARK_LOCAL_IP": "127.0.0.1"})
    wanted = set(args.only.split(",")) if args.only else None

    def chosen(name: str) -> bool:
        return wanted is None or name in wanted or name.removesuffix(suffix) in wanted

    for release in filter(None, args.java.split(",") if not order else ()):
        name = f"java-{release}"
        if chosen(name):
            java = _java_setup(release, scratch)
            found[name] = ([*java, "WH", TABLE], [*java, "WH", TABLE, "--open-only"], env)
    masters = [m for m in filter(None, args.spark.split(";"))
               if chosen(SPARK_MASTERS.get(m, m) + suffix)]
    if masters:
        python, jar = _spark_setup()
        spark_env = {**env, "SPARK_LOCAL_IP": "127.0.0.1",
                     "SPARK_HOME": subprocess.run(
                         [python, "-c", "from pyspark.find_spark_home import _find_spark_home;"
                          "print(_find_spark_home())"], check=True, capture_output=True,
                         text=True).stdout.strip()}
        for master in masters:
            driver = [python, __file__, "--spark-driver", master, "WH", jar,
                      *(("--order", order) if order else ())]
            found[SPARK_MASTERS.get(master, master) + suffix] = (driver, [*driver, "--noop"],
                                                                 spark_env)
    return {n: c for n, c in found.items() if chosen(n)}


# -- measurement --------------------------------------------------------------------------

def _tree_rss_bytes(root: int) -> int:
    """The summed RSS of ``root`` and its descendants now."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as handle:
                    parents[int(entry.name)] = int(handle.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/statm", "rb") as handle:
                total += int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    return total


def measure(argv: list[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """Wall, CPU (user + system, reaped children included), peak RSS (the largest process)
    and the peak of the process tree's summed RSS of one process; ``error`` if it failed."""
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as output:
        process = subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT, text=True,
                                   env=env, cwd=cwd)
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.2):
                peak[0] = max(peak[0], _tree_rss_bytes(process.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)  # reaps it, with its rusage
        wall = time.perf_counter() - started
        done.set()
        sampler.join()
        process.returncode = os.waitstatus_to_exitcode(status)
        output.seek(0)
        text = output.read()
    result: dict[str, Any] = {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
                              "rss": usage.ru_maxrss / 1024, "tree": peak[0] / 2**20}
    if process.returncode != 0:
        result["error"] = f"exit code {process.returncode}: {text[-3000:]}"
    for line in reversed(text.splitlines()):  # the Spark driver's own timings
        if line.startswith("{"):
            result.update(json.loads(line))
            break
    return result


def _latest_snapshot(warehouse: Path) -> int:
    return int((warehouse / "bench.db" / "t" / "snapshot" / "LATEST").read_text())


def run_once(argv: list[str], env: dict[str, str], source: Path, scratch: Path,
             verify: bool) -> dict[str, Any]:
    """``argv`` on a fresh copy of ``source`` (copied, then checked with ``verify``, outside
    the measurement)."""
    copy = scratch / "run"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source, copy)
    try:
        result = measure([str(copy) if a == "WH" else a for a in argv], env, scratch)
        if verify and "error" not in result:
            checked = subprocess.run([sys.executable, __file__, "--check", str(copy),
                                      str(_latest_snapshot(source))],
                                     capture_output=True, text=True, check=False)
            if checked.returncode != 0:
                result["error"] = f"the check failed: {checked.stderr[-2000:]}"
            else:
                result.update(json.loads(checked.stdout.splitlines()[-1]))
        return result
    finally:
        shutil.rmtree(copy, ignore_errors=True)


# -- report -------------------------------------------------------------------------------

def _median(runs: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def report(label: str, runs: int, full: dict[str, list[dict[str, Any]]],
           start: dict[str, list[dict[str, Any]]], failed: dict[str, str],
           paimond: str = "paimond") -> None:
    """The medians of each contender (and of its start-up run), then paimond / each anchor.
    "less start-up": the compaction's wall less the start-up run's (the JVM or Spark session
    start, the table's opening), n/a when the difference drowns in noise (not positive)."""
    width = max(len(n) for n in full) + 1
    print(f"\n== {label}: medians of {runs} interleaved runs, each a whole process; load "
          f"average {os.getloadavg()[0]:.1f}")
    print(f"  {'contender':<{width}} {'wall s':>7} {'CPU s':>7} {'peak RSS':>9} {'tree RSS':>9}"
          f" {'files':>5}  | start-up: {'wall s':>6} {'CPU s':>6} {'RSS':>6} | less start-up")
    for name, results in full.items():
        if name in failed:
            print(f"  {name:<{width}} FAILED: {failed[name].strip()[:1500]}")
            continue
        if not results:
            continue
        s = start.get(name) or []
        line = (f"  {name:<{width}} {_median(results, 'wall'):7.2f} {_median(results, 'cpu'):7.2f}"
                f" {_median(results, 'rss'):6.0f} MB {_median(results, 'tree'):6.0f} MB"
                f" {_median(results, 'files'):5.0f}  |")
        if s:
            line += (f"           {_median(s, 'wall'):6.2f} {_median(s, 'cpu'):6.2f} "
                     f"{_median(s, 'rss'):3.0f} MB | "
                     f"{_median(results, 'wall') - _median(s, 'wall'):7.2f} s")
        if "call_s" in results[0]:
            line += (f"   (inside: session {_median(results, 'session_s'):.2f} s, CALL "
                     f"{_median(results, 'call_s'):.2f} s)")
        print(line)
    base = full.get(paimond)
    if not base or paimond in failed:
        return
    base_start = start.get(paimond) or []
    for name, results in full.items():
        if name == paimond or name in failed or not results:
            continue
        ratios = [f"wall {_median(base, 'wall') / _median(results, 'wall'):.2f}x",
                  f"CPU {_median(base, 'cpu') / _median(results, 'cpu'):.2f}x",
                  f"peak RSS {_median(base, 'rss') / _median(results, 'rss'):.2f}x",
                  f"tree RSS {_median(base, 'tree') / _median(results, 'tree'):.2f}x"]
        s = start.get(name) or []
        if s and base_start:
            own = _median(results, "wall") - _median(s, "wall")
            mine = _median(base, "wall") - _median(base_start, "wall")
            ratios.append(f"wall less start-up {mine / own:.2f}x" if own > 0 and mine > 0
                          else "wall less start-up n/a")
        print(f"  {paimond} / {name:<{width}} " + ", ".join(ratios))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["2M"],
                        help="ROWS (1 bucket) or BUCKETSxROWS, e.g. 2M 10M 8x4M")
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated contenders")
    parser.add_argument("--java", default="2.0,1.4", help="Java Paimon releases ('' for none)")
    parser.add_argument("--spark", default=";".join(SPARK_MASTERS),
                        help="semicolon-separated Spark masters ('' for none)")
    parser.add_argument("--paimond-spark", metavar="MASTER", default="",
                        help="also paimond with --executor spark on this master (the project's "
                             "PySpark), e.g. 'local[2]'")
    parser.add_argument("--parallelism-1", action="store_true",
                        help="also paimond with --parallelism 1")
    parser.add_argument("--sort", metavar="STRATEGY:COLUMNS", default="",
                        help="also sort compaction of an append table, e.g. zorder:a,b "
                             "(paimond and the Spark anchors)")
    parser.add_argument("--sort-rows", default="2M", help="the append table's rows")
    parser.add_argument("--keep", help="keep the generated warehouses here and reuse them")
    parser.add_argument("--pyc", choices=("cached", "none"), default="cached",
                        help="paimond's byte code: cached (as installed) or none")
    parser.add_argument("--generate", nargs=5, help=argparse.SUPPRESS)
    parser.add_argument("--check", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--spark-driver", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--order", default="", help=argparse.SUPPRESS)
    parser.add_argument("--noop", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate:
        kind, path, buckets, rows, commits = args.generate
        if kind == "append":
            generate_append(Path(path), int(rows), int(commits))
        else:
            generate(Path(path), int(buckets), int(rows), int(commits))
        return
    if args.check:
        result = check(Path(args.check[0]), int(args.check[1]))
        print(json.dumps(result))
        sys.exit(0)
    if args.spark_driver:
        print(json.dumps(spark_driver(*args.spark_driver, noop=args.noop, order=args.order)))
        return
    with tempfile.TemporaryDirectory(prefix="paimond-anchors-") as scratch_dir:
        scratch = Path(scratch_dir)
        keep = Path(args.keep) if args.keep else scratch
        sections = [("primary-key", size, "") for size in args.sizes]
        if args.sort:
            sections.append(("append", args.sort_rows, args.sort))
        for kind, size, order in sections:
            commands = contenders(args, scratch, order)
            buckets, rows = parse_size(size)
            source = keep / f"source-{kind}-{buckets}x{rows}-{args.commits}"
            if not (source / EXPECTED).exists():
                shutil.rmtree(source, ignore_errors=True)
                started = time.perf_counter()
                subprocess.run([sys.executable, __file__, "--generate", kind, str(source),
                                str(buckets), str(rows), str(args.commits)], check=True)
                print(f"generated a {kind} table of {rows:,} rows, {buckets} bucket(s), "
                      f"{args.commits} commits, in {time.perf_counter() - started:.1f} s")
            print(f"contenders: {', '.join(commands)}")
            measure_section(args, commands, source, scratch, order,
                            f"{kind} table, {rows:,} rows, {buckets} bucket(s), {args.commits} "
                            f"commits" + (f", sort compaction {order}" if order else
                                          ", full compaction"))


def measure_section(args: argparse.Namespace,
                    commands: dict[str, tuple[list[str], list[str], dict[str, str]]],
                    source: Path, scratch: Path, order: str, label: str) -> None:
    """One untimed round of the start-up commands (caches), then ``--runs`` interleaved
    rounds of each contender and its start-up run; the report."""
    for _, start_argv, env in commands.values():
        run_once(start_argv, env, source, scratch, verify=False)
    full: dict[str, list[dict[str, Any]]] = {n: [] for n in commands}
    start: dict[str, list[dict[str, Any]]] = {n: [] for n in commands}
    failed: dict[str, str] = {}
    for _ in range(args.runs):
        for name, (argv, start_argv, env) in commands.items():
            if name in failed:
                continue
            result = run_once(argv, env, source, scratch, verify=True)
            if "error" in result:
                failed[name] = result["error"]
                continue
            full[name].append(result)
            result = run_once(start_argv, env, source, scratch, verify=False)
            if "error" in result:
                failed[name] = f"start-up run: {result['error']}"
                continue
            start[name].append(result)
    strategy = order.partition(":")[0]
    report(label, args.runs, full, start, failed,
           f"paimond-{strategy}" if order else "paimond")


if __name__ == "__main__":
    main()
