"""The per job and table figures (daemon/job_tally.py): the samples `/metrics` gives from the
job events, the scrape's text as Prometheus parses it, and the few objects a pair costs."""

from __future__ import annotations

import gc

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from support.stepping_clock import SteppingClock

from paimond.daemon.events import JobFailed, JobFinished, JobStarted
from paimond.daemon.job_tally import COUNTERS, LABELS
from paimond.daemon.metrics import Metrics
from paimond.daemon.outcomes import JobOutcome


def _finished(table: str, job: str, duration_s: float, **io: int) -> JobFinished:
    return JobFinished(table, job, "id", duration_s, JobOutcome("success", **io))


def test_samples_follow_the_job_events() -> None:
    clock = SteppingClock()
    registry = CollectorRegistry()
    metrics = Metrics(registry, clock)
    value = registry.get_sample_value
    metrics.on_event(JobStarted("db.a", "compact", "id"))
    assert value("paimond_jobs_started_total", {"job": "compact", "table": "db.a"}) == 1
    # no success yet: counted from the first start; no timestamp
    assert value("paimond_last_success_timestamp_seconds", {"job": "compact", "table": "db.a"}
                 ) is None
    metrics.on_event(_finished("db.a", "compact", 2.5, read_bytes=100, written_bytes=40,
                               read_rows=10, written_rows=4))
    metrics.on_event(JobStarted("db.a", "compact", "id"))
    metrics.on_event(JobFailed("db.a", "compact", "id", 0.5, "transient", "OSError: gone"))
    metrics.on_event(JobStarted("db.b", "expire", "id"))
    metrics.on_event(_finished("db.b", "expire", 0.25))
    pair = {"job": "compact", "table": "db.a"}
    assert value("paimond_jobs_started_total", pair) == 2
    assert value("paimond_jobs_finished_total", {**pair, "outcome": "success"}) == 1
    assert value("paimond_jobs_finished_total", {**pair, "outcome": "failure"}) == 1
    assert value("paimond_job_failures_total", {**pair, "error_kind": "transient"}) == 1
    assert value("paimond_job_seconds_total", pair) == 3.0
    assert [value(f"{name}_total", pair) for name in ("paimond_read_bytes",
            "paimond_written_bytes", "paimond_read_rows", "paimond_written_rows")] == \
        [100, 40, 10, 4]
    assert value("paimond_last_success_timestamp_seconds", pair) == clock.start_ms / 1000
    assert value("paimond_job_seconds_total", {"job": "expire", "table": "db.b"}) == 0.25
    # the distribution per job, with no table label
    assert value("paimond_job_duration_seconds_count", {"job": "compact"}) == 2
    assert value("paimond_job_duration_seconds_sum", {"job": "compact"}) == 3.0
    assert value("paimond_job_duration_seconds_bucket", {"job": "compact", "le": "1.0"}) == 1
    since = value("paimond_seconds_since_last_success", pair)
    assert since is not None and 0 <= since < 60


def test_the_scrape_text_parses_with_every_label_and_no_created_series() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    for table in ("db.a", "db.b"):
        metrics.on_event(JobStarted(table, "compact", "id"))
        metrics.on_event(_finished(table, "compact", 1.0, read_rows=5))
    families = {f.name: f for f in text_string_to_metric_families(generate_latest(registry)
                                                                  .decode())}
    for name, _, _ in COUNTERS:
        family = families[name]
        assert family.type == "counter"
        assert [tuple(s.labels) for s in family.samples] == [LABELS[name]] * 2
        assert {s.name for s in family.samples} == {f"{name}_total"}  # no _created
    assert families["paimond_seconds_since_last_success"].type == "gauge"
    assert {s.labels["table"] for s in families["paimond_jobs_finished"].samples} == \
        {"db.a", "db.b"}


def test_a_job_and_table_pair_costs_a_few_objects() -> None:
    """prometheus-client's labelled metrics kept about 50 objects per pair (a histogram child
    alone 33), all traversed by the garbage collector."""
    metrics = Metrics(CollectorRegistry())
    tables = [f"db.t{i}" for i in range(2000)]
    jobs = ("compact", "expire", "tags")
    gc.collect()
    before = len(gc.get_objects())
    for table in tables:
        for job in jobs:
            metrics.on_event(JobStarted(table, job, "id"))
            metrics.on_event(_finished(table, job, 0.1, read_rows=1))
    gc.collect()
    assert (len(gc.get_objects()) - before) / (len(tables) * len(jobs)) < 3
