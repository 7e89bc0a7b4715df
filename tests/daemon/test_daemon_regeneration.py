"""The daemon regenerates deletion vectors and file indexes by itself: a live
primary-key table, compacted without vectors into levels 4 and 5, gets
``deletion-vectors.enabled`` through pypaimon and the daemon builds the vectors in bounded
passes (one bucket each); then ``file-index.bloom-filter.columns`` changes and it rewrites the
indexes, file by file, while a writer keeps committing. pypaimon and Apache Paimon's Java
reader read the model's rows once the vectors are built and at every tick of the index
rewrite. On an append table, Java's filtered read skips files by the indexes the daemon
wrote. The gauges of what is left fall to 0 and the jobs are not due again; a lost DV file
is rebuilt."""

from __future__ import annotations

import dataclasses
import datetime
import math
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from pypaimon.schema.schema_change import SchemaChange
from support.dv_layered import layered
from support.file_index_checks import placed_index
from support.java_reader import JavaReader, canonical_rows, multiset_diff
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_append_fixed_bucket, catalog_for

from paimond.clock import Clock
from paimond.config.settings import load_settings
from paimond.daemon.http.control import Control
from paimond.daemon.metrics import Metrics
from paimond.daemon.runner import TableRun
from paimond.daemon.service import Daemon
from paimond.daemon.tables.evaluate import Schedule, Standing, decide
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.jobs import ROUTINE
from paimond.maintenance.manifests import ManifestMergeJob
from paimond.table.catalog import open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

START_MS = 1_900_000_000_000
STEP_MS = 15_000  # more than the regenerating jobs' interval between two ticks
WAIT_S = 120
MISSING = "v5000"  # between the written values v0..v999 (no min/max pruning), never written


@dataclasses.dataclass(frozen=True, slots=True)
class SteppingClock(Clock):
    now_ms: list[int] = dataclasses.field(default_factory=lambda: [START_MS])

    def wall_ms(self) -> int:
        return self.now_ms[0]

    def local_now(self) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.now_ms[0] / 1000)


@pytest.fixture(scope="module")
def append_pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("daemon_regeneration") / "wh"
    return root, build_append_fixed_bucket(str(root)).name


@pytest.fixture
def append_warehouse(append_pristine: tuple[Path, str], tmp_path: Path) -> tuple[str, str]:
    shutil.copytree(append_pristine[0], tmp_path / "wh")
    return str(tmp_path / "wh"), append_pristine[1]


def _daemon(path: str, clock: SteppingClock) -> tuple[Daemon, CollectorRegistry]:
    settings = load_settings(None, env={
        "PAIMOND_WAREHOUSE": path, "PAIMOND_LIMITS_CONCURRENCY": "1",
        "PAIMOND_JOBS_EXPIRE_ENABLED": "false", "PAIMOND_JOBS_MERGE_MANIFESTS_ENABLED": "false",
        "PAIMOND_JOBS_REBUILD_DV_MAX_FILES": "1", "PAIMOND_JOBS_REWRITE_INDEX_MAX_FILES": "3"}, jobs=ROUTINE)
    registry = CollectorRegistry()
    return Daemon(settings, Metrics(registry, clock), clock=clock), registry


def _tick(daemon: Daemon, clock: SteppingClock) -> list[TableRun]:
    clock.now_ms[0] += STEP_MS
    return [f.result(WAIT_S) for f in daemon.tick()]


def _gauge(registry: CollectorRegistry, name: str, table: str) -> float | None:
    return registry.get_sample_value(f"paimond_table_{name}", {"table": table})


def _finished(registry: CollectorRegistry, job: str, table: str) -> float:
    return registry.get_sample_value("paimond_jobs_finished_total", {
        "job": job, "table": table, "outcome": "success"}) or 0.0


def _java_rows(java: JavaReader, warehouse: str, name: str, filters: tuple[str, ...] = ()
               ) -> tuple[list[str], int]:
    database, table = name.split(".")
    read = java.read(Path(warehouse) / f"{database}.db" / table, filters=filters)
    return read.rows, read.candidates


