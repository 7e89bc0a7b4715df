"""Benchmark: repeated deletion-vector compactions with and without the key-lookup cache.

A deduplicate table with deletion vectors, one bucket, holds N rows (default 10M; hash-like
BIGINT keys) at the max level. Each round pypaimon commits 100k upserts of random existing
keys to level 0, and paimond compacts the very same table state (restored from a copy)
once per lookup mode: the level-0 file goes up, its keys are looked up in the levels above
(the 10M-row max level among them), and the superseded rows get deletion-vector marks.
The modes:
  - direct: no cache, the key columns of the files above are read from storage;
  - cold: an empty cache directory (those key columns are read once and cached);
  - warm: the cache as the cold run left it (same process: each file's CRC checked once);
  - warm-new-process: the same, with the in-process record of checked files forgotten, as
    a daemon's next job in a fresh worker process would see it.
The last mode's result is the next round's table.
Prints, per round, seconds and bytes read from the warehouse storage (every read through
paimond's storage layer: data files, manifests, DV files), and the ratios the goal is stated
in: warm rounds against cold rounds (goal: >= 5x less time, >= 20x fewer bytes).

    .venv/bin/python bench/lookup_cache.py [--rows 10000000] [--keys 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

_read = {"bytes": 0}
_lock = threading.Lock()


def _count(size: int) -> None:
    with _lock:
        _read["bytes"] += size


class _Counting:
    """A read stream that counts the bytes it hands out."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        _count(len(data))
        return data

    def readinto(self, buffer: Any) -> int:
        count = self._stream.readinto(buffer)
        _count(count or 0)
        return count

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __enter__(self) -> _Counting:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stream.close()


def _instrument_storage() -> None:
    from paimond.table.storage.fsspec_storage import FsspecStorage

    open_input, read_bytes = FsspecStorage.open_input, FsspecStorage.read_bytes

    def counted_open(self: Any, path: str, *, buffered: bool = True) -> Any:
        return _Counting(open_input(self, path, buffered=buffered))

    def counted_read(self: Any, path: str) -> bytes:
        data = read_bytes(self, path)
        _count(len(data))
        return data

    FsspecStorage.open_input = counted_open  # type: ignore[method-assign]
    FsspecStorage.read_bytes = counted_read  # type: ignore[method-assign]


def key_of(numbers: Any) -> Any:
    """Distinct, hash-like keys (as ids or hashed keys are): they do not compress away."""
    import numpy as np

    mixed = numbers.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)  # wraps: a bijection
    return (mixed >> np.uint64(1)).astype(np.int64)


def _write(table: Any, ids: Any, round_no: int) -> None:
    import pyarrow as pa

    data = pa.table({"id": pa.array(ids, pa.int64()),
                     "v": pa.array([f"r{round_no}-{i % 1000}" for i in range(len(ids))])})
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(data)
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def build(warehouse: Path, rows: int) -> Any:
    import numpy as np
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    from paimond.clock import SYSTEM_CLOCK
    from paimond.maintenance.compact.job import CompactJob
    from paimond.table.catalog import open_table
    from paimond.table.storage.interface import open_storage

    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("bench", True)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    catalog.create_table("bench.dv", Schema.from_pyarrow_schema(
        schema, primary_keys=["id"],
        options={"bucket": "1", "deletion-vectors.enabled": "true",
                 "target-file-size": "1 gb"}), True)
    table = catalog.get_table("bench.dv")
    step = 2_000_000
    for start in range(0, rows, step):
        _write(table, key_of(np.arange(start, min(rows, start + step), dtype=np.int64)), -1)
    paimond_table = open_table(open_storage(str(warehouse)), str(warehouse), "bench.dv")
    summary = CompactJob(paimond_table, clock=SYSTEM_CLOCK, full=True, use_processes=False).run()
    assert summary.snapshot is not None, summary.describe()
    return table


