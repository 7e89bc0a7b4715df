"""Benchmark: planning a warehouse-scale table.

Builds a synthetic primary-key table by writing paimond's own metadata directly (a schema,
merged base manifests of 10,000 entries, one delta manifest with a recent compaction's
DELETE/ADD pairs, a snapshot; no data files: planning reads none): ``--files`` live files
over ``files / 1,000`` partitions x 4 buckets x 250 files (level 5: ~240 large
non-overlapping files, level 4: a few, level 0: one file; one bucket in 10 has 5 level-0
files, over ``num-sorted-run.compaction-trigger``, so it plans a task). Sizes double twice.

Each measurement is a fresh process; its CPU (user + system) and peak RSS come from
``os.wait4``:

- ``read manifests`` (the baseline): decode every manifest of the snapshot one at a time,
  keeping nothing (``format.meta.manifest.decode_manifest``).
- ``compact --dry-run``: ``paimond compact WAREHOUSE --table db.t --dry-run``.
- ``compact`` (``--compact``): the compaction for real on a fresh copy of the table (built
  with small real data files for the level-0 files the tasks read): tasks run and one
  snapshot is committed (conflict check, manifest merge); the copy is made outside the
  measurement.

Runs are interleaved (baseline, command, baseline, ...) and medians taken. It prints CPU and
RSS per size, the command's CPU over the baseline's, and the growth per doubling (2.0 is
linear); memory is also shown less a one-file table's (start-up and imports).

    .venv/bin/python bench/planning_scale.py [--files 250000] [--runs 3] [--scratch DIR]
        [--before DIR]  # DIR/paimond: an older tree (``git archive``), run alike, interleaved
        [--compact] [--sizes N ...]  # the real compaction; these sizes instead of doublings
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BUCKETS, FILES_PER_BUCKET, ENTRIES_PER_MANIFEST = 4, 250, 10_000
SCHEMA = {
    "version": 3, "id": 0,
    "fields": [{"id": 0, "name": "dt", "type": "STRING NOT NULL"},
               {"id": 1, "name": "k", "type": "BIGINT NOT NULL"},
               {"id": 2, "name": "v1", "type": "BIGINT"},
               {"id": 3, "name": "v2", "type": "STRING"},
               {"id": 4, "name": "v3", "type": "DOUBLE"}],
    "highestFieldId": 4, "partitionKeys": ["dt"], "primaryKeys": ["dt", "k"],
    "options": {"bucket": str(BUCKETS)}, "timeMillis": 1_700_000_000_000,
}


def _bucket_files(rng: random.Random, hot: bool) -> list[tuple[int, int, int]]:
    """(level, min key, size bytes) of one bucket's files, key ranges disjoint per level."""
    level0 = 5 if hot else 1
    level4 = rng.randint(3, 6)
    files = [(0, 0, rng.randint(1, 4) << 20) for _ in range(level0)]
    files += [(4, (1000 + i) * 1_000_000, rng.randint(8, 16) << 20) for i in range(level4)]
    files += [(5, i * 1_000_000, rng.randint(100, 128) << 20)
              for i in range(FILES_PER_BUCKET - level0 - level4)]
    return files


