"""Benchmark: does the cost grow with the work, or faster?

Each case runs at sizes n, 2n, 4n and prints the CPU seconds and the growth factor per
doubling (2.0 is linear; 4.0 quadratic). Baselines are the smaller sizes of the same run.

- ``status``: ``paimond status WAREHOUSE --no-verify`` as a process, over N tables (one
  pypaimon-written table, copied), minus the same command over one table (start-up and
  imports), measured alike.
- ``idle check``: the daemon's per-table check (``Table.watched_latest_id``) over N tables,
  30 rounds, in process.
- ``expire``: ``paimond expire-snapshots --retain-max 1`` of a table with S writer commits
  (one file each; never merged, so its manifest lists grow with S: ``write_history`` writes
  them as a writer does, much faster than pypaimon), minus the same command on a
  one-snapshot table.

    .venv/bin/python bench/growth.py [--tables 250] [--snapshots 1000]
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
    from paimond.table.storage.interface import open_storage

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


def _zigzag(value: int) -> bytes:
    n, out = (value << 1) ^ (value >> 63), bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _skip_long(data: bytes, pos: int) -> int:
    while data[pos] & 0x80:
        pos += 1
    return pos + 1


class _ListEncoder:
    """Manifest lists as ``encode_manifest_list`` writes them (zstd blocks of <= 64,000
    record bytes), each record encoded once: a history of S snapshots writes S^2/2 entries."""

    def __init__(self) -> None:
        from paimond.format.meta.manifest_list import encode_manifest_list

        self._encode = encode_manifest_list
        empty = encode_manifest_list([], compression="null")
        self._header_size = len(empty)
        zstd_empty = encode_manifest_list([], compression="zstd")
        self._header, self._sync = zstd_empty, zstd_empty[-16:]

    def record(self, meta: object) -> bytes:
        one = self._encode([meta], compression="null")  # type: ignore[list-item]
        pos = _skip_long(one, _skip_long(one, self._header_size))  # block count, size
        return one[pos:-16]

    def encode(self, records: list[bytes]) -> bytes:
        import zstandard

        compressor = zstandard.ZstdCompressor(level=1)
        out, block, size = [self._header], [], 0
        for record in records + [b""]:
            if block and (not record or size + len(record) > 64000):
                packed = compressor.compress(b"".join(block))
                out += [_zigzag(len(block)), _zigzag(len(packed)), packed, self._sync]
                block, size = [], 0
            if record:
                block.append(record)
                size += len(record)
        return b"".join(out)


def write_history(warehouse: str, snapshots: int) -> None:
    """A primary-key table of ``snapshots`` one-file commits that nobody merged: pypaimon
    writes the first; the others are written here as a writer commits (a manifest with one
    ADD, a delta list, a base list = the previous base + delta lists, the snapshot), each
    data file a hard link of the first one, without fsync."""
    import dataclasses
    import os
    import uuid

    from paimond.format.meta.manifest import encode_manifest
    from paimond.format.meta.snapshot import encode_snapshot
    from paimond.table.catalog import open_table
    from paimond.table.layout import LATEST_HINT, MANIFEST_DIR
    from paimond.table.scan.snapshot_scan import read_manifest, read_manifest_list
    from paimond.table.storage.interface import open_storage

    write_pk_table(warehouse, 1)
    storage = open_storage(warehouse)
    table = open_table(storage, warehouse, "db.t")
    first = table.snapshots.load(1)
    where = table.snapshots.path(1)
    (delta,) = read_manifest_list(table, first.delta_manifest_list, where)
    (entry,) = read_manifest(table, delta, where)
    bucket_dir = os.path.join(table.path, "bucket-0")
    seed_file = os.path.join(bucket_dir, entry.file.file_name)
    encoder = _ListEncoder()
    base = [encoder.record(m) for m in read_manifest_list(table, first.base_manifest_list, where)]
    previous_delta = [encoder.record(delta)]
    snapshot = first
    for snapshot_id in range(2, snapshots + 1):
        name = f"data-{uuid.uuid4()}-0.parquet"
        os.link(seed_file, os.path.join(bucket_dir, name))
        added = dataclasses.replace(entry, file=dataclasses.replace(entry.file, file_name=name))
        commit = uuid.uuid4()
        manifest = encode_manifest([added])
        meta = dataclasses.replace(delta, file_name=f"manifest-{commit}-0",
                                   file_size=len(manifest))
        base += previous_delta
        previous_delta = [encoder.record(meta)]
        base_name, delta_name = f"manifest-list-{commit}-0", f"manifest-list-{commit}-1"
        base_bytes, delta_bytes = encoder.encode(base), encoder.encode(previous_delta)
        for name, data in ((meta.file_name, manifest), (base_name, base_bytes),
                           (delta_name, delta_bytes)):
            Path(table.file_path(MANIFEST_DIR, name)).write_bytes(data)
        snapshot = dataclasses.replace(
            snapshot, id=snapshot_id, base_manifest_list=base_name,
            base_manifest_list_size=len(base_bytes), delta_manifest_list=delta_name,
            delta_manifest_list_size=len(delta_bytes), time_millis=first.time_millis + snapshot_id,
            total_record_count=2 * snapshot_id, uuid=str(uuid.uuid4()))
        Path(table.snapshots.path(snapshot_id)).write_bytes(encode_snapshot(snapshot))
    Path(table.snapshots.hint_path(LATEST_HINT)).write_text(str(snapshots))


def _expire_once_cpu_s(scratch: Path, snapshots: int, attempt: int | str) -> float:
    source = scratch / f"history-{snapshots}"
    if not source.exists():
        write_history(str(source), snapshots)
    copy = scratch / f"history-{snapshots}-{attempt}"
    shutil.copytree(source, copy)
    cpu_s = _process_cpu_s(_paimond("expire-snapshots", str(copy), "--table", "db.t",
                                    "--retain-max", "1", "--retain-min", "1"))
    shutil.rmtree(copy)
    return cpu_s


def _expire_cpu_s(scratch: Path, snapshots: int) -> float:
    """Less the same command on a one-snapshot table (nothing to expire: start-up), run
    alternately; the median of 3."""
    runs = [_expire_once_cpu_s(scratch, snapshots, attempt)
            - _expire_once_cpu_s(scratch, 1, f"{snapshots}-{attempt}") for attempt in range(3)]
    return sorted(runs)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=250, help="the smallest table count")
    parser.add_argument("--snapshots", type=int, default=1000,
                        help="the smallest snapshot count")
    args = parser.parse_args()
    tables = [args.tables, 2 * args.tables, 4 * args.tables]
    snapshots = [args.snapshots, 2 * args.snapshots, 4 * args.snapshots]
    print(f"CPU seconds; {os.cpu_count()} CPUs; python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="paimond-growth-") as scratch:
        root = Path(scratch)
        report_growth("status, N tables", tables, lambda n: _status_cpu_s(root, n))
        report_growth("idle check x30, N tables", tables, lambda n: _idle_cpu_s(root, n))
        report_growth("expire, S snapshots", snapshots, lambda n: _expire_cpu_s(root, n))


if __name__ == "__main__":
    main()
