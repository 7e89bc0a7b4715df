"""Benchmark: the rolling manifest writer (``table.commit.manifest_merge``), in
process, on real entries: the first ``--entries`` live entries of a ``bench/planning_scale.py``
table (built if missing), written to 8 MB manifests

- ``rolling``: ``write_rolling`` of them all at once (a minor merge's write);
- ``streamed``: as the commit's streamed full merge writes them (``RollingWriter``): 10,000
  entries arrive at a time and the full files are written as they fill.

Each case runs in a fresh child (this tree, and with ``--before DIR`` an older one,
``DIR/paimond``, interleaved); it prints the CPU seconds of the writing alone, the peak RSS of
the child and a digest of the files written (same cut points, same bytes but for each file's
random sync marker).

    .venv/bin/python bench/manifest_rolling.py [--entries 200000] [--runs 3] [--before DIR]
        [--scratch DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import planning_scale  # noqa: E402  (bench/ is not a package)

CHUNK = 10_000


def _digest(directory: Path) -> str:
    """Of every manifest written, in name order of their sizes and contents less the sync
    marker (the 16 bytes ending the header, repeated after each block)."""
    from paimond.format.meta.avro_container import read_blocks_uncompressed

    digest = hashlib.sha1()
    for path in sorted(directory.glob("manifest-*"), key=lambda p: p.stat().st_mtime_ns):
        data = path.read_bytes()
        _, records, _ = read_blocks_uncompressed(data)
        digest.update(f"{records}:".encode())
        marker = _sync_marker(data)
        digest.update(data.replace(marker, b"S" * 16))
    return digest.hexdigest()[:12]


def _sync_marker(data: bytes) -> bytes:
    """The container's sync marker: the 16 bytes after its header's metadata map."""
    from paimond.format.meta import avro_container

    _, sync, _ = avro_container._read_header(memoryview(data))
    return bytes(sync)


def run(warehouse: str, entries_wanted: int, mode: str) -> None:
    """The child: read the entries, then time the writing alone."""
    from paimond.table.catalog import open_table
    from paimond.table.commit.manifest_files import ManifestWriter
    from paimond.table.commit.manifest_merge import ROLLING_CHECK_RECORDS, RollingWriter, write_rolling
    from paimond.table.scan.snapshot_scan import read_manifest, read_manifest_list
    from paimond.table.storage.interface import open_storage

    storage = open_storage(warehouse)
    table = open_table(storage, storage.root, "db.t")
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    entries = []
    for meta in read_manifest_list(table, snapshot.base_manifest_list, "bench"):
        entries += read_manifest(table, meta, "bench")
        if len(entries) >= entries_wanted:
            break
    entries = entries[:entries_wanted]
    out = Path(tempfile.mkdtemp(prefix="paimond-rolling-"))
    (out / "manifest").mkdir()
    writer = ManifestWriter(open_storage(str(out)), str(out),
                            table.latest_schema().partition_type.field_types)
    target = 8 << 20
    started = time.process_time()
    if mode == "rolling":
        files = write_rolling(writer, entries, target)
    else:  # as table.manifest_merge._full_compaction feeds a RollingWriter
        stream = RollingWriter(writer, target)
        files, survivors, next_try = [], [], 2 * ROLLING_CHECK_RECORDS
        for start in range(0, len(entries), CHUNK):
            survivors += entries[start:start + CHUNK]
            if len(survivors) >= next_try:
                written, next_try = stream.write_full_files(survivors)
                files += written
        files += stream(survivors) if survivors else []
    cpu = time.process_time() - started
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{cpu:.3f} {rss:.1f} {len(files)} {_digest(out / 'manifest')}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", type=Path, help="also an older tree (DIR/paimond)")
    parser.add_argument("--scratch", default=None, help="keep the source table here")
    parser.add_argument("--run", nargs=3, metavar=("WAREHOUSE", "ENTRIES", "MODE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        run(args.run[0], int(args.run[1]), args.run[2])
        return
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="paimond-rolling-src-"))
    size = max(250_000, args.entries)
    warehouse = scratch / f"files-{size}"
    if not (warehouse / "db.db" / "t" / "snapshot" / "LATEST").exists():
        subprocess.run([sys.executable, planning_scale.__file__, "--build", str(warehouse),
                        str(size)], check=True)
    trees = {"after": None, **({"before": str(args.before)} if args.before else {})}
    for mode in ("rolling", "streamed"):
        found: dict[str, list[tuple[float, float]]] = {}
        digests: dict[str, set[str]] = {}
        for _ in range(args.runs):
            for name, path in trees.items():
                env = {**os.environ, **({"PYTHONPATH": path} if path else {})}
                line = subprocess.run(
                    [sys.executable, __file__, "--run", str(warehouse), str(args.entries), mode],
                    check=True, capture_output=True, text=True, env=env,
                    cwd=planning_scale.ROOT.parent).stdout.split()
                found.setdefault(name, []).append((float(line[0]), float(line[1])))
                digests.setdefault(name, set()).add(f"{line[2]} files {line[3]}")
        for name, runs in found.items():
            cpu = statistics.median(r[0] for r in runs)
            rss = statistics.median(r[1] for r in runs)
            print(f"{mode:<9} {name:<7} CPU {cpu:6.2f} s  peak RSS {rss:7.1f} MB  "
                  f"{', '.join(sorted(digests[name]))}", flush=True)
        if "before" in found:
            ratio = (statistics.median(r[0] for r in found["after"])
                     / statistics.median(r[0] for r in found["before"]))
            print(f"{mode:<9} after / before CPU {ratio:.2f}x", flush=True)


if __name__ == "__main__":
    main()