def _write_data_file(path: Path, schema: Any, min_key: int, max_seq: int) -> int:
    """A small real data file for a level-0 file a task reads (``--compact``): 100 rows of
    keys from ``min_key`` up, sequence numbers up to ``max_seq``; returns its size."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from paimond.table.data_files.kv_layout import physical_arrow_schema, physical_row_type

    arrow_schema = physical_arrow_schema(physical_row_type(schema, key_value=True))
    rows = 100
    keys = [min_key + i * 9_000 for i in range(rows)]
    columns = [keys, list(range(max_seq - rows + 1, max_seq + 1)), [0] * rows,
               ["x"] * rows, keys, keys, [f"v{k}" for k in keys], [k / 7 for k in keys]]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_arrays([pa.array(c, type=f.type)
                                         for c, f in zip(columns, arrow_schema, strict=True)],
                                        schema=arrow_schema), path)
    return path.stat().st_size


def build_table(warehouse: Path, files: int, data: bool = False) -> None:
    """``warehouse/db.db/t``: the synthetic table's metadata (see the module docstring);
    ``data``: with real data files for the level-0 files of the buckets that plan a task."""
    sys.path.insert(0, str(ROOT.parent))
    from paimond.format.binary.binary_row import encode_manifest_row
    from paimond.format.meta.manifest import (
        FILE_KIND_ADD,
        FILE_KIND_DELETE,
        DataFileMeta,
        ManifestEntry,
        SimpleStats,
    )
    from paimond.format.meta.schema import decode_schema
    from paimond.format.meta.snapshot import Snapshot, encode_snapshot
    from paimond.table.commit.manifest_files import ManifestWriter
    from paimond.table.storage.interface import open_storage

    table_dir = warehouse / "db.db" / "t"
    for sub in ("schema", "snapshot", "manifest"):
        (table_dir / sub).mkdir(parents=True, exist_ok=True)
    schema_bytes = json.dumps(SCHEMA).encode()
    (table_dir / "schema" / "schema-0").write_bytes(schema_bytes)
    schema = decode_schema(schema_bytes)
    partition_types = schema.partition_type.field_types
    key_types = schema.key_type.field_types
    value_types = [f.type for f in schema.fields]
    rng = random.Random(files)
    stats_pool = []
    for i in range(64):
        low = ["2024-01-01", i, i * 3, f"v{i:05d}", i / 7]
        high = ["2024-01-01", i + 10**6, i * 3 + 10**6, f"w{i:05d}", i * 1e3]
        stats_pool.append(SimpleStats(encode_manifest_row(low, value_types),
                                      encode_manifest_row(high, value_types), (0, 0, 1, 2, 0)))
    writer = ManifestWriter(open_storage(str(warehouse)), str(table_dir), partition_types)
    sequence, entries, base, moved = 0, [], [], []
    partitions = max(1, files // (BUCKETS * FILES_PER_BUCKET))
    for p in range(partitions):
        day = datetime.date(2020, 1, 1) + datetime.timedelta(days=p)
        partition = encode_manifest_row([day.isoformat()], partition_types)
        for bucket in range(BUCKETS):
            hot = rng.random() < 0.1
            for n, (level, min_key, size) in enumerate(_bucket_files(rng, hot)):
                sequence += 1000
                key = min_key + n if level == 0 else min_key
                name = f"data-{p:05d}-{bucket}-{n:04d}-{rng.getrandbits(64):016x}-0.parquet"
                rows = size // 64
                if data and hot and level == 0:
                    size, rows = _write_data_file(
                        table_dir / f"dt={day.isoformat()}" / f"bucket-{bucket}" / name, schema,
                        key, sequence), 100
                meta = DataFileMeta(
                    name, size, rows, encode_manifest_row([key], key_types),
                    encode_manifest_row([key + 999_999], key_types),
                    SimpleStats(encode_manifest_row([key], key_types),
                                encode_manifest_row([key + 999_999], key_types), (0,)),
                    stats_pool[n % 64], sequence - 999, sequence, 0, level, (),
                    1_700_000_000_000 + sequence, 0, None, 1 if level else 0, None, None,
                    None, None, None)
                entry = ManifestEntry(FILE_KIND_ADD, partition, bucket, BUCKETS, meta)
                if level == 4 and p % 50 == 0 and bucket == 0 and min_key == 1000 * 1_000_000:
                    moved.append(entry)  # later "compacted" by the delta: DELETE + new ADD
                entries.append(entry)
                if len(entries) == ENTRIES_PER_MANIFEST:
                    base.append(writer.write_manifest(entries))
                    entries = []
    if entries:
        base.append(writer.write_manifest(entries))
    delta_entries = []
    for entry in moved:
        delta_entries.append(ManifestEntry(FILE_KIND_DELETE, entry.partition, entry.bucket,
                                           BUCKETS, entry.file))
        delta_entries.append(ManifestEntry(FILE_KIND_ADD, entry.partition, entry.bucket, BUCKETS,
                                           dataclasses.replace(entry.file, level=5)))
    delta = [writer.write_manifest(delta_entries)] if delta_entries else []
    base_list, base_size = writer.write_manifest_list(base)
    delta_list, delta_size = writer.write_manifest_list(delta)
    snapshot = Snapshot(1, 0, base_list, delta_list, "bench", 1, "COMPACT",
                        1_700_000_000_000, base_manifest_list_size=base_size,
                        delta_manifest_list_size=delta_size, total_record_count=files)
    (table_dir / "snapshot" / "snapshot-1").write_bytes(encode_snapshot(snapshot))
    (table_dir / "snapshot" / "LATEST").write_text("1")
    (table_dir / "snapshot" / "EARLIEST").write_text("1")


def read_manifests(warehouse: str) -> None:
    """The baseline's child: decode every manifest of the latest snapshot, keeping nothing."""
    from paimond.table.catalog import open_table
    from paimond.table.scan.snapshot_scan import read_manifest, read_manifest_list
    from paimond.table.storage.interface import open_storage

    storage = open_storage(warehouse)
    table = open_table(storage, storage.root, "db.t")
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    count = 0
    for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
        for meta in read_manifest_list(table, name, "bench"):
            count += len(read_manifest(table, meta, "bench"))
    print(count)


def _measure(argv: list[str], env: dict[str, str] | None) -> tuple[float, float, float]:
    """Wall s, CPU s and peak RSS MB of one child process."""
    start = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               cwd=ROOT.parent, env=env)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed: {process.stderr.read().decode() if process.stderr else ''}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _commands(warehouse: Path, before: Path | None, real: bool = False
              ) -> dict[str, tuple[list[str], dict[str, str] | None]]:
    """``real``: ``compact`` itself (tasks run, a snapshot committed) on a fresh copy of the
    table (``COPY`` in the arguments, see ``_measure_on_copy``) instead of ``--dry-run``."""
    python = sys.executable
    target, name = ("COPY", "compact") if real else (str(warehouse), "compact --dry-run")
    compact = [python, "-m", "paimond.cli", "compact", target, "--table", "db.t",
               *(() if real else ("--dry-run",))]
    commands: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "read manifests": ([python, __file__, "--read-manifests", str(warehouse)], None),
        name: (compact, None)}
    if before is not None:  # the same command on an older tree (its package in before/paimond)
        commands["  ... before"] = (compact, {**os.environ, "PYTHONPATH": str(before)})
    return commands


