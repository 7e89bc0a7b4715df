"""Changelog latency of tables whose changelog compaction produces: the health figure (the
oldest file still waiting for its changelog), the gauge that ages it with the clock, and what
it adds to the table's urgency."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry
from support.pypaimon_tables import TableWriter, catalog_for

from paimond.clock import Clock
from paimond.daemon.metrics import Metrics
from paimond.daemon.tables.evaluate import CHANGELOG_LATENCY_AT_STOP_S, changelog_urgency
from paimond.maintenance.compact.job import CompactJob
from paimond.table.catalog import open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.status.health import file_figures
from paimond.table.storage.interface import open_storage

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.string())])
CLOCK = Clock(fixed_ms=1_700_000_000_000)


def _pending(table: object) -> int | None:
    latest = table.snapshots.latest()  # type: ignore[attr-defined]
    schema = table.latest_schema()  # type: ignore[attr-defined]
    return file_figures(schema, scan_snapshot(table, latest).buckets().values()) \
        .changelog_pending_millis  # type: ignore[arg-type]


def _table(root: Path, producer: str) -> tuple[TableWriter, object]:
    warehouse = str(root / producer)
    writer = TableWriter(catalog_for(warehouse), "db.t", SCHEMA, primary_keys=["k"],
                     options={"bucket": "1", "changelog-producer": producer})
    return writer, open_table(open_storage(warehouse), warehouse, "db.t")


def _created(table: object) -> list[tuple[int, int]]:
    latest = table.snapshots.latest()  # type: ignore[attr-defined]
    return sorted((f.entry.file.level, f.entry.file.creation_time_millis)  # type: ignore[misc]
                  for f in scan_snapshot(table, latest).files)  # type: ignore[arg-type]


def test_lookup_waits_for_level0_and_full_compaction_for_the_top(tmp_path: Path) -> None:
    writer, table = _table(tmp_path, "lookup")
    writer.commit([{"k": 1, "v": "a"}])
    writer.commit([{"k": 2, "v": "b"}])
    assert _pending(table) == min(t for _, t in _created(table))  # the older level-0 file
    CompactJob(table, clock=CLOCK, use_processes=False).run()  # type: ignore[arg-type]
    assert _pending(table) is None  # all of level 0 went up with its changelog

    writer, table = _table(tmp_path, "full-compaction")
    writer.commit([{"k": 1, "v": "a"}])
    CompactJob(table, clock=CLOCK, use_processes=False).run()  # type: ignore[arg-type]
    assert _pending(table) is None  # everything at the top
    writer.commit([{"k": 2, "v": "b"}])
    created = _created(table)
    assert _pending(table) == next(t for level, t in created if level == 0)

    writer, table = _table(tmp_path, "none")
    writer.commit([{"k": 1, "v": "a"}])
    assert _pending(table) is None  # no changelog to wait for


def test_latency_gauge_ages_and_urgency_grows() -> None:
    clock = Clock(fixed_ms=1_000_000)
    registry = CollectorRegistry()
    metrics = Metrics(registry, clock=clock)
    metrics.set_changelog_pending("db.t", clock.local_ms() - 90_000)
    value = registry.get_sample_value("paimond_table_changelog_latency_seconds",
                                      {"table": "db.t"})
    assert value == 90.0
    metrics.set_changelog_pending("db.t", None)
    assert registry.get_sample_value("paimond_table_changelog_latency_seconds",
                                     {"table": "db.t"}) == 0.0
    now = 10_000_000
    assert changelog_urgency(None, now) == 0.0
    assert changelog_urgency(now - int(CHANGELOG_LATENCY_AT_STOP_S * 1000), now) == 1.0
    assert changelog_urgency(now - 30_000, now) < changelog_urgency(now - 60_000, now)


def test_the_daemon_gauges_it_and_ranks_the_waiting_table_first(tmp_path: Path) -> None:
    """Two tables with the same files, one with changelog-producer=lookup: ten minutes after
    the writes the daemon's gauge shows the wait and that table is the more urgent."""
    import datetime
    import time

    from paimond.config.settings import load_settings
    from paimond.daemon.service import Daemon
    from paimond.maintenance.jobs import ROUTINE

    warehouse = str(tmp_path)
    for name, producer in (("db.cl", "lookup"), ("db.plain", "none")):
        writer = TableWriter(catalog_for(warehouse), name, SCHEMA, primary_keys=["k"],
                         options={"bucket": "1", "changelog-producer": producer})
        writer.commit([{"k": 1, "v": "a"}])
    written_local_ms = Clock().local_ms()
    later = Clock(fixed_ms=int(time.time() * 1000) + 600_000)
    settings = load_settings(None, env={
        "PAIMOND_WAREHOUSE": warehouse, "PAIMOND_JOBS_COMPACT_ENABLED": "false",
        "PAIMOND_JOBS_EXPIRE_ENABLED": "false",
        "PAIMOND_JOBS_MERGE_MANIFESTS_ENABLED": "false"}, jobs=ROUTINE)
    registry = CollectorRegistry()
    daemon = Daemon(settings, Metrics(registry, later), clock=later)
    for future in daemon.tick():
        future.result(60)
    latency = registry.get_sample_value("paimond_table_changelog_latency_seconds",
                                        {"table": "db.cl"})
    expected_s = (later.local_ms() - written_local_ms) / 1000
    assert latency is not None and expected_s - 60 <= latency <= expected_s + 60
    assert latency > 500 and datetime.timedelta(seconds=latency) < datetime.timedelta(hours=1)
    assert registry.get_sample_value("paimond_table_changelog_latency_seconds",
                                     {"table": "db.plain"}) == 0.0
    states = daemon.tables
    assert states["db.cl"].urgency - states["db.plain"].urgency == pytest.approx(
        changelog_urgency(later.local_ms() - int(latency * 1000), later.local_ms()), rel=0.01)
    assert states["db.cl"].urgency > states["db.plain"].urgency + 1.5
