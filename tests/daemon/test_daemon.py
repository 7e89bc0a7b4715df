"""The daemon service in-process: jobs run and metrics move, leases exclude replicas,
failing tables back off into quarantine, triggers need the token."""

from __future__ import annotations

import dataclasses
import json
import shutil
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_pk_aggregation, build_pk_deduplicate

from paimond.config.settings import load_settings
from paimond.daemon.http.control import Control
from paimond.daemon.http.endpoints import HttpServer
from paimond.daemon.lease import Leases
from paimond.daemon.lifecycle import Lifecycle
from paimond.daemon.metrics import Metrics
from paimond.daemon.service import Daemon
from paimond.maintenance import jobs as registry_module
from paimond.maintenance.jobs import ROUTINE, CompactSettings
from paimond.table.storage.interface import open_storage


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    warehouse = tmp_path_factory.mktemp("daemon") / "wh"
    return warehouse, [build_pk_deduplicate(str(warehouse)), build_pk_aggregation(str(warehouse))]


@pytest.fixture
def warehouse(pristine: tuple[Path, list[Any]], tmp_path: Path) -> tuple[str, list[Any]]:
    shutil.copytree(pristine[0], tmp_path / "wh")
    return str(tmp_path / "wh"), pristine[1]


def _service(warehouse: str, **env: str) -> tuple[Daemon, CollectorRegistry]:
    settings = load_settings(None, env={
        "PAIMOND_WAREHOUSE": warehouse, "PAIMOND_JOBS_EXPIRE_ENABLED": "false",
        "PAIMOND_JOBS_MERGE_MANIFESTS_ENABLED": "false", "PAIMOND_DAEMON_BACKOFF_BASE_S": "0",
        **env}, jobs=ROUTINE)
    registry = CollectorRegistry()
    return Daemon(settings, Metrics(registry)), registry