def test_daemon_builds_vectors_then_rewrites_indexes(tmp_path: Path,
                                                     java_reader: JavaReader) -> None:
    live = layered(tmp_path)
    clock = SteppingClock()
    daemon, registry = _daemon(live.warehouse, clock)
    name = live.name
    _tick(daemon, clock)
    _tick(daemon, clock)
    assert _gauge(registry, "buckets_missing_vectors", name) == 0
    assert _finished(registry, "rebuild_dv", name) == 0  # vectors off: nothing to do

    # Vectors enabled on the live table: its level-4 and level-5 files read unmerged.
    catalog_for(live.warehouse).alter_table(
        name, [SchemaChange.set_option("deletion-vectors.enabled", "true")])
    assert not read_rows(live.warehouse, name).equals(live.expected())
    buckets = len(scan_snapshot(live.table, live.table.snapshots.latest()).buckets())  # type: ignore[arg-type]
    # Between passes, buckets not rebuilt yet still read their stale rows: every pass only
    # takes rows away, never one of the model's.
    wanted = Counter(canonical_rows(live.expected()))
    extra = [sum((Counter(canonical_rows(read_rows(live.warehouse, name))) - wanted).values())]
    seen_missing = []
    for _ in range(3 * buckets + 4):
        _tick(daemon, clock)
        seen_missing.append(_gauge(registry, "buckets_missing_vectors", name))
        read = Counter(canonical_rows(read_rows(live.warehouse, name)))
        assert not wanted - read  # no row of the model lost
        extra.append(sum((read - wanted).values()))
        assert extra[-1] <= extra[-2]
        if seen_missing[-1] == 0 and _finished(registry, "rebuild_dv", name):
            break
    assert extra[0] > 0 and extra[-1] == 0
    assert max(m or 0 for m in seen_missing) == buckets > 1
    assert _finished(registry, "rebuild_dv", name) == buckets  # one bucket per pass
    expected = live.expected()
    assert read_rows(live.warehouse, name).equals(expected)
    rows, _ = _java_rows(java_reader, live.warehouse, name)
    assert not multiset_diff(rows, canonical_rows(expected))
    _tick(daemon, clock)
    assert _finished(registry, "rebuild_dv", name) == buckets  # not due again
    shown: Any = Control(daemon).status()[name]
    assert shown["regeneration_left"] == {"rebuild_dv": 0, "rewrite_index": 0}
    assert shown["jobs"]["rebuild_dv"]["why"] == "not due: no bucket misses its deletion vectors"

    # A bloom filter on v: the files of levels >= 1 are re-indexed, three a pass, found from
    # metadata; then another index while a writer keeps committing (its level-0 files are
    # left to compaction, which writes the configured indexes). Both readers agree at every
    # tick. (Java 1.0 filters primary-key tables by stats only: filtered reads are shown on
    # an append table below.)
    upper = len(_upper(live))
    catalog_for(live.warehouse).alter_table(name, [
        SchemaChange.set_option("file-index.bloom-filter.columns", "v"),
        SchemaChange.set_option("file-index.bloom-filter.v.items", "200")])
    stale_seen = _settle(daemon, clock, registry, name, live, java_reader)
    assert max(stale_seen) == upper > 3  # every file of levels >= 1
    assert _finished(registry, "rewrite_index", name) == math.ceil(upper / 3)
    assert all((placed_index(live.table, f) or {}).keys() == {"v"} for f in _upper(live))
    catalog_for(live.warehouse).alter_table(
        name, [SchemaChange.set_option("file-index.bitmap.columns", "ts")])
    stale_seen = _settle(daemon, clock, registry, name, live, java_reader, write_rows=5)
    assert max(stale_seen) >= upper and stale_seen[-1] == 0
    assert all((placed_index(live.table, f) or {}).keys() == {"v", "ts"} for f in _upper(live))


def test_filtered_reads_use_the_indexes_the_daemon_wrote(
        append_warehouse: tuple[str, str], java_reader: JavaReader) -> None:
    """Java 1.0 skips append-table files by their embedded index. The files are compacted
    by paimond first: Java's stats filter crashes on pypaimon's empty stats."""
    warehouse, name = append_warehouse
    table = open_table(open_storage(warehouse), warehouse, name)
    clock = SteppingClock()
    assert not CompactJob(table, clock=clock, full=True, use_processes=False).run().failures
    ManifestMergeJob(table, clock=clock).run()
    everything = read_rows(warehouse, name)
    ids = set(everything.column("id").to_pylist())
    missing = next(i for i in range(250, 300) if i not in ids)  # inside most files' min/max
    rows, before = _java_rows(java_reader, warehouse, name, (f"id={missing}",))
    assert rows == [] and before > 0  # files the stats cannot skip
    catalog_for(warehouse).alter_table(name, [
        SchemaChange.set_option("file-index.bloom-filter.columns", "id"),
        SchemaChange.set_option("file-index.bloom-filter.id.items", "100")])
    daemon, registry = _daemon(warehouse, clock)
    for _ in range(8):
        _tick(daemon, clock)
    assert _gauge(registry, "stale_index_files", name) == 0
    assert _finished(registry, "rewrite_index", name) >= 1
    latest = table.snapshots.latest()
    assert latest is not None
    assert all(f.meta.embedded_index for f in scan_snapshot(table, latest).files)
    assert read_rows(warehouse, name).equals(everything)
    ManifestMergeJob(table, clock=clock).run()
    rows, after = _java_rows(java_reader, warehouse, name, (f"id={missing}",))
    assert rows == [] and after < before  # files skipped by their bloom filters
    rows, _ = _java_rows(java_reader, warehouse, name)
    assert not multiset_diff(rows, canonical_rows(everything))