def write_round(table: Any, rows: int, keys: int, round_no: int) -> None:
    import numpy as np

    rng = np.random.default_rng(round_no)
    _write(table, key_of(np.unique(rng.integers(0, rows, keys))), round_no)


def compact(warehouse: Path, cache: Any) -> dict[str, Any]:
    from paimond.clock import Clock
    from paimond.maintenance.compact.job import CompactJob
    from paimond.table.catalog import open_table
    from paimond.table.storage.interface import open_storage

    paimond_table = open_table(open_storage(str(warehouse)), str(warehouse), "bench.dv")
    _read["bytes"] = 0
    started = time.perf_counter()
    summary = CompactJob(paimond_table, use_processes=False, parallelism=1,
                         clock=Clock(fixed_ms=int(datetime.datetime(2026, 11, 22, 12).timestamp() * 1000)),
                         lookup_cache=cache).run()
    seconds = time.perf_counter() - started
    assert summary.snapshot is not None and not summary.failures, summary.describe()
    results = summary.results
    return {"seconds": seconds, "bytes": _read["bytes"],
            "superseded": sum(r.rows_superseded for r in results),
            "hits": sum(r.cache_hits for r in results),
            "misses": sum(r.cache_misses for r in results),
            "levels": sorted({e.file.level for r in results for e in r.added})}


MODES = ("direct", "cold", "warm", "warm-new-process")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    _instrument_storage()

    import paimond.lsm.lookup.lookup_cache as lookup_cache
    from paimond.maintenance.execution import LookupCacheSettings

    root = Path(tempfile.mkdtemp(prefix="paimond-lookup-bench-"))
    try:
        warehouse, saved, cache_dir = root / "wh", root / "saved", root / "cache"
        print(f"building {args.rows:,} rows at the max level ...", flush=True)
        started = time.perf_counter()
        table = build(warehouse, args.rows)
        print(f"  built in {time.perf_counter() - started:.1f} s", flush=True)
        settings = LookupCacheSettings(str(cache_dir), 8 << 30)
        results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
        for round_no in range(1, args.rounds + 1):
            write_round(table, args.rows, args.keys, round_no)
            shutil.rmtree(saved, ignore_errors=True)
            shutil.copytree(warehouse, saved)
            for mode in MODES:  # each mode compacts the very same table state
                shutil.rmtree(warehouse)
                shutil.copytree(saved, warehouse)
                if mode == "cold":
                    shutil.rmtree(cache_dir, ignore_errors=True)
                if mode in ("cold", "warm-new-process"):
                    lookup_cache._verified.clear()
                result = compact(warehouse, None if mode == "direct" else settings)
                results[mode].append(result)
                print(f"round {round_no} {mode:17s} {result['seconds']:7.3f} s  "
                      f"{result['bytes'] / 1e6:9.2f} MB read  superseded "
                      f"{result['superseded']:,}  cache hits {result['hits']} misses "
                      f"{result['misses']}  output levels {result['levels']}", flush=True)
        median = {mode: (statistics.median(r["seconds"] for r in runs),
                         statistics.median(r["bytes"] for r in runs))
                  for mode, runs in results.items()}
        print("\nmedian per round (seconds, MB read from storage):")
        for mode, (seconds, read) in median.items():
            print(f"  {mode:17s} {seconds:7.3f} s  {read / 1e6:9.2f} MB")
        cold_s, cold_b = median["cold"]
        direct_s, direct_b = median["direct"]
        for mode in ("warm", "warm-new-process"):
            warm_s, warm_b = median[mode]
            print(f"{mode} vs cold: {cold_s / warm_s:.1f}x less time (goal >= 5x), "
                  f"{cold_b / max(warm_b, 1):.1f}x fewer bytes (goal >= 20x); vs direct "
                  f"(no cache): {direct_s / warm_s:.1f}x less time, "
                  f"{direct_b / max(warm_b, 1):.1f}x fewer bytes")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
