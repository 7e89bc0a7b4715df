"""The daemon's table reading (``Watcher.read``: regeneration items, lag, small files, health)
a window of partitions at a time without statistics (daemon/tables/watch_windows.py) gives what the
whole scan gives (``table_watch.watch`` of ``table_status`` with ``on_files``, the reading
before): the same items, the same figures, the same memory of handled items."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import streaming_tables as streaming
from support.append_windows import add_vectors, window_count, write_append
from support.streaming_tables import write_synthetic

from paimond.daemon.tables.watch import Watch, Watcher, watch, windowed_watch
from paimond.daemon.tables.watch_windows import WatchWindows
from paimond.format.file_index import FileIndexBuilder
from paimond.format.meta.manifest import DataFileMeta
from paimond.format.meta.schema import decode_schema
from paimond.maintenance.regenerate.pending import RegenerationMemory
from paimond.table.catalog import Table, open_table
from paimond.table.indexes.deletion_vectors import index_file_path
from paimond.table.options.core import TableOptions
from paimond.table.scan.snapshot_scan import SnapshotFiles, scan_snapshot
from paimond.table.status.report import table_status
from paimond.table.status.windows import windowed_status
from paimond.table.storage.interface import open_storage

NOW_MS = 1_800_000_000_000


def _whole(table: Table, memory: RegenerationMemory) -> Watch:
    """The reading before: the whole scan, then ``watch``."""
    files: list[SnapshotFiles] = []
    status = table_status(table, verify_files=False, parallelism=4, on_files=files.append)
    return watch(table, status, files[0] if files else None, memory, NOW_MS)


def _windowed(table: Table, memory: RegenerationMemory, budget: int, batch: int) -> Watch:
    """``Watcher.read``'s reading with ``budget`` entries a window, ``batch`` files read
    back at once."""
    status = table_status(table, verify_files=False)
    found = WatchWindows(table, memory, NOW_MS, batch_files=batch)
    snapshot = table.snapshots.latest()
    if snapshot is not None and status.error is None:
        windowed_status(table, table.latest_schema(), snapshot, verify_files=False,
                        budget=budget, also=found)
    return windowed_watch(table, status, found)


def assert_watch_as_before(table: Table, cases: tuple[tuple[int, int], ...] = (
        (1, 20_000), (300, 1), (300, 7))) -> Watch:
    """Every reading equal to the whole scan's, from a fresh memory and from a memory with
    some items handled (the ones still needed are kept, the others forgotten alike)."""
    before_memory = RegenerationMemory()
    before = _whole(table, before_memory)
    handled = {k for keys in before.needs.values() for k in sorted(keys)[::2]} | {"gone/x"}
    expected_handled = set(handled)
    _whole(table, RegenerationMemory(handled=expected_handled))
    for budget, batch in cases:  # (entries a window, files read back at once)
        memory = RegenerationMemory()
        assert _windowed(table, memory, budget, batch) == before
        assert memory.seen_ms == before_memory.seen_ms
        kept = RegenerationMemory(handled=set(handled))
        assert _windowed(table, kept, budget, batch) == before
        assert kept.handled == expected_handled
    watcher = Watcher()
    status = watcher.read(table, NOW_MS)
    assert watcher.last == before
    assert status.to_json() == table_status(table, verify_files=False).to_json()
    return before


@pytest.mark.parametrize("name", ["db.pk_deduplicate", "db.pk_deletion_vectors",
                                  "db.append_unaware", "db.append_fixed_bucket",
                                  "db.append_deletion_vectors", "db.all_types_partitioned"])
def test_pypaimon_tables(oracle_warehouse: tuple[str, list[Any]], name: str) -> None:
    warehouse, _ = oracle_warehouse
    table = open_table(open_storage(warehouse), warehouse, name)
    found = assert_watch_as_before(table, cases=((1, 1), (1, 20_000)))
    assert found.gauges["health"] > 0 and found.gauges["small_files"] >= 0


def _regenerating(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> Table:
    """A primary-key table whose figures need what windows lack: files written before
    deletion vectors were enabled (schema 0) in levels 3 and 4 (level 5 files are of schema
    1, with vectors), with and without deletes (``delete_row_count`` 0, unknown, some);
    ``file-index.bloom-filter.columns`` configured (schema 1) over files without an index,
    with the configured one embedded, with another one embedded, with a lost ``.index``
    file, and data-evolution files (``write_cols``: never re-indexed); vectors for every
    other bucket, one DV index file lost."""
    schema_json = {**streaming.SCHEMA, "id": 1, "options": {
        **streaming.SCHEMA["options"], "deletion-vectors.enabled": "true",
        "file-index.bloom-filter.columns": "v", "manifest.merge-min-count": "1000"}}
    schema = decode_schema(json.dumps(schema_json).encode())
    builder = FileIndexBuilder({f.name: f.type for f in schema.fields},
                               TableOptions.of(schema).file_index_columns)
    configured = builder.finish()
    other = FileIndexBuilder({f.name: f.type for f in schema.fields}, TableOptions.of(
        decode_schema(json.dumps({**schema_json, "options": {
            "file-index.bitmap.columns": "v"}}).encode())).file_index_columns).finish()
    plain = streaming.synthetic_file

    def varied(rng: random.Random, n: int, level: int, min_key: int) -> DataFileMeta:
        meta = plain(rng, n, level, min_key)
        return dataclasses.replace(
            meta, schema_id=1 if level == 5 else 0,
            delete_row_count=None if n % 4 == 0 else 3 if n % 9 == 0 else 0,
            embedded_index=configured if n % 6 == 1 else other if n % 6 == 2 else None,
            write_cols=("k", "v") if n % 5 == 3 else None,
            external_path=None if meta.extra_files else meta.external_path)  # index: local

    monkeypatch.setattr(streaming, "synthetic_file", varied)
    table = write_synthetic(tmp_path, {}, seed, partitions=40, delta_chunk=2)
    (tmp_path / "db.db" / "t" / "schema" / "schema-1").write_text(json.dumps(schema_json))
    table = open_table(open_storage(str(tmp_path)), str(tmp_path), "db.t")
    add_vectors(table, seed)
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    lost = next(e for e in scan_snapshot(table, snapshot).index_entries)
    Path(index_file_path(table, lost.index_file)).unlink()
    return table


def test_synthetic_table_with_regeneration_needs(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    table = _regenerating(tmp_path, 1, monkeypatch)
    assert window_count(table, 300) > 1
    found = assert_watch_as_before(table, cases=((300, 1), (300, 7)))
    with monkeypatch.context() as patched:  # nothing kept whole: every such file read back
        patched.setattr(WatchWindows, "whole", lambda self, entry: False)
        assert assert_watch_as_before(table, cases=((300, 7),)) == found
    stale, vectors = found.needs["rewrite_index"], found.needs["rebuild_dv"]
    files = scan_snapshot(table, table.snapshots.latest()).files  # type: ignore[arg-type]
    upper = [f for f in files if f.meta.level > 0]
    # some files are stale, not every one (configured index, write_cols)
    assert 0 < len(stale) < len(upper)
    assert any(k.startswith("dv-lost/") for k in vectors)
    assert any(k.startswith("dv/") for k in vectors)
    buckets = scan_snapshot(table, table.snapshots.latest()).buckets()  # type: ignore[arg-type]
    assert len(vectors) < len(buckets)  # buckets whose old files hold no deletes need none
    assert found.oldest_level0_millis is not None and found.gauges["small_files"] > 0


def test_without_write_cols_and_delete_counts_the_figures_differ(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fields windows lack do change the figures here: reading the slim entries alone
    (nothing read back whole) would not give the whole scan's."""
    table = _regenerating(tmp_path, 1, monkeypatch)
    before = _whole(table, RegenerationMemory())
    monkeypatch.setattr(WatchWindows, "_read_buckets", _slim_only)
    slim = Watcher()
    assert slim.read(table, NOW_MS).error is None
    assert slim.last.needs["rewrite_index"] > before.needs["rewrite_index"]
    assert slim.last.needs["rebuild_dv"] > before.needs["rebuild_dv"]


