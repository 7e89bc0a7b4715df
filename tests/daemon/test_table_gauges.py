"""Every table's gauges (daemon/table_gauges.py): figures as set, ages that grow with the clock
between readings (0 with no file behind them), nothing for a gauge never set, and the few
objects a table costs."""

from __future__ import annotations

import gc

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support.stepping_clock import SteppingClock

from paimond.daemon.metrics import Metrics


def test_figures_and_ages() -> None:
    clock = SteppingClock()
    registry = CollectorRegistry()
    metrics = Metrics(registry, clock)
    value = registry.get_sample_value
    metrics.set_table("db.a", level0_files=3, health=87.5)
    metrics.set_table("db.a", level0_files=1)
    assert value("paimond_table_level0_files", {"table": "db.a"}) == 1
    assert value("paimond_table_health", {"table": "db.a"}) == 87.5
    assert value("paimond_table_snapshots", {"table": "db.a"}) is None  # never set
    written = clock.local_ms() - 30_000
    metrics.set_level0_oldest("db.a", written)
    metrics.set_changelog_pending("db.a", None)
    assert value("paimond_table_level0_lag_seconds", {"table": "db.a"}) == 30
    assert value("paimond_table_changelog_latency_seconds", {"table": "db.a"}) == 0
    assert value("paimond_table_postpone_age_seconds", {"table": "db.a"}) is None
    clock.at(45)
    assert value("paimond_table_level0_lag_seconds", {"table": "db.a"}) == 75
    metrics.set_postpone_oldest("db.b", clock.local_ms() - 5_000)
    assert value("paimond_table_postpone_age_seconds", {"table": "db.b"}) == 5
    with pytest.raises(KeyError):
        metrics.set_table("db.a", no_such_gauge=1)
    families = {f.name: f for f in text_string_to_metric_families(generate_latest(registry)
                                                                  .decode())}
    assert families["paimond_table_level0_lag_seconds"].type == "gauge"
    assert [s.labels for s in families["paimond_table_health"].samples] == [{"table": "db.a"}]


def test_a_table_costs_a_few_objects() -> None:
    """prometheus-client's children were about 40 objects per table for these gauges."""
    metrics = Metrics(CollectorRegistry())
    tables = [f"db.t{i}" for i in range(5000)]
    gc.collect()
    before = len(gc.get_objects())
    for table in tables:
        metrics.set_table(table, level0_files=1, max_sorted_runs=2, snapshots=3, health=100,
                          small_files=0, stale_index_files=0, buckets_missing_vectors=0)
        metrics.set_level0_oldest(table, 1)
        metrics.set_changelog_pending(table, None)
        metrics.set_postpone_oldest(table, None)
    gc.collect()
    assert (len(gc.get_objects()) - before) / len(tables) < 2