def _metric(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    value = registry.get_sample_value(name, labels)
    return value


def test_tick_compacts_every_table_and_sets_gauges(warehouse: tuple[str, list[Any]]) -> None:
    path, specs = warehouse
    before = {s.name: read_rows(path, s.name, include_level0=True) for s in specs}
    service, registry = _service(path, PAIMOND_LIMITS_CONCURRENCY="1")
    runs = [f.result() for f in service.tick()]
    # One tick queues every due table, even beyond the concurrency limit.
    assert sorted(r.table for r in runs) == sorted(s.name for s in specs)
    assert all(r.error is None and r.reports["compact"].outcome == "success" for r in runs)
    for spec in specs:
        assert read_rows(path, spec.name, include_level0=True).equals(before[spec.name])
        assert _metric(registry, "paimond_jobs_finished_total", job="compact", table=spec.name,
                       outcome="success") == 1
        assert (_metric(registry, "paimond_written_rows_total", job="compact", table=spec.name)
                or 0) > 0
        assert _metric(registry, "paimond_table_max_sorted_runs", table=spec.name) is not None
    # Nothing new: the next tick finds nothing due.
    assert service.tick() == []
    text = generate_latest(registry).decode()
    assert "paimond_seconds_since_last_success" in text and "paimond_up 1.0" in text


def test_leases_exclude_a_second_replica(warehouse: tuple[str, list[Any]]) -> None:
    path, specs = warehouse
    now = [1000.0]
    storage = open_storage(path)
    a = Leases(storage, path, "a", ttl_s=60, clock=lambda: now[0])
    b = Leases(storage, path, "b", ttl_s=60, clock=lambda: now[0])
    assert a.acquire("db.t") and not b.acquire("db.t")
    assert a.renew("db.t") and not b.renew("db.t")
    now[0] += 61  # a died: its lease expires
    assert b.acquire("db.t") and not a.renew("db.t")
    b.release("db.t")
    assert a.acquire("db.t")
    racers = [Leases(storage, path, f"r{i}", 60, lambda: now[0] + 1000) for i in range(8)]
    wins = []
    threads = [threading.Thread(target=lambda r=r: wins.append(r.acquire("db.race"))) for r in racers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wins.count(True) == 1


BOTH_SUBMITTED_TIMEOUT_S = 60.0


def test_two_replicas_never_work_on_one_table_at_once(warehouse: tuple[str, list[Any]],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path, specs = warehouse
    active: dict[str, int] = {}
    overlaps, runs = [], []
    lock = threading.Lock()
    both_submitted = threading.Event()
    original = registry_module.JOBS["compact"]

    def counting(table: Any, settings: Any, context: Any) -> Any:
        name = table.name
        with lock:
            active[name] = active.get(name, 0) + 1
            if active[name] > 1:
                overlaps.append(name)
            runs.append(name)
        try:
            # Held until both replicas have submitted their jobs: a second run of this table
            # could only start while this one is counted. The timeout only bounds a failure.
            both_submitted.wait(BOTH_SUBMITTED_TIMEOUT_S)
            return original.run(table, settings, context)
        finally:
            with lock:
                active[name] -= 1

    monkeypatch.setitem(registry_module.JOBS, "compact",  # type: ignore[arg-type]
                        dataclasses.replace(original, run=counting))
    first, _ = _service(path)
    second, _ = _service(path)
    futures = first.tick() + second.tick()
    both_submitted.set()
    results = [f.result() for f in futures]
    assert overlaps == []
    assert set(runs) == {s.name for s in specs}, "every table is still maintained"
    skipped = [r for r in results if r.reports.get("compact") and
               r.reports["compact"].outcome == "skipped"]
    assert len(runs) + len(skipped) == len(results)


def test_unreadable_table_is_quarantined_and_others_keep_going(
        warehouse: tuple[str, list[Any]]) -> None:
    path, specs = warehouse
    victim = specs[0].name
    manifest_dir = Path(path) / "db.db" / victim.split(".")[1] / "manifest"
    for manifest in manifest_dir.glob("manifest-[!l]*"):
        manifest.write_bytes(b"garbage")
    service, registry = _service(path, PAIMOND_DAEMON_QUARANTINE_AFTER="2",
                                 PAIMOND_JOBS_COMPACT_INTERVAL_S="1")
    healthy = specs[1].name
    for _ in range(3):
        for future in service.tick():
            future.result()
        service.tables[victim].next_attempt_at = 0  # skip the wait, keep the count
        service.tables[victim].last_snapshot_id = service.tables[victim].table.snapshots.latest_id()
    status = Control(service).status()
    assert status[victim]["quarantined"] and "CorruptFileError" in str(status[victim]["error"])
    assert not status[healthy]["quarantined"]
    assert _metric(registry, "paimond_table_quarantined", table=victim) == 1
    assert _metric(registry, "paimond_quarantined_tables") == 1
    assert _metric(registry, "paimond_jobs_finished_total", job="compact", table=healthy,
                   outcome="success") == 1
    assert all(f.result().table != victim for f in service.tick()), "quarantined: left alone"


def test_trigger_needs_the_token(warehouse: tuple[str, list[Any]]) -> None:
    path, specs = warehouse
    service, registry = _service(path, PAIMOND_TRIGGER_TOKEN="letmein")
    service.discover()
    server = HttpServer(Control(service), registry, "127.0.0.1", 0, "letmein")
    server.start()
    host, port = server.address
    url = f"http://{host}:{port}"
    try:
        body = json.dumps({"table": specs[0].name, "wait": True}).encode()
        for headers in ({}, {"Authorization": "Bearer nope"}):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(urllib.request.Request(
                    f"{url}/trigger", data=body, method="POST", headers=headers), timeout=30)
            assert refused.value.code == 401
        assert _metric(registry, "paimond_jobs_started_total", job="compact",
                       table=specs[0].name) is None, "a refused trigger runs nothing"
        ok = urllib.request.urlopen(urllib.request.Request(
            f"{url}/trigger", data=body, method="POST",
            headers={"Authorization": "Bearer letmein"}), timeout=60)
        reply = json.loads(ok.read())
        assert reply["table"] == specs[0].name and reply["jobs"]["compact"]["outcome"] == "success"
        for path_, code in (("/healthz", 200), ("/readyz", 200), ("/metrics", 200), ("/x", 404)):
            try:
                assert urllib.request.urlopen(f"{url}{path_}", timeout=10).status == code
            except urllib.error.HTTPError as error:
                assert error.code == code
    finally:
        server.stop()
        Lifecycle(service).shutdown(5)


def test_the_daemon_maintains_deletion_vectors_through_its_lookup_cache(tmp_path: Path) -> None:
    from support.dv_scenarios import SCENARIOS, Live

    live = Live(SCENARIOS[2], str(tmp_path / "wh"))  # BIGINT key, deletion vectors
    live.write(60)
    cache_dir = tmp_path / "cache"
    service, registry = _service(live.warehouse, PAIMOND_LOOKUP_CACHE_DIRECTORY=str(cache_dir))
    for round_no in range(3):
        runs = [f.result() for f in service.tick()]
        assert [r.reports["compact"].outcome for r in runs] == ["success"], runs
        assert not live.level0_files()
        assert read_rows(live.warehouse, live.name).equals(live.expected()), round_no
        live.write(30)
    table = live.name
    assert (_metric(registry, "paimond_dv_rows_superseded_total", table=table) or 0) > 0
    assert (_metric(registry, "paimond_lookup_cache_files_total", table=table,
                    result="miss") or 0) > 0
    assert (_metric(registry, "paimond_lookup_cache_files_total", table=table,
                    result="hit") or 0) > 0
    assert list(cache_dir.glob("*.keys"))


@pytest.mark.parametrize("text, full", [("false", False), ("true", True)])
def test_environment_full_reaches_the_daemons_compaction(
        warehouse: tuple[str, list[Any]], monkeypatch: pytest.MonkeyPatch, text: str,
        full: bool) -> None:
    # PAIMOND_JOBS_COMPACT_FULL=false once became bool("false"): full compactions.
    path, specs = warehouse
    built: list[dict[str, Any]] = []
    from paimond.maintenance.compact import job as compact_module  # the registry imports it per run

    real = compact_module.CompactJob

    def recording(*args: Any, **kwargs: Any) -> Any:
        built.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(compact_module, "CompactJob", recording)
    service, _ = _service(path, PAIMOND_JOBS_COMPACT_FULL=text,
                          PAIMOND_JOBS_COMPACT_PARALLELISM="2")
    assert service.settings.job("compact").settings == CompactSettings(full=full, parallelism=2)
    runs = [f.result() for f in service.tick()]
    assert all(r.error is None and r.reports["compact"].outcome == "success" for r in runs)
    assert [(k["full"], k["parallelism"]) for k in built] == [(full, 2)] * len(specs)


def test_a_compaction_with_a_failed_bucket_is_a_failed_job(
        warehouse: tuple[str, list[Any]]) -> None:
    """The buckets that succeeded stay committed; the job counts as failed (metric outcome,
    error kind, backoff), not as a success that hides a corrupt file."""
    from paimond.table.catalog import open_table
    from paimond.table.scan.snapshot_scan import data_file_path, scan_snapshot
    from paimond.table.storage.interface import open_storage

    path, specs = warehouse
    victim = specs[0].name
    table = open_table(open_storage(path), path, victim)
    latest = table.snapshots.latest()
    assert latest is not None
    buckets = scan_snapshot(table, latest).buckets()
    assert len(buckets) >= 2
    victim_bucket = next(iter(buckets.values()))
    damaged = data_file_path(table, table.latest_schema(), victim_bucket.files[0])
    Path(damaged).write_bytes(b"PAR1 not a parquet file PAR1")
    service, registry = _service(path, PAIMOND_DAEMON_BACKOFF_BASE_S="60")
    runs = {r.table: r for r in (f.result() for f in service.tick())}
    assert runs[victim].error is not None and "BucketsFailedError" in runs[victim].error
    assert damaged in runs[victim].error and runs[victim].error_kind == "data"
    assert _metric(registry, "paimond_jobs_finished_total", job="compact", table=victim,
                   outcome="failure") == 1
    assert _metric(registry, "paimond_job_failures_total", job="compact", table=victim,
                   error_kind="data") == 1
    state = service.tables[victim]
    assert state.failures == 1 and state.next_attempt_at > 0, "backed off"
    after = table.snapshots.latest()
    assert after is not None and after.id == latest.id + 1, "the other buckets committed"
    compacted = {(f.entry.partition, f.entry.bucket) for f in scan_snapshot(table, after).files
                 if f.meta.level > 0}
    assert compacted and (victim_bucket.partition, victim_bucket.bucket) not in compacted


def test_run_once_textfile_carries_the_time_of_the_last_success(
        warehouse: tuple[str, list[Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cron job's textfile had only `paimond_seconds_since_last_success`, frozen at the
    moment it was written, so the staleness alert never fired for a cron job that stopped.
    The timestamp keeps ageing in Prometheus (`time() - ...`)."""
    from paimond.cli.main import main

    path, specs = warehouse
    textfile = tmp_path / "paimond.prom"
    monkeypatch.setenv("PAIMOND_WAREHOUSE", path)
    before = time.time()
    assert main(["run-once", "--textfile", str(textfile)]) == 0
    stamps = {}
    for line in textfile.read_text().splitlines():
        if line.startswith('paimond_last_success_timestamp_seconds{job="compact"'):
            labels, value = line.rsplit(" ", 1)
            stamps[labels] = float(value)
    assert len(stamps) == len(specs), textfile.read_text()
    assert all(before - 1 <= stamp <= time.time() + 1 for stamp in stamps.values())