def _measure_on_copy(argv: list[str], env: dict[str, str] | None, warehouse: Path
                     ) -> tuple[float, float, float]:
    """``_measure`` with ``COPY`` in ``argv`` standing for a fresh copy of ``warehouse``."""
    if "COPY" not in argv:
        return _measure(argv, env)
    import shutil

    copy = warehouse.with_name(warehouse.name + "-run")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(warehouse, copy)
    try:
        return _measure([str(copy) if a == "COPY" else a for a in argv], env)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def _median(runs: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    return (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs),
            statistics.median(r[2] for r in runs))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=250_000, help="smallest size (live files)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scratch", default=None, help="keep the tables here between runs")
    parser.add_argument("--before", type=Path, help="also run an older tree (DIR/paimond), "
                        "interleaved")
    parser.add_argument("--compact", action="store_true", help="run the compaction for real "
                        "(on a copy; tables with data files for the tasks' inputs) instead of "
                        "--dry-run")
    parser.add_argument("--sizes", type=int, nargs="+", help="these sizes (live files) only "
                        "besides the 1k-file table, instead of --files doubled twice")
    parser.add_argument("--read-manifests", metavar="WAREHOUSE", help=argparse.SUPPRESS)
    parser.add_argument("--build", nargs=2, metavar=("WAREHOUSE", "FILES"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        build_table(Path(args.build[0]), int(args.build[1]), data=args.compact)
        return
    if args.read_manifests:
        read_manifests(args.read_manifests)
        return
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="paimond-planning-"))
    sizes = [1000, *(args.sizes or (args.files, 2 * args.files, 4 * args.files))]
    figures: dict[int, dict[str, tuple[float, float, float]]] = {}
    for size in sizes:
        warehouse = scratch / f"files-{size}{'-data' if args.compact else ''}"
        if not (warehouse / "db.db" / "t" / "snapshot" / "LATEST").exists():
            started = time.monotonic()  # in a child: the parent stays small (a child's
            # peak RSS starts at its parent's)
            subprocess.run([sys.executable, __file__, "--build", str(warehouse), str(size),
                            *(("--compact",) if args.compact else ())], check=True)
            print(f"built {size:,} files in {time.monotonic() - started:.0f} s", flush=True)
        runs: dict[str, list[tuple[float, float, float]]] = {}
        for _ in range(args.runs):
            for name, (argv, env) in _commands(warehouse, args.before, args.compact).items():
                runs.setdefault(name, []).append(_measure_on_copy(argv, env, warehouse))
        figures[size] = {name: _median(r) for name, r in runs.items()}
        for name, (wall, cpu, rss) in figures[size].items():
            print(f"{size:>9,} files  {name:<18} wall {wall:6.2f} s  CPU {cpu:6.2f} s  "
                  f"peak RSS {rss:7.1f} MB", flush=True)
    report(figures, sizes)


def report(figures: dict[int, dict[str, tuple[float, float, float]]], sizes: list[int]) -> None:
    """Per size each command's CPU over the baseline's (``read manifests``) and its RSS less
    the 1k-file table's; then the growth per doubling of CPU, wall and RSS above start-up."""
    small = figures[sizes[0]]
    print("\nsize        command            CPU vs baseline  RSS less 1k-file table")
    for size in sizes[1:]:
        base_cpu = figures[size]["read manifests"][1]
        for name, (_, cpu, rss) in figures[size].items():
            extra = rss - small[name][2]
            print(f"{size:>9,}  {name:<18} {cpu / base_cpu:6.2f}x          {extra:7.1f} MB "
                  f"({extra * 2**20 / size:.0f} B/file)")
    print("\ngrowth per doubling (target <= 2.0x for CPU; memory bounded or far below 2.0x)")
    for name in figures[sizes[1]]:
        cpu = [f"{figures[b][name][1] / figures[a][name][1]:.2f}x"
               for a, b in zip(sizes[1:], sizes[2:], strict=False)]
        wall = [f"{figures[b][name][0] / figures[a][name][0]:.2f}x"
                for a, b in zip(sizes[1:], sizes[2:], strict=False)]
        above = {size: figures[size][name][2] - small[name][2] for size in sizes[1:]}
        rss = [f"{above[b] / max(1e-9, above[a]):.2f}x"
               for a, b in zip(sizes[1:], sizes[2:], strict=False)]
        print(f"  {name:<18} CPU {', '.join(cpu)}  wall {', '.join(wall)}  "
              f"RSS above start-up {', '.join(rss)}")



if __name__ == "__main__":
    main()