def _slim_only(self: WatchWindows, live: Any, buckets: list[Any]) -> None:
    from paimond.maintenance.regenerate.pending import vector_needs
    from paimond.table.status.health import file_figures

    assert self.staleness is not None and self.exists is not None and self.schema is not None
    self.stale.update(self.staleness.stale(f.entry for b in buckets for f in b.files))
    self.vectors.update(vector_needs(self.table, buckets, live.index_entries, self.exists))
    self.figures = file_figures(self.schema, buckets)


@pytest.mark.parametrize("options", [{"bucket": "-1"}, {"bucket": "2"}])
def test_append_tables_with_vectors_and_small_files(tmp_path: Path,
                                                    options: dict[str, str]) -> None:
    table = write_append(tmp_path, {**options, "deletion-vectors.enabled": "true",
                                    "manifest.merge-min-count": "1000"}, 6, partitions=60,
                         delta_chunk=2)
    add_vectors(table, 6)
    assert window_count(table, 300) > 1
    found = assert_watch_as_before(table)
    assert found.gauges["small_files"] > 0 and found.oldest_level0_millis is None


def test_lookup_and_full_compaction_changelog_figures(tmp_path: Path) -> None:
    for producer in ("lookup", "full-compaction"):
        table = write_synthetic(tmp_path / producer, {"changelog-producer": producer}, 4,
                                partitions=30, delta_chunk=2)
        found = assert_watch_as_before(table, cases=((1, 3), (300, 20_000)))
        assert found.changelog_pending_millis is not None


def test_empty_snapshotless_and_unreadable_tables(tmp_path: Path) -> None:
    empty = write_append(tmp_path / "empty", {"bucket": "2"}, 7, partitions=0)
    assert assert_watch_as_before(empty).gauges["small_files"] == 0
    shutil.rmtree(tmp_path / "empty" / "db.db" / "t" / "snapshot")
    (tmp_path / "empty" / "db.db" / "t" / "snapshot").mkdir()
    none = assert_watch_as_before(empty)
    assert none.needs == {} and none.gauges
    broken = write_synthetic(tmp_path / "broken", {}, 5, partitions=3)
    for manifest in (tmp_path / "broken" / "db.db" / "t" / "manifest").glob("manifest-*"):
        manifest.write_bytes(b"not avro")
    assert assert_watch_as_before(broken) == Watch()
