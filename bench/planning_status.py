"""Benchmark: ``paimond status`` and the append table's compaction plan of a warehouse-scale
table, beside ``bench/planning_scale.py`` (whose primary-key tables and
measuring it reuses).

Tables (metadata only, written with paimond's own manifest writer; no data files: neither
command reads one):

- ``pk``: ``planning_scale.build_table``'s primary-key table, ``files / 1,000`` daily
  partitions x 4 buckets x 250 files, merged 10,000-entry base manifests in partition order
  and a delta manifest spanning every partition.
- ``append``: a bucket-unaware append table (``bucket = -1``), ``files / 1,000`` daily
  partitions of 1,000 files each, one in 20 under the compaction file size (so each
  partition packs a few tasks; 50k candidates at 1M files, under
  ``compaction.file-num-limit``), manifests as ``pk``'s.

Commands, each a fresh process (``os.wait4``: user + system CPU, peak RSS), interleaved,
medians of ``--runs``:

- ``read manifests``: decode every manifest of the snapshot, keeping nothing (the baseline).
- ``status``: ``paimond status WH --table db.t --no-verify --json`` of ``pk``.
- ``append --dry-run``: ``paimond compact WH --table db.t --dry-run`` of ``append``.
- with ``--before DIR``: both on an older tree (``DIR/paimond``, e.g. ``git archive``).

Prints CPU and RSS per size, CPU against the baseline, RSS above a 1k-file table's, and the
growth per doubling (2.0 is linear).

    .venv/bin/python bench/planning_status.py [--files 250000] [--runs 3] [--scratch DIR]
        [--before DIR]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import planning_scale  # noqa: E402  (bench/ is not a package)

ROOT = planning_scale.ROOT
FILES_PER_PARTITION, ENTRIES_PER_MANIFEST = 1000, 10_000
APPEND_SCHEMA = {
    "version": 3, "id": 0,
    "fields": [{"id": 0, "name": "dt", "type": "STRING NOT NULL"},
               {"id": 1, "name": "v1", "type": "BIGINT"},
               {"id": 2, "name": "v2", "type": "STRING"}],
    "highestFieldId": 2, "partitionKeys": ["dt"], "primaryKeys": [],
    "options": {"bucket": "-1", "target-file-size": "128 mb"}, "timeMillis": 1_700_000_000_000,
}


def build_append_table(warehouse: Path, files: int) -> None:
    """``warehouse/db.db/t``: the append table's metadata (see the module docstring)."""
    sys.path.insert(0, str(ROOT.parent))
    from paimond.format.binary.binary_row import encode_manifest_row
    from paimond.format.meta.manifest import FILE_KIND_ADD, DataFileMeta, ManifestEntry, SimpleStats
    from paimond.format.meta.schema import decode_schema
    from paimond.format.meta.snapshot import Snapshot, encode_snapshot
    from paimond.table.commit.manifest_files import ManifestWriter
    from paimond.table.storage.interface import open_storage

    table_dir = warehouse / "db.db" / "t"
    for sub in ("schema", "snapshot", "manifest"):
        (table_dir / sub).mkdir(parents=True, exist_ok=True)
    schema_bytes = json.dumps(APPEND_SCHEMA).encode()
    (table_dir / "schema" / "schema-0").write_bytes(schema_bytes)
    schema = decode_schema(schema_bytes)
    partition_types = schema.partition_type.field_types
    value_types = [f.type for f in schema.fields]
    rng = random.Random(files)
    stats = SimpleStats(encode_manifest_row(["2020-01-01", 0, "a"], value_types),
                        encode_manifest_row(["2020-01-01", 10**6, "z"], value_types), (0, 0, 1))
    writer = ManifestWriter(open_storage(str(warehouse)), str(table_dir), partition_types)
    sequence, entries, base = 0, [], []
    for p in range(max(1, files // FILES_PER_PARTITION)):
        day = datetime.date(2020, 1, 1) + datetime.timedelta(days=p)
        partition = encode_manifest_row([day.isoformat()], partition_types)
        for n in range(FILES_PER_PARTITION):
            small = rng.random() < 0.05
            size = (rng.randint(1, 4) if small else rng.randint(100, 128)) << 20
            rows = size // 64
            meta = DataFileMeta(
                f"data-{p:05d}-{n:04d}-{rng.getrandbits(64):016x}-0.parquet", size, rows,
                b"", b"", SimpleStats(b"", b"", ()), stats, sequence, sequence + rows - 1, 0, 0,
                (), 1_700_000_000_000 + p * 86_400_000 + n, 0, None, 0, None, None, None, None,
                None)
            sequence += rows
            entries.append(ManifestEntry(FILE_KIND_ADD, partition, 0, -1, meta))
            if len(entries) == ENTRIES_PER_MANIFEST:
                base.append(writer.write_manifest(entries))
                entries = []
    if entries:
        base.append(writer.write_manifest(entries))
    base_list, base_size = writer.write_manifest_list(base)
    delta_list, delta_size = writer.write_manifest_list([])
    snapshot = Snapshot(1, 0, base_list, delta_list, "bench", 1, "APPEND",
                        1_700_000_000_000, base_manifest_list_size=base_size,
                        delta_manifest_list_size=delta_size, total_record_count=files)
    (table_dir / "snapshot" / "snapshot-1").write_bytes(encode_snapshot(snapshot))
    (table_dir / "snapshot" / "LATEST").write_text("1")
    (table_dir / "snapshot" / "EARLIEST").write_text("1")


def _commands(pk: Path, append: Path, before: Path | None
              ) -> dict[str, tuple[list[str], dict[str, str] | None]]:
    python = sys.executable
    cli = [python, "-m", "paimond.cli"]
    status = [*cli, "status", str(pk), "--table", "db.t", "--no-verify", "--json"]
    plan = [*cli, "compact", str(append), "--table", "db.t", "--dry-run"]
    commands: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "read manifests": ([python, planning_scale.__file__, "--read-manifests", str(pk)], None),
        "status": (status, None)}
    if before is not None:
        env = {**os.environ, "PYTHONPATH": str(before)}
        commands["status before"] = (status, env)
    commands["append --dry-run"] = (plan, None)
    if before is not None:
        commands["append before"] = (plan, env)
    return commands


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=250_000, help="smallest size (live files)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scratch", default=None, help="keep the tables here between runs")
    parser.add_argument("--before", type=Path, help="also run an older tree (DIR/paimond), "
                        "interleaved")
    args = parser.parse_args()
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="paimond-planning-status-"))
    sizes = [1000, args.files, 2 * args.files, 4 * args.files]
    figures: dict[int, dict[str, tuple[float, float, float]]] = {}
    for size in sizes:
        pk, append = scratch / f"files-{size}", scratch / f"append-{size}"
        for warehouse, build in ((pk, planning_scale.build_table), (append, build_append_table)):
            if not (warehouse / "db.db" / "t" / "snapshot" / "LATEST").exists():
                started = time.monotonic()
                build(warehouse, size)
                print(f"built {warehouse.name} in {time.monotonic() - started:.0f} s", flush=True)
        runs: dict[str, list[tuple[float, float, float]]] = {}
        for _ in range(args.runs):
            for name, (argv, env) in _commands(pk, append, args.before).items():
                runs.setdefault(name, []).append(planning_scale._measure(argv, env))
        figures[size] = {name: planning_scale._median(r) for name, r in runs.items()}
        for name, (wall, cpu, rss) in figures[size].items():
            print(f"{size:>9,} files  {name:<18} wall {wall:6.2f} s  CPU {cpu:6.2f} s  "
                  f"peak RSS {rss:7.1f} MB", flush=True)
    planning_scale.report(figures, sizes)


if __name__ == "__main__":
    main()
