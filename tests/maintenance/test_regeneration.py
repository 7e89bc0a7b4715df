"""Bounded regeneration passes (maintenance/regenerate/pending.py): what metadata says is stale or
missing, the daemon's ``max_files`` passes converging over several runs with a memory, and
pypaimon reading the same rows throughout. Lag and health figures (table/status/health.py)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import fastavro
import pytest
from pypaimon.schema.schema_change import SchemaChange
from support.dv_layered import enable_vectors, layered
from support.file_index_checks import assert_index_matches, placed_index
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_append_fixed_bucket, catalog_for

from paimond.clock import SYSTEM_CLOCK, Clock
from paimond.maintenance.regenerate.pending import (
    IndexStaleness,
    RegenerationMemory,
    table_needs,
    vector_needs,
)
from paimond.maintenance.regenerate.rebuild_dv import RebuildDvJob
from paimond.maintenance.regenerate.rewrite_index import IndexRewriteJob
from paimond.table.catalog import Table, open_table
from paimond.table.indexes.file_index_rebuild import FileIndexRebuild
from paimond.table.scan.snapshot_scan import data_file_path, scan_snapshot
from paimond.table.status.health import HealthInputs, file_figures, health_score
from paimond.table.storage.interface import open_storage

CLOCK = Clock(fixed_ms=1_700_000_000_000)
BLOOM = {"file-index.bloom-filter.columns": "id", "file-index.bloom-filter.id.items": "500"}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("regeneration") / "append"
    return root, build_append_fixed_bucket(str(root)).name


def _append(pristine: tuple[Path, str], tmp_path: Path) -> tuple[str, Table]:
    source, name = pristine
    warehouse = str(tmp_path / "wh")
    shutil.copytree(source, warehouse)
    return warehouse, open_table(open_storage(warehouse), warehouse, name)


def _set(warehouse: str, table: Table, options: dict[str, str]) -> None:
    catalog_for(warehouse).alter_table(
        table.name, [SchemaChange.set_option(k, v) for k, v in options.items()], False)


def _live_entries(table: Table) -> list:  # type: ignore[type-arg]
    latest = table.snapshots.latest()
    assert latest is not None
    return [f.entry for f in scan_snapshot(table, latest).files]


def test_bounded_index_passes_converge_and_then_rest(pristine: tuple[Path, str],
                                                      tmp_path: Path) -> None:
    warehouse, table = _append(pristine, tmp_path)
    rows = read_rows(warehouse, table.name)
    files = len(_live_entries(table))
    assert not IndexStaleness(table).stale(_live_entries(table))  # nothing configured
    _set(warehouse, table, BLOOM)
    assert len(IndexStaleness(table).stale(_live_entries(table))) == files

    memory, passes, committed = RegenerationMemory(), 0, 0
    while True:
        summary = IndexRewriteJob(table, clock=CLOCK, max_files=3, memory=memory).run()
        passes += 1
        committed += summary.snapshot is not None
        assert len(summary.changes) <= 3
        assert read_rows(warehouse, table.name).equals(rows)  # every pass reads the same
        if summary.stale_left == 0:
            break
    assert passes == committed == math.ceil(files / 3)
    assert not IndexStaleness(table).stale(_live_entries(table))
    schema = table.latest_schema()
    types = {f.name: f.type for f in schema.fields}
    latest = table.snapshots.latest()
    assert latest is not None
    for live in scan_snapshot(table, latest).files:
        container = placed_index(table, live)
        assert container is not None and list(container) == ["id"]
        with open(data_file_path(table, schema, live), "rb") as avro:  # fastavro, not paimond
            ids = [record["id"] for record in fastavro.reader(avro)]
        assert len(ids) == live.meta.row_count
        assert assert_index_matches(container, {"id": ids}, types) == 1
    # Nothing stale: a pass reads and commits nothing.
    rest = IndexRewriteJob(table, clock=CLOCK, max_files=3, memory=memory).run()
    assert rest.snapshot is None and rest.plan is not None and not rest.plan.files
    # A bloom filter's items decide its size: every file is stale again, under new keys.
    _set(warehouse, table, {"file-index.bloom-filter.id.items": "2000"})
    resized = IndexStaleness(table, memory).stale(_live_entries(table))
    assert len(resized) == files and not set(resized) & memory.handled
    # Another index type: the same.
    _set(warehouse, table, {"file-index.bitmap.columns": "note"})
    stale = IndexStaleness(table, memory).stale(_live_entries(table))
    assert len(stale) == files and not set(stale) & memory.handled


def test_an_item_a_pass_could_not_change_is_not_taken_again(
        pristine: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Should the detection and the rewrite disagree (here the rewrite is made to find every
    index right), a pass handles its items once and the memory keeps later passes off them
    until their state changes; the daemon's figures then show nothing unsettled."""
    warehouse, table = _append(pristine, tmp_path)
    _set(warehouse, table, BLOOM)
    files = len(_live_entries(table))
    memory = RegenerationMemory()
    with monkeypatch.context() as patch:
        patch.setattr(FileIndexRebuild, "__call__", lambda self, entry: None)
        first = IndexRewriteJob(table, clock=CLOCK, max_files=100, memory=memory).run()
        assert first.snapshot is None and first.plan is not None
        assert len(first.plan.files) == files and first.stale_left == 0
        again = IndexRewriteJob(table, clock=CLOCK, max_files=100, memory=memory).run()
        assert again.plan is not None and not again.plan.files
    latest = table.snapshots.latest()
    assert latest is not None
    needs = table_needs(table, scan_snapshot(table, latest), memory, CLOCK.wall_ms())
    assert len(needs["rewrite_index"]) == files and needs["rewrite_index"] <= memory.handled
    # New options are a new state: the files are taken again, and fixed.
    _set(warehouse, table, {"file-index.bloom-filter.id.items": "600"})
    _set(warehouse, table, {"file-index.bitmap.columns": "note"})
    fixed = IndexRewriteJob(table, clock=CLOCK, max_files=100, memory=memory).run()
    assert fixed.snapshot is not None and len(fixed.changes) == files
    assert not IndexStaleness(table).stale(_live_entries(table))