def _upper(live: Any) -> list[Any]:
    latest = live.table.snapshots.latest()
    assert latest is not None
    return [f for f in scan_snapshot(live.table, latest).files if f.meta.level > 0]


def _settle(daemon: Daemon, clock: SteppingClock, registry: CollectorRegistry, name: str,
            live: Any, java: JavaReader, write_rows: int = 0) -> list[float]:
    """Ticks until nothing is left for rewrite_index, reading the table both ways at each
    (a writer committing ``write_rows`` rows before every other tick); the gauge's values."""
    seen: list[float] = []
    for round_number in range(40):
        if write_rows and round_number % 2 == 0:
            live.write(write_rows)
        _tick(daemon, clock)
        seen.append(_gauge(registry, "stale_index_files", name) or 0.0)
        expected = live.expected()
        assert read_rows(live.warehouse, name).equals(expected), round_number
        rows, _ = _java_rows(java, live.warehouse, name)
        assert not multiset_diff(rows, canonical_rows(expected)), round_number
        if seen[-1] == 0 and max(seen) > 0 and (not write_rows or round_number % 2):
            return seen
    raise AssertionError(f"rewrite_index did not converge: {seen}")


def test_a_lost_vector_file_is_rebuilt_by_the_daemon(tmp_path: Path) -> None:
    live = layered(tmp_path)
    catalog_for(live.warehouse).alter_table(
        live.name, [SchemaChange.set_option("deletion-vectors.enabled", "true")])
    clock = SteppingClock()
    daemon, registry = _daemon(live.warehouse, clock)
    for _ in range(12):
        _tick(daemon, clock)
    assert _gauge(registry, "buckets_missing_vectors", live.name) == 0
    assert read_rows(live.warehouse, live.name).equals(live.expected())
    latest = live.table.snapshots.latest()
    assert latest is not None
    entry = scan_snapshot(live.table, latest).index_entries[0]
    Path(live.table.file_path("index", entry.index_file.file_name)).unlink()
    passes = _finished(registry, "rebuild_dv", live.name)
    clock.now_ms[0] += 700_000  # past the existence check's recheck interval
    for _ in range(4):
        _tick(daemon, clock)
    assert _finished(registry, "rebuild_dv", live.name) == passes + 1
    assert _gauge(registry, "buckets_missing_vectors", live.name) == 0
    assert read_rows(live.warehouse, live.name).equals(live.expected())


def test_regenerating_jobs_are_due_only_with_unsettled_items() -> None:
    schedules = {"rebuild_dv": Schedule(True, 10), "compact": Schedule(True, 60),
                 "rewrite_index": Schedule(True, 10)}
    ran = {job: 1000.0 for job in schedules}
    quiet = Standing(last_snapshot_id=5, compacted_snapshot_id=5, last_run=ran)
    assert decide(quiet, 5, 1100.0, schedules).jobs == ("compact",)
    work = dataclasses.replace(quiet, unsettled={"rebuild_dv": 0, "rewrite_index": 3})
    assert decide(work, 5, 1005.0, schedules).jobs == ()  # within interval_s
    assert decide(work, 5, 1010.0, schedules).jobs == ("rewrite_index",)
    fresh = Standing(unsettled={"rebuild_dv": 2})
    assert decide(fresh, 1, 0.0, schedules).jobs == ("rebuild_dv", "compact")


def test_the_lag_gauge_ages_with_the_clock_between_readings() -> None:
    clock = SteppingClock()
    registry = CollectorRegistry()
    metrics = Metrics(registry, clock)
    metrics.set_level0_oldest("db.t", clock.local_ms() - 30_000)
    assert _gauge(registry, "level0_lag_seconds", "db.t") == 30
    clock.now_ms[0] += 60_000
    assert _gauge(registry, "level0_lag_seconds", "db.t") == 90
    metrics.set_level0_oldest("db.t", None)  # compacted: no level-0 file left
    assert _gauge(registry, "level0_lag_seconds", "db.t") == 0