def test_bounded_vector_passes_one_bucket_at_a_time(tmp_path: Path) -> None:
    live = layered(tmp_path)
    latest = live.table.snapshots.latest()
    assert latest is not None
    assert not vector_needs(live.table, scan_snapshot(live.table, latest).buckets().values(),
                            [], lambda _: True)  # vectors off: nothing is missing
    enable_vectors(live)
    scanned = scan_snapshot(live.table, latest)
    needs = vector_needs(live.table, scanned.buckets().values(), scanned.index_entries,
                         lambda _: True)
    buckets = len(scanned.buckets())
    assert len(needs) == buckets > 1 and not any(n.lost for n in needs.values())

    memory, passes = RegenerationMemory(), 0
    while True:
        summary = RebuildDvJob(live.table, clock=SYSTEM_CLOCK, max_files=1, memory=memory).run()
        passes += 1
        assert len(summary.buckets) <= 1
        if summary.needed_left == 0:
            break
    assert passes == buckets
    assert read_rows(live.warehouse, live.name).equals(live.expected())
    assert set(needs) <= memory.handled  # the metadata still shows them; the memory settles
    rest = RebuildDvJob(live.table, clock=SYSTEM_CLOCK, max_files=1, memory=memory).run()
    assert not rest.buckets and rest.snapshot is None

    # A lost DV file: a new item, rebuilt from nothing without being told to discard.
    latest = live.table.snapshots.latest()
    assert latest is not None
    entries = scan_snapshot(live.table, latest).index_entries
    Path(live.table.file_path("index", entries[0].index_file.file_name)).unlink()
    lost = RebuildDvJob(live.table, clock=SYSTEM_CLOCK, max_files=100, memory=memory).run()
    assert lost.snapshot is not None and len(lost.changed) == 1
    assert read_rows(live.warehouse, live.name).equals(live.expected())


def test_a_bounded_pass_on_a_table_without_vectors_is_nothing(pristine: tuple[Path, str],
                                                               tmp_path: Path) -> None:
    _, table = _append(pristine, tmp_path)
    summary = RebuildDvJob(table, clock=CLOCK, max_files=10).run()
    assert summary.snapshot is None and not summary.buckets


def test_file_figures_and_health_score(tmp_path: Path) -> None:
    live = layered(tmp_path)
    live.write(10)  # one level-0 file
    latest = live.table.snapshots.latest()
    assert latest is not None
    buckets = scan_snapshot(live.table, latest).buckets()
    figures = file_figures(live.table.latest_schema(), buckets.values())
    level0 = [f.meta for b in buckets.values() for f in b.levels.get(0, ())]
    assert level0 and figures.oldest_level0_millis == min(
        m.creation_time_millis for m in level0)  # type: ignore[type-var]
    assert figures.data_files == sum(len(b.files) for b in buckets.values())
    assert figures.small_files == sum(len(b.files) - 1 for b in buckets.values())  # all small

    healthy = HealthInputs(max_sorted_runs=0, stop_trigger=8, data_files=10, small_files=0,
                           snapshots=5, snapshot_limit=2**31 - 1, manifest_files=3,
                           manifest_merge_min_count=30)
    assert health_score(healthy) == round(100 - 20 * 5 / 1000 - 20 * 3 / 90, 1) == 99.2
    at_stop = HealthInputs(max_sorted_runs=9, stop_trigger=8, data_files=10, small_files=10,
                           snapshots=5000, snapshot_limit=2**31 - 1, manifest_files=500,
                           manifest_merge_min_count=30)
    assert health_score(at_stop) == 0.0
    append = HealthInputs(max_sorted_runs=0, stop_trigger=None, data_files=4, small_files=1,
                          snapshots=50, snapshot_limit=100, manifest_files=0,
                          manifest_merge_min_count=30)
    assert health_score(append) == 100 - 20 * 0.25 - 20 * 0.5 == 85
